#!/bin/bash
# Session 30 run 9: the 16-bit narrow kernel's Q loads issued before their stores (HEAD) against 577d5d8, both
# forced onto the narrow kernel, two interleaved rounds; the new test and its sanitizers on HEAD.
set -u
P=/tmp/pre; mkdir -p $P/base $P/new/tests
xz -dc .carry/s30/bench_final.xz > $P/base/openmla-bench; xz -dc .carry/s30/bench_q.xz > $P/new/openmla-bench
xz -dc .carry/s30/gpu_tests_q.xz > $P/new/tests/openmla_gpu_tests; chmod +x $P/base/openmla-bench $P/new/openmla-bench $P/new/tests/openmla_gpu_tests
T=$P/new/tests/openmla_gpu_tests
OPENMLA_BACKEND=sm90 timeout 120 $T --gtest_filter='Decode.Sm90Narrow16BitForced' > $OUT/new_test.log 2>&1
echo "new test rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/new_test.log | tr '\n' ' ')"
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $T --gtest_filter=Decode.Sm90Narrow16BitForced --gtest_brief=1 > $OUT/san_$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1)"
done
mkdir -p $OUT/ab
for r in 1 2; do for v in base new; do
  $P/$v/openmla-bench --backend sm90 --sm90-rows-per-cta 32 --shape 16,2,16,1024 --shape 16,2,16,4096 --shape 64,2,16,1024 --shape 64,2,16,4096 --shape 128,2,16,1024 --shape 128,2,16,4096 --shape 128,2,16,16384 --check-samples 1 --json $OUT/ab/r32_${v}_$r.json > /dev/null 2>&1
  $P/$v/openmla-bench --backend sm90 --sm90-rows-per-cta 16 --shape 16,1,16,1024 --shape 128,1,16,1024 --shape 128,1,16,16384 --check-samples 1 --json $OUT/ab/r16_${v}_$r.json > /dev/null 2>&1
done; done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base new
cd $OUT && tar cJf ab.tar.xz ab && rm -r ab
