#!/bin/bash
# Session 33 run 1. "new" = the TileMask shared by the wide and FP8-math kernels (tile_mask.cuh: the FP8-math
# kernel now computes its rows' causal limits in the masked branch, as the wide kernel does; the wide kernels' SASS
# is identical). "base" = bd48c69 (HEAD's kernels).
# 1) sm90 GPU suite and the sanitizers on gpu_check.sh's subset (FP8-math tests included);
# 2) FP8 math base vs new, two interleaved rounds; 3) per-kernel durations under Nsight Compute.
set -u
P=/tmp/pre; mkdir -p $P/base $P/new/tests
xz -dc .carry/s33/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s33/bench_new.xz > $P/new/openmla-bench
xz -dc .carry/s33/gpu_tests_new.xz > $P/new/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/new/openmla-bench $P/new/tests/openmla_gpu_tests
mkdir -p $OUT/check $OUT/fp8m
PREBUILT=$P/new BACKENDS="sm90" SANITIZE=1 COMMIT=$(git rev-parse --short HEAD) bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -9 $OUT/check.txt
F="--shape 128,2,128,8192 --shape 128,1,128,16384 --shape 16,4,128,32768 --shape 128,4,128,1024 --shape 64,2,64,4096 --shape 1,1,128,32768"
for r in 1 2; do
  for v in base new; do
    timeout 100 $P/$v/openmla-bench --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv $F --check-samples 0 --json $OUT/fp8m/fp8m_${v}_$r.json > /dev/null 2>&1 || echo "fp8m $v $r failed"
  done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/fp8m base new | tee $OUT/table_fp8math.md
# 3) Per-kernel durations (Nsight Compute, clocks not locked) against the per-call time: decode and combine.
$P/new/openmla-bench --shape 128,1,64,4096 --shape 128,1,16,4096 --shape 128,1,64,16384 --shape 128,1,64,1024 --check-samples 0 --json $OUT/percall.json | tail -5
for s in 128,1,64,4096 128,1,16,4096 128,1,64,16384 128,1,64,1024; do
  timeout 120 ncu --clock-control none --kernel-name "regex:decode_kernel|combine" --launch-skip 6 --launch-count 4 \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg \
    --csv $P/new/openmla-bench --shape $s --replays 5 --check-samples 0 --json /dev/null > $OUT/ncu_$s.csv 2>&1
  echo "== $s"; grep -E '"(gpu__time_duration.sum|dram__throughput.avg.pct_of_peak_sustained_elapsed|sm__cycles_active.avg)"' $OUT/ncu_$s.csv \
    | awk -F'","' '{k=$5; sub(/\(.*/,"",k); printf "%-40s %-55s %s %s\n", substr(k,1,40), $(NF-2), $(NF-1), $NF}' | head -12
done
cd $OUT && tar cJf logs.tar.xz check fp8m ncu_*.csv && rm -r check fp8m ncu_*.csv
