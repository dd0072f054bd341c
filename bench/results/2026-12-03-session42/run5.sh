#!/bin/bash
# Run 5 (session 42): why the narrow FP8 kernels stream at ~4.0 TB/s where the narrow 16-bit kernel reaches 4.38
# (run 3: b=128, s_q=1, h_q=16, 16K). Nsight Compute on the three (lead = 1b0ef20; memory and L2 throughput, stall
# reasons), and the 32-row form forced on 16-row shapes (one CTA per SM, two consumers taking alternate tiles of a
# 4-stage ring: the same pages in flight per SM as two 16-row CTAs).
set -u
P=/tmp/pre; mkdir -p $P/lead
xz -dc .carry/s42/bench_lead.xz > $P/lead/openmla-bench; chmod +x $P/lead/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
export AB_ARGS_r16="--format fp8_e4m3" AB_ARGS_r32="--format fp8_e4m3 --sm90-rows-per-cta 32" \
  AB_ARGS_d16="--format fp8_ds_mla" AB_ARGS_d32="--format fp8_ds_mla --sm90-rows-per-cta 32"
BINS="r16=$P/lead r32=$P/lead d16=$P/lead d32=$P/lead" OUT=$OUT/a ROUNDS=2 SHAPES="128,1,16,16384 64,1,16,4096 16,1,16,4096" \
  bash scripts/ab_env.sh --backend auto > $OUT/table_r32.md 2>&1
i=0
for fmt in fp8_e4m3 fp8_ds_mla bf16; do
  i=$((i + 1))
  timeout 120 ncu --clock-control none --kernel-name "regex:decode_kernel" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats \
    $P/lead/openmla-bench --shape 128,1,16,16384 --format $fmt --replays 5 --check-samples 0 --json /dev/null > $OUT/ncu_$fmt.txt 2>&1
  echo "ncu $fmt rc=$?" >> $OUT/summary.txt
done
for fmt in fp8_e4m3 fp8_ds_mla bf16; do
  echo "=== $fmt"; grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|L2 Hit|Mem Busy|Max Bandwidth|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Stall" $OUT/ncu_$fmt.txt | head -24
done > $OUT/ncu_summary.txt
cd $OUT && tar cJf logs.tar.xz a ncu_fp8_e4m3.txt ncu_fp8_ds_mla.txt ncu_bf16.txt && rm -r a && rm -f ncu_fp8_e4m3.txt ncu_fp8_ds_mla.txt ncu_bf16.txt
tail -n 5 table_r32.md; cat ncu_summary.txt; cat summary.txt
