#!/bin/bash
# Run 7 (session 41): the seesaw with one instantiation per partial-row form (fix = 7183952) against 7478cc8 (new:
# one seesaw holding both forms, fp16 from 33 rows) and 3c8931a (s39: fp32 rows only), shape-major, two rounds.
# Then the sm90 suite with fix, and memcheck / racecheck on the split tests (both seesaw forms run there).
set -u
P=/tmp/pre; mkdir -p $P/s39 $P/new $P/fix/tests
xz -dc .carry/s41/bench_s39.xz > $P/s39/openmla-bench; xz -dc .carry/s41/bench_new.xz > $P/new/openmla-bench
xz -dc .carry/s41/bench_fix.xz > $P/fix/openmla-bench; xz -dc .carry/s41/gpu_tests_fix.xz > $P/fix/tests/openmla_gpu_tests
chmod +x $P/*/openmla-bench $P/fix/tests/openmla_gpu_tests
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
BINS="s39=$P/s39 new=$P/new fix=$P/fix" OUT=$OUT/a ROUNDS=2 \
  SHAPES="128,1,128,16384 64,1,128,4096 64,2,64,4096 128,4,128,1024 16,4,128,32768 16,1,128,32768 16,1,128,4096 1,1,128,32768 1,1,128,1024 1,2,128,4096 128,1,128,4096,varlen" \
  bash scripts/ab_env.sh --backend auto > $OUT/table.md 2>&1
OPENMLA_BACKEND=sm90 timeout 150 $P/fix/tests/openmla_gpu_tests --gtest_filter='-*Portable*' > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, fix): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ')" >> $OUT/summary.txt
grep -E '^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | head -20 >> $OUT/summary.txt
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=sm90 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 $P/fix/tests/openmla_gpu_tests \
    --gtest_filter='Decode.ScheduleIndependentOfPartCount:Decode.SplitRowsFarOutsideFp16Range:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
  echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.log | tail -1)" >> $OUT/summary.txt
done
cd $OUT && tar cJf logs.tar.xz a gpu_tests_sm90.log sanitizer_*.log && rm -r a gpu_tests_sm90.log sanitizer_*.log
tail -n 13 table.md; cat summary.txt
