#!/bin/bash
# NOT RUN in session 30: the device budget ran out before it. Run it first next session (then the whole suite).
# Session 30 run 11 (728cd71): the new guard, split and graph-replay tests of the 16-bit narrow kernel under sm90 and
# the automatic backend, and memcheck / racecheck / synccheck on them (sm90).
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s30/gpu_tests_guards.xz > $P/gpu_tests; chmod +x $P/gpu_tests
F='Decode.Narrow16BitLargeBatchSplitAndGuards:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.GraphReplayWithChangingLengthsEqualsEager:Decode.Sm90Narrow16BitForced'
for be in sm90 auto; do
  OPENMLA_BACKEND=$be timeout 120 $P/gpu_tests --gtest_filter="$F" > $OUT/tests_$be.log 2>&1
  echo "$be rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/tests_$be.log | tr '\n' ' ')"; grep -E "Failure|FAILED  \]" $OUT/tests_$be.log | head -5
done
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $P/gpu_tests --gtest_filter="$F" --gtest_brief=1 > $OUT/san_$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1)"
done
