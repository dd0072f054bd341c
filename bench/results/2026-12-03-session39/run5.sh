#!/bin/bash
# Session 39 run 5: the FP8 issue's ratios at 3c8931a's kernels with each format in its own process, in alternating
# order over four rounds (scripts/ab_env.sh; run 4 timed the formats in one process, bf16 first).
set -u
P=/tmp/pre; mkdir -p $P/base
xz -dc .carry/s39/bench_base.xz > $P/base/openmla-bench; chmod +x $P/base/openmla-bench
export OPENMLA_COMMIT=3c8931a AB_ARGS_e4m3="--format fp8_e4m3" AB_ARGS_dsmla="--format fp8_ds_mla" \
  AB_ARGS_fp8math="--format fp8_e4m3 --fp8-math qk_and_pv"
BINS="bf16=$P/base e4m3=$P/base dsmla=$P/base fp8math=$P/base" OUT=$OUT/ab ROUNDS=4 \
  SHAPES="128,1,16,16384 128,2,128,8192 128,1,64,16384 128,2,128,16384" \
  bash scripts/ab_env.sh --backend sm90 | tee $OUT/table.md
cd $OUT && tar cJf logs.tar.xz ab && rm -r ab
