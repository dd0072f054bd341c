#!/bin/bash
# Session 32 run 1 (written in session 31 as its run 12, which could not run). Binaries built from HEAD and carried
# in .carry/s32/ (bench_head.xz, gpu_tests_head.xz). The padded-pages test with its corrected ds_mla / fp16-query
# case (run 11 of bench/results/2026-12-02-h200-seesaw-two-tiles.md), then the whole suite under sm90, the automatic
# and the portable backend with compute-sanitizer on gpu_check.sh's subset and on the tests session 31 added.
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s32/bench_head.xz > $P/openmla-bench; xz -dc .carry/s32/gpu_tests_head.xz > $P/tests/openmla_gpu_tests
chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests
OPENMLA_BACKEND=sm90 timeout 120 $P/tests/openmla_gpu_tests --gtest_filter='Decode.Sm90SchedulesOnPaddedPages' > $OUT/padded.log 2>&1
echo "padded pages (sm90): $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/padded.log | tr '\n' ' ')"
mkdir -p $OUT/check $OUT/new
PREBUILT=$P BACKENDS="sm90 auto portable" SANITIZE=1 COMMIT=$(git rev-parse --short HEAD) bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -12 $OUT/check.txt
F='Decode.Sm90SchedulesOnPaddedPages:Decode.Fp8MathOnPaddedPages:Decode.EveryRequestEmpty:Decode.Sm90SchedulesWithoutCausalMask'
PREBUILT=$P BACKENDS=" " SANITIZE=1 SANITIZE_TIMEOUT=200 SANITIZE_FILTER="$F" COMMIT=$(git rev-parse --short HEAD) bash scripts/gpu_check.sh none $OUT/new > $OUT/new.txt 2>&1
tail -4 $OUT/new.txt
cd $OUT && tar cJf check.tar.xz check new padded.log && rm -r check new padded.log
