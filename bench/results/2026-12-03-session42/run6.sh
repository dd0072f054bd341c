#!/bin/bash
# Run 6 (session 42): the narrow FP8 maps' L2 promotion again. Run 5 found the narrow FP8 kernels L2-bound (93% of
# L2 peak at 84% of DRAM peak, a third of their L2 requests hitting lines the 256-B promotion brought in); session 20
# had timed them without promotion at 0.96-0.999x on the kernel of then. promo = 0addfed + experiment_fp8_map_promotion.diff
# (OPENMLA_EXP_PROMO = 256 (main's) | 128 | none for the narrow kernel's e4m3 and ds_mla maps), one binary, three rounds.
set -u
P=/tmp/pre; mkdir -p $P/promo
xz -dc .carry/s42/bench_promo.xz > $P/promo/openmla-bench; chmod +x $P/promo/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
S="128,1,16,16384 128,2,16,16384 64,1,16,4096 16,1,16,4096 1,1,16,32768"
VAR=OPENMLA_EXP_PROMO VALUES="256 128 none" BIN=$P/promo OUT=$OUT/e ROUNDS=3 SHAPES="$S" \
  bash scripts/ab_env.sh --backend auto --format fp8_e4m3 > $OUT/table_e4m3.md 2>&1
VAR=OPENMLA_EXP_PROMO VALUES="256 128 none" BIN=$P/promo OUT=$OUT/d ROUNDS=3 SHAPES="$S" \
  bash scripts/ab_env.sh --backend auto --format fp8_ds_mla > $OUT/table_dsmla.md 2>&1
for v in 256 none; do
  OPENMLA_EXP_PROMO=$v timeout 120 ncu --clock-control none --kernel-name "regex:decode_kernel" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis \
    $P/promo/openmla-bench --shape 128,1,16,16384 --format fp8_e4m3 --replays 5 --check-samples 0 --json /dev/null > $OUT/ncu_e4m3_$v.txt 2>&1
  echo "=== e4m3 promotion $v"; grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L2 Hit Rate" $OUT/ncu_e4m3_$v.txt | head -6
done > $OUT/ncu_summary.txt
cd $OUT && tar cJf logs.tar.xz e d ncu_e4m3_*.txt && rm -r e d ncu_e4m3_*.txt
tail -n 7 table_e4m3.md; tail -n 7 table_dsmla.md; cat ncu_summary.txt; cat summary.txt
