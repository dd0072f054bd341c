#!/bin/bash
# Run 4 (session 41): the GPU suites of 7478cc8 (sm90 forced, portable forced) and compute-sanitizer memcheck /
# racecheck / synccheck on an sm90 subset (the narrow kernel at b = 1 on 16-bit caches, split rows far outside fp16's
# range, part counts, edge lengths), memcheck / racecheck on the same subset under the portable backend.
set -u
P=/tmp/pre; mkdir -p $P/new/tests
xz -dc .carry/s41/bench_new.xz > $P/new/openmla-bench; xz -dc .carry/s41/gpu_tests_new.xz > $P/new/tests/openmla_gpu_tests
chmod +x $P/new/openmla-bench $P/new/tests/openmla_gpu_tests
F='Decode.LongSingleRequestSplitWide:Decode.SplitRowsFarOutsideFp16Range:Decode.ScheduleIndependentOfPartCount:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq1_hq16_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq128_bf16'
PREBUILT=$P/new BACKENDS="sm90 portable" SANITIZE=1 SANITIZE_FILTER="$F" TEST_TIMEOUT=300 SANITIZE_TIMEOUT=90 \
  COMMIT=7478cc8 bash scripts/gpu_check.sh none $OUT/check > $OUT/check.log 2>&1
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=portable timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 $P/new/tests/openmla_gpu_tests \
    --gtest_filter="$F" --gtest_brief=1 > $OUT/check/sanitizer_portable_$tool.log 2>&1
  echo "compute-sanitizer $tool (portable): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/check/sanitizer_portable_$tool.log | tail -1)" >> $OUT/check/summary.txt
done
cd $OUT && tar cJf logs.tar.xz check && cp check/summary.txt check_summary.txt && rm -r check
cat check_summary.txt
