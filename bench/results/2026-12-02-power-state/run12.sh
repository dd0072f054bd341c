#!/bin/bash
# Session 29 run 12: the deepseek grid (bf16, automatic backend) timed the default way and with --sustain-ms 300,
# same run, FlashMLA's anchors joined.
set -u
mkdir -p /tmp/pre; xz -dc .carry/s29/bench_sustain.xz > /tmp/pre/openmla-bench; chmod +x /tmp/pre/openmla-bench
B=/tmp/pre/openmla-bench
A="--anchors .carry/s29/h200-anchors.csv"
$B --grid deepseek $A --json $OUT/deepseek_default.json > $OUT/deepseek_default.txt 2>&1
$B --grid deepseek $A --sustain-ms 300 --json $OUT/deepseek_sustained.json > $OUT/deepseek_sustained.txt 2>&1
for n in default sustained; do echo "== $n"; python3 scripts/grid_summary.py $OUT/deepseek_$n.json | tee $OUT/summary_$n.txt; done
