#!/bin/bash
# Run 6 (session 44): run 5's builds (main at 1335dc6; dt1 / dt2 / dt3 timing only) on two seesaw shapes with the
# GPU's SM clock and power logged every 50 ms, lined up with each process (scripts/power_by_run.py): does the copies'
# traffic cost time through the clock (energy) or through a shared resource at the same clock?
set -u
P=/tmp/pre; mkdir -p $P/main $P/dt1 $P/dt2 $P/dt3
for v in main dt1 dt2 dt3; do xz -dc .carry/s44/bench_$v.xz > $P/$v/openmla-bench; done
chmod +x $P/*/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm --format=csv,noheader,nounits -lms 50 > $OUT/smi.csv 2>&1 &
SMI=$!
export AB_ARGS_dt1="--check-samples 0" AB_ARGS_dt2="--check-samples 0" AB_ARGS_dt3="--check-samples 0"
BINS="main=$P/main dt1=$P/dt1 dt2=$P/dt2 dt3=$P/dt3" OUT=$OUT/s ROUNDS=2 AB_STAMPS=$OUT/stamps.txt \
  SHAPES="128,1,128,16384 128,3,32,16384" bash scripts/ab_env.sh --backend sm90 > $OUT/table.md 2>&1
kill $SMI
python3 scripts/power_by_run.py $OUT/smi.csv $OUT/stamps.txt > $OUT/power.md 2>&1
cd $OUT && tar cJf logs.tar.xz s smi.csv stamps.txt; rm -rf s smi.csv stamps.txt
tail -n 4 table.md; cat power.md summary.txt
