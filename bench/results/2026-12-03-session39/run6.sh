#!/bin/bash
# Session 39 run 6 (timing only): what the fp32 partial rows' stores cost the sm90 kernels. np = the same build with
# the partial O rows not stored (-DOPENMLA_EXP_NO_PARTIAL_STORES, experiment_no_partial_stores.diff; the LSE partials
# and the combine unchanged, so the outputs are wrong: not checked). Shapes where requests are split: b = 1 and 16,
# the varlen batch, and FP8 math at the FP8 issue's compute-bound shape.
set -u
P=/tmp/pre; mkdir -p $P/base $P/np
xz -dc .carry/s39/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s39/bench_np.xz > $P/np/openmla-bench
chmod +x $P/base/openmla-bench $P/np/openmla-bench
export AB_ARGS_np="--check-samples 0" AB_ARGS_base="--check-samples 0"
BINS="base=$P/base np=$P/np" OUT=$OUT/bf16 ROUNDS=3 \
  SHAPES="1,1,128,32768 1,1,16,32768 1,1,16,4096 16,1,128,4096 16,1,16,4096 16,4,128,32768 128,1,128,4096,varlen 128,2,128,8192" \
  bash scripts/ab_env.sh --backend sm90 | tee $OUT/table_bf16.md
BINS="base=$P/base np=$P/np" OUT=$OUT/fp8math ROUNDS=3 SHAPES="128,2,128,8192 1,1,128,32768" \
  bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv | tee $OUT/table_fp8math.md
cd $OUT && tar cJf logs.tar.xz bf16 fp8math && rm -r bf16 fp8math
