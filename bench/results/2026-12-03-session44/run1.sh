#!/bin/bash
# Run 1 (session 44): the seesaw's stage halves given back in two quarters.
# q2 = main (1335dc6) + the quarter release (both consumers' last PV on a half as two m64n128 groups; the producer
# refills the half's lower two V boxes once they are read, the upper two and the rope box after), q1 = the same with
# consumer 0 only (b's half, the pair's last release). Against main, one process per variant and shape, two rounds.
# Then the sm90 suite and memcheck / racecheck / synccheck on the seesaw's tests with q2.
# Binaries built on the CPU machine (Release), carried xz-compressed in .carry/s44.
set -u
SECONDS=0
P=/tmp/pre; mkdir -p $P/main $P/q1 $P/q2/tests
for v in main q1 q2; do xz -dc .carry/s44/bench_$v.xz > $P/$v/openmla-bench; done
xz -dc .carry/s44/gpu_tests_q2.xz > $P/q2/tests/openmla_gpu_tests
chmod +x $P/*/openmla-bench $P/q2/tests/openmla_gpu_tests
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
OPENMLA_BACKEND=sm90 timeout 150 $P/q2/tests/openmla_gpu_tests --gtest_filter='-*Portable*' > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, q2): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ') at ${SECONDS}s" >> $OUT/summary.txt
grep -E '^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | head -20 >> $OUT/summary.txt
SEESAW='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:Decode.Sm90ScheduleForced:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount'
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 110 compute-sanitizer --tool $tool --print-limit 100000 --error-exitcode 9 $P/q2/tests/openmla_gpu_tests \
    --gtest_filter="$SEESAW" --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
  echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.log | tail -1) at ${SECONDS}s" >> $OUT/summary.txt
done
grep -q "Race reported between" $OUT/sanitizer_racecheck.log && python3 scripts/racecheck_known.py $OUT/sanitizer_racecheck.log . | tail -1 >> $OUT/summary.txt
BINS="main=$P/main q1=$P/q1 q2=$P/q2" OUT=$OUT/s ROUNDS=2 \
  SHAPES="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,128,4096,1 128,3,32,16384" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table.md 2>&1
echo "a/b done at ${SECONDS}s" >> $OUT/summary.txt
cd $OUT && tar cJf logs.tar.xz s gpu_tests_*.log sanitizer_*.log && rm -r s gpu_tests_*.log sanitizer_*.log
tail -n 10 table.md; cat summary.txt
