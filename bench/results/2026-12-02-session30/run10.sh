#!/bin/bash
# Session 30 run 10 (HEAD): the GPU suite under sm90 and the automatic backend on the session's last kernels, and
# the TP8 floor shapes (automatic backend: the 16-bit narrow kernel) timed cold and at the power cap.
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s30/bench_head.xz > $P/openmla-bench; xz -dc .carry/s30/gpu_tests_head.xz > $P/tests/openmla_gpu_tests
chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests
mkdir -p $OUT/check
PREBUILT=$P BACKENDS="sm90 auto" SANITIZE=0 COMMIT=c543e6a bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -4 $OUT/check.txt
S="--shape 128,1,16,16384 --shape 128,1,16,32768 --shape 128,1,16,16384,varlen --shape 128,2,16,16384"
A="--anchors .carry/s30/h200-anchors.csv"
$P/openmla-bench $S $A --json $OUT/floors_default.json | grep -E "^\[|speedup" | head -8
$P/openmla-bench $S $A --sustain-ms 300 --json $OUT/floors_sustained.json | grep -E "^\[" | head -8
cd $OUT && tar cJf check.tar.xz check && rm -r check
