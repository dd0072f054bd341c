#!/bin/bash
# Run 2 (session 44): the seesaw's stage halves given back in two quarters, with every seesaw PV as m64n128 products.
# Run 1's builds mixed m64n256 and m64n128 products on one O, and ptxas serialized every wgmma of the seesaw (C7511,
# an info line that -Werror does not catch): 0.71-0.79x. Here every seesaw PV is m64n128 (q0: that alone, the
# releases as in main), q1 = q0 + consumer 0's P_b V_b as two groups, b's half given back in two quarters (the
# producer refills its lower two V boxes once they are read, the upper two and the rope box after), q2 = q1 + the
# same for consumer 1's P_a V_a. Against main (1335dc6), one process per variant and shape, two rounds.
# Then the sm90 suite and memcheck / racecheck / synccheck on the seesaw's tests with q2.
# Binaries built on the CPU machine (Release), carried xz-compressed in .carry/s44.
set -u
SECONDS=0
P=/tmp/pre; mkdir -p $P/main $P/q0/tests $P/q1/tests $P/q2/tests
for v in main q0 q1 q2; do xz -dc .carry/s44/bench_$v.xz > $P/$v/openmla-bench; done
for v in q0 q1 q2; do xz -dc .carry/s44/gpu_tests_$v.xz > $P/$v/tests/openmla_gpu_tests; done
chmod +x $P/*/openmla-bench $P/*/tests/openmla_gpu_tests
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
for v in q0 q1; do
  OPENMLA_BACKEND=sm90 timeout 100 $P/$v/tests/openmla_gpu_tests --gtest_filter="$SEESAW" --gtest_brief=1 > $OUT/gpu_tests_seesaw_$v.log 2>&1
  echo "seesaw tests ($v): rc=$? $(tail -1 $OUT/gpu_tests_seesaw_$v.log) at ${SECONDS}s" >> $OUT/summary.txt
done
grep -q "Race reported between" $OUT/sanitizer_racecheck.log && python3 scripts/racecheck_known.py $OUT/sanitizer_racecheck.log . | tail -1 >> $OUT/summary.txt
BINS="main=$P/main q0=$P/q0 q1=$P/q1 q2=$P/q2" OUT=$OUT/s ROUNDS=2 \
  SHAPES="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,128,4096,varlen 128,3,32,16384" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table.md 2>&1
echo "a/b done at ${SECONDS}s" >> $OUT/summary.txt
cd $OUT && tar cJf logs.tar.xz s gpu_tests_*.log sanitizer_*.log && rm -r s gpu_tests_*.log sanitizer_*.log
tail -n 10 table.md; cat summary.txt
