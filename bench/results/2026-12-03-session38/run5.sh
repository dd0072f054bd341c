#!/bin/bash
# Session 38 run 5: the deepseek grid with the hoisted spare-P_b decision (the kernel of b0ad2ba, built from a0b0112 and the
# change that b0ad2ba landed), in the same machine start as run 4.
mkdir -p /tmp/pre && xz -dc .carry/s38/bench_hoist.xz > /tmp/pre/ob && chmod +x /tmp/pre/ob && OPENMLA_COMMIT=a0b0112+hoist timeout 270 /tmp/pre/ob --grid deepseek --anchors .carry/s38/h200-anchors.csv --json $OUT/grid.json > $OUT/grid.txt 2>&1; echo rc=$?; python3 scripts/grid_summary.py $OUT/grid.json 2>&1 | tail -20; tail -2 $OUT/grid.txt
