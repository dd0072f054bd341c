#!/bin/bash
# Session 31 run 11 (and 11b, after the helper fix): three new GPU tests — every sm90 schedule on pages padded past 64 tokens
# (Sm90SchedulesOnPaddedPages), the FP8-math kernel on them (Fp8MathOnPaddedPages), a batch whose every request
# is empty (EveryRequestEmpty) — under sm90, the automatic and the portable backend, and compute-sanitizer on
# them (sm90; racecheck's reports sorted by racecheck_known.py).
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s31/gpu_tests_padded.xz > $P/gpu_tests; chmod +x $P/gpu_tests
F='Decode.Sm90SchedulesOnPaddedPages:Decode.Fp8MathOnPaddedPages:Decode.EveryRequestEmpty'
for be in sm90 auto portable; do
  OPENMLA_BACKEND=$be timeout 200 $P/gpu_tests --gtest_filter="$F" > $OUT/test_$be.log 2>&1
  echo "$be rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]|SKIPPED \]' $OUT/test_$be.log | tr '\n' ' ')"; grep -E "Failure|FAILED  \]|Which is|Expected|trace" $OUT/test_$be.log | head -12
done
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 150 compute-sanitizer --tool $tool --print-limit 100000 --error-exitcode 9 $P/gpu_tests --gtest_filter="$F" --gtest_brief=1 > $OUT/san_$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1)"
done
python3 scripts/racecheck_known.py $OUT/san_racecheck.log . | tail -1
cd $OUT && tar cJf logs.tar.xz *.log && rm *.log
