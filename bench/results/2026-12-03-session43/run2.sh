#!/bin/bash
# Run 2 (session 43): FP8 math's ceilings at today's code, timing only. tr4 / tr0 = 8d56dba +
# experiment_transpose_share_timing.diff (session 25's experiment_transpose_share.diff, the count set in the header):
# on full pages each producer warp transposes 4 (half) or 0 of its 8 dim groups of Vᵀ, so PV reads stale Vᵀ (wrong
# results: --check-samples 0). Half is what sharing the transposition across a cluster of two m-tile CTAs could at
# best leave; none is the bound of any design that keeps this kernel's tiles. Against bf16 and FP8 math at 8d56dba
# (rf), one process each, two rounds.
set -u
P=/tmp/pre; mkdir -p $P/rf $P/tr4 $P/tr0
for v in rf tr4 tr0; do xz -dc .carry/s43/bench_$v.xz > $P/$v/openmla-bench; done
chmod +x $P/*/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
M="--format fp8_e4m3 --fp8-math qk_and_pv"
export AB_ARGS_bf="--format bf16" AB_ARGS_fm="$M" AB_ARGS_fh="$M --check-samples 0" AB_ARGS_fz="$M --check-samples 0"
BINS="bf=$P/rf fm=$P/rf fh=$P/tr4 fz=$P/tr0" OUT=$OUT/s ROUNDS=2 \
  SHAPES="33,2,128,32768 128,2,128,8192 128,2,128,16384 128,1,128,16384" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table.md 2>&1
cd $OUT && tar cJf logs.tar.xz s && rm -r s
tail -n 6 table.md; cat summary.txt
