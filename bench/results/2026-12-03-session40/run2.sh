#!/bin/bash
# Session 40 run 2 (timing experiment): run 1's bf16 partial rows, now stored as the final output is (lanes c and
# c ^ 1 swap a word, 8-byte stores, a quad writes whole 32-byte sectors), where run 1's 4-byte stores left each
# instruction half a sector per row (experiment_half_partials_8byte.diff, -DOPENMLA_EXPERIMENT_HALF_PARTIALS).
# hp8 = that build; base = 3c8931a's kernels (HEAD's are the same). Round 1 checked against the CPU reference.
set -u
P=/tmp/pre; mkdir -p $P/base $P/hp8
xz -dc .carry/s39/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s40/bench_hp8.xz > $P/hp8/openmla-bench
chmod +x $P/base/openmla-bench $P/hp8/openmla-bench
BINS="base=$P/base hp8=$P/hp8" OUT=$OUT/bf16 ROUNDS=3 \
  SHAPES="1,1,128,32768 1,1,64,32768 16,1,128,4096 128,1,128,4096,varlen 1,1,128,131072" \
  bash scripts/ab_env.sh --backend sm90 | tee $OUT/table_bf16.md
BINS="base=$P/base hp8=$P/hp8" OUT=$OUT/fp8math ROUNDS=3 SHAPES="1,1,128,32768" \
  bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv | tee $OUT/table_fp8math.md
cd $OUT && tar cJf logs.tar.xz bf16 fp8math && rm -r bf16 fp8math
