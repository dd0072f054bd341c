#!/bin/bash
# Run 3 (session 42): issue #4's targets at main (1b0ef20), each format and mode in its own process, four rounds in
# alternating order (session 39's run-5 method: no format inherits a warmer GPU from another). sm90: bf16, e4m3, ds_mla,
# e4m3 with FP8 math; portable: bf16, e4m3, ds_mla at the memory-bound shape.
set -u
P=/tmp/pre; mkdir -p $P/lead
xz -dc .carry/s42/bench_lead.xz > $P/lead/openmla-bench; chmod +x $P/lead/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
export OPENMLA_COMMIT=1b0ef20
export AB_ARGS_bf16="--backend auto" AB_ARGS_e4m3="--backend auto --format fp8_e4m3" AB_ARGS_dsmla="--backend auto --format fp8_ds_mla" \
  AB_ARGS_fp8m="--backend auto --format fp8_e4m3 --fp8-math qk_and_pv"
BINS="bf16=$P/lead e4m3=$P/lead dsmla=$P/lead fp8m=$P/lead" OUT=$OUT/s ROUNDS=4 \
  SHAPES="128,1,16,16384 128,1,64,16384 128,2,128,8192 128,2,128,16384" bash scripts/ab_env.sh > $OUT/table_sm90.md 2>&1
export AB_ARGS_pbf16="--backend portable" AB_ARGS_pe4m3="--backend portable --format fp8_e4m3" \
  AB_ARGS_pdsmla="--backend portable --format fp8_ds_mla"
BINS="pbf16=$P/lead pe4m3=$P/lead pdsmla=$P/lead" OUT=$OUT/p ROUNDS=4 SHAPES="128,1,16,16384" \
  bash scripts/ab_env.sh > $OUT/table_portable.md 2>&1
cd $OUT && tar cJf logs.tar.xz s p && rm -r s p
tail -n 6 table_sm90.md; tail -n 3 table_portable.md; cat summary.txt
