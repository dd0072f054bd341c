#!/bin/bash
# Prepared in session 36 (no device time left to start it); run in session 37 as its run 1 (2026-12-03-session37/run1.sh,
# bench/results/2026-12-03-h200-seesaw-refill-handoffs.md). It was built
# from experiment_pb_spare_env.diff on 1244d53 (bench_pb.xz / gpu_tests_pb.xz).
# Session 36 run 7 (experiment_pb_spare_env.diff on 1244d53, OPENMLA_EXP_FLAGS): pb (1) = P_b in the spare P tile
# (sm.p) instead of over b's rope box, so that box 8 of every stage goes back with consumer 1's half and consumer 1's
# next S takes 5 early boxes (4-8) and 4 late ones (session 17 measured the idea at -1.2% to +1.5% before the box
# order); os (2) = consumer 0 only arrives at Scale0Ready (one-sided, as FlashMLA); pbos (3) = both.
# 1) same-run A/B against the flags off (= 1244d53's kernel), round 1 checks against the CPU reference;
# 2) the sm90 GPU suite and memcheck / racecheck / synccheck on the seesaw's tests with pb; 3) os: the seesaw's tests
# and racecheck (which does not model barrier.arrive).
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s36/bench_pb.xz > $P/openmla-bench; xz -dc .carry/s36/gpu_tests_pb.xz > $P/tests/openmla_gpu_tests
chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests
mkdir -p $OUT/ab
S="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,128,4096,varlen 16,1,128,4096"
for r in 1 2; do
  i=0
  for s in $S; do
    i=$((i + 1))
    order="base pb os pbos"; [ $r = 2 ] && order="pbos os pb base"
    for v in $order; do
      f=0; [ $v = pb ] && f=1; [ $v = os ] && f=2; [ $v = pbos ] && f=3
      OPENMLA_EXP_FLAGS=$f timeout 120 $P/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) \
        --json $OUT/ab/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$v $s $r failed"
    done
  done
done
python3 bench/results/2026-12-03-session36/fm_table.py $OUT/ab .carry/s36/h200-anchors.csv base pb os pbos | tee $OUT/table_run7.md
SEESAW='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:Decode.Sm90ScheduleForced:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount'
OPENMLA_EXP_FLAGS=1 PREBUILT=$P BACKENDS="sm90" SANITIZE=1 SANITIZE_FILTER="$SEESAW" TEST_TIMEOUT=240 SANITIZE_TIMEOUT=150 \
  COMMIT=${COMMIT:-unknown} bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -6 $OUT/check.txt
OPENMLA_EXP_FLAGS=2 OPENMLA_BACKEND=sm90 timeout 120 $P/tests/openmla_gpu_tests --gtest_filter="$SEESAW" --gtest_brief=1 > $OUT/check/os_tests.log 2>&1
echo "os seesaw tests rc=$?"; tail -2 $OUT/check/os_tests.log
OPENMLA_EXP_FLAGS=2 OPENMLA_BACKEND=sm90 timeout 150 compute-sanitizer --tool racecheck --print-limit 20 $P/tests/openmla_gpu_tests \
  --gtest_filter="Decode.Sm90ScheduleForced" --gtest_brief=1 > $OUT/check/os_racecheck.log 2>&1
echo "os racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/check/os_racecheck.log | tail -2
cd $OUT && tar cJf ab_logs.tar.xz ab check && rm -r ab check
