#!/bin/bash
# Session 31 run 5 (5784a0d, the session's kernels and dispatch): the GPU suite under sm90 and the automatic backend,
# compute-sanitizer on gpu_check.sh's subset, and the s_q = 3 shapes timed with the automatic schedule.
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s31/bench_final.xz > $P/openmla-bench; xz -dc .carry/s31/gpu_tests_final.xz > $P/tests/openmla_gpu_tests
chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests
mkdir -p $OUT/check
PREBUILT=$P BACKENDS="sm90 auto" SANITIZE=1 COMMIT=5784a0d bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -12 $OUT/check.txt
$P/openmla-bench --shape 128,3,32,16384 --shape 128,3,32,4096 --shape 16,5,16,16384 --shape 128,1,64,16384 --json $OUT/auto_sq3.json | grep -E "^\["
cd $OUT && tar cJf check.tar.xz check && rm -r check
