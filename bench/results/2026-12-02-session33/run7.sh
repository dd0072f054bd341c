#!/bin/bash
# Session 33 run 7: the deepseek grid at e7b467f, default timing, FlashMLA's anchors joined.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s33/bench_final.xz > $P/openmla-bench; chmod +x $P/openmla-bench
export OPENMLA_COMMIT=e7b467f
$P/openmla-bench --grid deepseek --anchors .carry/s33/h200-anchors.csv --json $OUT/deepseek_default.json > $OUT/deepseek_default.txt 2>&1
echo "grid rc=$?"
python3 scripts/grid_summary.py $OUT/deepseek_default.json | tee $OUT/summary_default.txt
