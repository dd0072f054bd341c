#!/bin/bash
# Session 29 run 15: openmla-bench after the review's timing helper (both timing modes, one shape each).
set -u
mkdir -p /tmp/pre; xz -dc .carry/s29/bench_sustain.xz > /tmp/pre/openmla-bench; chmod +x /tmp/pre/openmla-bench
B=/tmp/pre/openmla-bench
$B --shape 128,1,128,16384 --shape 128,1,16,16384 --json $OUT/default.json > $OUT/default.txt 2>&1; echo "default rc $?"
$B --shape 128,1,128,16384 --shape 128,1,16,16384 --sustain-ms 300 --json $OUT/sustained.json > $OUT/sustained.txt 2>&1; echo "sustained rc $?"
grep -E "^bf16|commit|sustained:" $OUT/default.txt $OUT/sustained.txt
