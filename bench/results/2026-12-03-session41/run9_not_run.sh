#!/bin/bash
# NOT RUN (session 41: device time spent). Binaries in the gitignored .carry/s41/ of this workspace; carry [".carry/s41"]:
#   s39     = 3c8931a (fp32 rows everywhere)                          bench_s39.xz
#   fix     = 7183952 (narrow FP8: fp16 rows, compiled in alone)       bench_fix.xz
#   n8fp32  = 7183952 + experiment_narrow_fp8_fp32_rows.diff (-DOPENMLA_EXP_NARROW_FP8_FP32: fp32 rows back)  bench_n8fp32.xz
#   twoform = f4f3057 + experiment_narrow_fp8_two_forms.diff (narrow FP8 instantiated once per form; fp16 where every
#             request is split, detail::sm90_every_request_split, fp32 elsewhere)   bench_twoform.xz, gpu_tests_twoform.xz
# Run 9: did the narrow FP8 kernel (fp16 partial rows since session 40) slow down where few segments are split?
# The e4m3 call at b=128, h_q=16, 16K took 308.7 us at 3c8931a (session 39, run 4) and 322.6 / 331.0 us at
# 7478cc8 / 7183952 (session 41, runs 5 and 8; other machine starts). If so, does twoform keep the best of both?
# Then the sm90 suite with twoform and memcheck / racecheck on the narrow FP8 tests (both forms run there: automatic
# parts fp16, 7 parts fp32; racecheck's known 32-row merge artifact: scripts/racecheck_known.py). If twoform wins, experiment_narrow_fp8_two_forms.diff is the change to land.
set -u
P=/tmp/pre; mkdir -p $P/s39 $P/fix $P/n8fp32 $P/twoform/tests
for v in s39 fix n8fp32 twoform; do xz -dc .carry/s41/bench_$v.xz > $P/$v/openmla-bench; done
xz -dc .carry/s41/gpu_tests_twoform.xz > $P/twoform/tests/openmla_gpu_tests
chmod +x $P/*/openmla-bench $P/twoform/tests/openmla_gpu_tests
B="s39=$P/s39 fix=$P/fix n8fp32=$P/n8fp32 twoform=$P/twoform"
BINS="$B" OUT=$OUT/e ROUNDS=2 SHAPES="128,1,16,16384 128,2,16,16384 64,1,16,4096 16,1,16,4096 1,1,16,32768" \
  bash scripts/ab_env.sh --backend auto --format fp8_e4m3 > $OUT/table_e4m3.md 2>&1
BINS="$B" OUT=$OUT/d ROUNDS=2 SHAPES="128,1,16,16384 16,1,16,4096" \
  bash scripts/ab_env.sh --backend auto --format fp8_ds_mla > $OUT/table_dsmla.md 2>&1
OPENMLA_BACKEND=sm90 timeout 150 $P/twoform/tests/openmla_gpu_tests --gtest_filter='-*Portable*' > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, twoform): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ')" > $OUT/summary.txt
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=sm90 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 $P/twoform/tests/openmla_gpu_tests \
    --gtest_filter='Decode.Sm90ScheduleForced:Decode.Sm90Narrow32RowsForced:Decode.SplitRowsFarOutsideFp16Range' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
  echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.log | tail -1)" >> $OUT/summary.txt
done
cd $OUT && tar cJf logs.tar.xz e d gpu_tests_sm90.log sanitizer_*.log && rm -r e d gpu_tests_sm90.log sanitizer_*.log
tail -n 7 table_e4m3.md; tail -n 4 table_dsmla.md; cat summary.txt
