#!/bin/bash
# Session 31 run 10: the new Decode.Sm90SchedulesWithoutCausalMask (every sm90 schedule and cache format, several
# query tokens, no causal mask) under sm90, the automatic and the portable backend, and compute-sanitizer on it
# (sm90; racecheck's reports sorted by racecheck_known.py, since the FP8 32-row narrow kernel is among them).
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s31/gpu_tests_noncausal.xz > $P/gpu_tests; chmod +x $P/gpu_tests
F='Decode.Sm90SchedulesWithoutCausalMask'
for be in sm90 auto portable; do
  OPENMLA_BACKEND=$be timeout 200 $P/gpu_tests --gtest_filter="$F" > $OUT/test_$be.log 2>&1
  echo "$be rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/test_$be.log | tr '\n' ' ')"; grep -E "Failure|FAILED  \]" $OUT/test_$be.log | head -5
done
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 200 compute-sanitizer --tool $tool --print-limit 100000 --error-exitcode 9 $P/gpu_tests --gtest_filter="$F" --gtest_brief=1 > $OUT/san_$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1)"
done
python3 scripts/racecheck_known.py $OUT/san_racecheck.log . | tail -1
cd $OUT && tar cJf logs.tar.xz *.log && rm *.log
