#!/bin/bash
# Session 37 run 6: the deepseek grid at c7be677 (spare P_b up to 128 rows), FlashMLA's anchors.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s37/bench_land.xz > $P/openmla-bench; chmod +x $P/openmla-bench
export OPENMLA_COMMIT=${COMMIT:-unknown}
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 420 $P/openmla-bench --grid deepseek --anchors .carry/s37/h200-anchors.csv --json $OUT/grid.json > $OUT/grid.txt 2>&1
echo "grid rc=$? at ${SECONDS} s"
python3 scripts/grid_summary.py $OUT/grid.json | tee $OUT/grid_summary.txt
cd $OUT && xz -9 grid.json grid.txt
