#!/bin/bash
# Session 40 run 1 (timing experiment): partial O rows as bf16 (half the bytes) instead of fp32, written by the
# wide and FP8-math kernels (o_fragment.cuh, 8-byte stores as the final output's) and read by the combine
# (-DOPENMLA_EXPERIMENT_HALF_PARTIALS, experiment_half_partials.diff). hp = that build; base = 3c8931a's kernels
# (HEAD's kernels are the same). Only shapes whose split requests run on the wide or FP8-math kernel (the narrow
# and portable kernels still write fp32, which this build's combine would misread). Round 1 checked against the
# CPU reference (bf16 partials stay inside the 1e-2 tolerance).
set -u
P=/tmp/pre; mkdir -p $P/base $P/hp
xz -dc .carry/s39/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s40/bench_hp.xz > $P/hp/openmla-bench
chmod +x $P/base/openmla-bench $P/hp/openmla-bench
BINS="base=$P/base hp=$P/hp" OUT=$OUT/bf16 ROUNDS=3 \
  SHAPES="1,1,128,32768 1,1,64,32768 16,1,128,4096 16,4,128,32768 128,1,128,4096,varlen 128,2,128,8192 1,1,128,131072" \
  bash scripts/ab_env.sh --backend sm90 | tee $OUT/table_bf16.md
BINS="base=$P/base hp=$P/hp" OUT=$OUT/fp8math ROUNDS=3 SHAPES="1,1,128,32768 128,2,128,8192" \
  bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv | tee $OUT/table_fp8math.md
BINS="base=$P/base hp=$P/hp" OUT=$OUT/e4m3 ROUNDS=2 SHAPES="1,1,128,32768" \
  bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3 | tee $OUT/table_e4m3.md
cd $OUT && tar cJf logs.tar.xz bf16 fp8math e4m3 && rm -r bf16 fp8math e4m3
