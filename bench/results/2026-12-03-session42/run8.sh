#!/bin/bash
# Run 8 (session 42): L2 promotion of the wide and FP8-math kernels' FP8 maps (run 6 did the narrow ones), at the FP8
# issue's 64+-row shapes. wpromo = 02204e2 + experiment_wide_fp8_map_promotion.diff (OPENMLA_EXP_PROMO = 256 (main's) |
# 128 | none for the wide kernel's e4m3 and ds_mla maps and the FP8-math map), one binary, two rounds.
set -u
P=/tmp/pre; mkdir -p $P/w
xz -dc .carry/s42/bench_wpromo.xz > $P/w/openmla-bench; chmod +x $P/w/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
for f in fp8_e4m3 fp8_ds_mla; do
  VAR=OPENMLA_EXP_PROMO VALUES="256 128 none" BIN=$P/w OUT=$OUT/$f ROUNDS=2 SHAPES="128,2,128,8192 128,1,64,16384" \
    bash scripts/ab_env.sh --backend auto --format $f > $OUT/table_$f.md 2>&1
done
VAR=OPENMLA_EXP_PROMO VALUES="256 128 none" BIN=$P/w OUT=$OUT/m ROUNDS=2 SHAPES="128,2,128,8192" \
  bash scripts/ab_env.sh --backend auto --format fp8_e4m3 --fp8-math qk_and_pv > $OUT/table_fp8math.md 2>&1
cd $OUT && tar cJf logs.tar.xz fp8_e4m3 fp8_ds_mla m && rm -r fp8_e4m3 fp8_ds_mla m
for t in table_fp8_e4m3.md table_fp8_ds_mla.md; do tail -n 4 $t; done; tail -n 3 table_fp8math.md; cat summary.txt
