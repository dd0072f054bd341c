#!/bin/bash
# Run 3 (session 41): the landing check of 7478cc8 against e7f10da (base; decode SASS identical to 926ddfc).
#   A: sm90 automatic at b = 1-2, h_q = 16 (the narrow kernel now on 16-bit caches there), rounds 3;
#   B: portable, 16-bit and e4m3 (whole-sector final output in the 64-row tiles only), rounds 3;
#   C: Nsight Compute durations of the decode kernel and the combine, one call each (serialized, caches kept).
set -u
P=/tmp/pre; mkdir -p $P/base $P/new/tests
xz -dc .carry/s41/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s41/bench_new.xz > $P/new/openmla-bench
xz -dc .carry/s41/gpu_tests_new.xz > $P/new/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/new/openmla-bench $P/new/tests/openmla_gpu_tests
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > $OUT/gpu.txt
BINS="base=$P/base new=$P/new" OUT=$OUT/a ROUNDS=3 SHAPES="1,1,16,4096 1,1,16,32768 2,1,16,4096 2,1,16,16384 1,1,8,32768" \
  bash scripts/ab_env.sh --backend auto > $OUT/table_auto.md 2>&1
BINS="base=$P/base new=$P/new" OUT=$OUT/b ROUNDS=3 \
  SHAPES="1,1,16,4096 128,1,16,4096 128,1,64,1024 128,2,128,1024 64,2,64,4096" \
  bash scripts/ab_env.sh --backend portable > $OUT/table_portable.md 2>&1
BINS="base=$P/base new=$P/new" OUT=$OUT/b8 ROUNDS=3 SHAPES="128,1,16,4096 128,2,128,1024" \
  bash scripts/ab_env.sh --backend portable --format fp8_e4m3 > $OUT/table_portable_e4m3.md 2>&1
for s in 16,1,16,4096 64,1,16,4096 1,1,128,32768 16,1,128,4096; do
  timeout 60 ncu --clock-control none --cache-control none --kernel-name "regex:decode_kernel|combine_kernel" \
    --launch-skip 8 --launch-count 6 --metrics gpu__time_duration.sum --csv \
    $P/new/openmla-bench --shape $s --replays 5 --check-samples 0 --json /dev/null > $OUT/d_ncu_$s.csv 2>&1
  echo "== $s"; grep -E 'gpu__time_duration' $OUT/d_ncu_$s.csv | awk -F'","' '{print $5, $(NF)}' | sed -E 's/\(.*//' | cut -c1-60
done > $OUT/ncu_durations.txt
cd $OUT && tar cJf logs.tar.xz a b b8 d_ncu_*.csv && rm -r a b b8 d_ncu_*.csv
tail -n 7 table_auto.md; tail -n 7 table_portable.md; tail -n 4 table_portable_e4m3.md; cat ncu_durations.txt; cat gpu.txt
