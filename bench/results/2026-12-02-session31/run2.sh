#!/bin/bash
# Session 31 run 2: (a) f94aa38 (the 16-bit narrow loop's single PV wait, and the new s_q = 3 cases: 24-384 rows,
# query tiles filled in part): the sm90 suite, and the s_q = 3 cases under the automatic and the portable backend; (b) the seesaw from 33 rows instead of 128 (`s33`: only
# choose_sm90_schedule differs), the sm90 suite and memcheck / racecheck / synccheck on its new 48-96-row cases.
set -u
P=/tmp/pre; mkdir -p $P/head $P/s33
xz -dc .carry/s31/gpu_tests_fold.xz > $P/head/gpu_tests; xz -dc .carry/s31/gpu_tests_seesaw33.xz > $P/s33/gpu_tests
chmod +x $P/head/gpu_tests $P/s33/gpu_tests
N='*sq3_*:Decode.Fp8MathMatchesItsReference'
OPENMLA_BACKEND=sm90 timeout 300 $P/head/gpu_tests --gtest_filter='*-*Portable*' > $OUT/head_suite_sm90.log 2>&1
echo "f94aa38 suite sm90: rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/head_suite_sm90.log | tr '\n' ' ')"; grep -E "^\[  FAILED  \]" $OUT/head_suite_sm90.log | head -8
for be in auto portable; do
  OPENMLA_BACKEND=$be timeout 200 $P/head/gpu_tests --gtest_filter="$N" > $OUT/sq3_$be.log 2>&1
  echo "f94aa38, s_q=3 cases, $be: rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/sq3_$be.log | tr '\n' ' ')"; grep -E "^\[  FAILED  \]" $OUT/sq3_$be.log | head -5
done
OPENMLA_BACKEND=sm90 timeout 300 $P/s33/gpu_tests --gtest_filter='*-*Portable*' > $OUT/s33_suite_sm90.log 2>&1
echo "s33 suite sm90: rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/s33_suite_sm90.log | tr '\n' ' ')"; grep -E "^\[  FAILED  \]" $OUT/s33_suite_sm90.log | head -8
S='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq3_hq16_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq3_hq32_causal_fp16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq1_hq64_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq16_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq3_hq128_causal_bf16'
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $P/s33/gpu_tests --gtest_filter="$S" --gtest_brief=1 > $OUT/s33_san_$tool.log 2>&1
  echo "s33 sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/s33_san_$tool.log | tail -1)"
done
cd $OUT && tar cJf logs.tar.xz *.log && rm *.log
