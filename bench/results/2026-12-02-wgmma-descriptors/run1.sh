#!/bin/bash
# Session 28 run 1: wgmma descriptors advanced by one add (desc_advance) in the wide, FP8-math and narrow kernels —
# sm90 and auto suites, sanitizers on a subset, same-run A/B against 6abbaed (base).
set -u
mkdir -p /tmp/ab/base /tmp/ab/desc
for v in base desc; do xz -dc .carry/s28/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
xz -dc .carry/s28/gpu_tests_desc.xz > /tmp/T; chmod +x /tmp/T
for be in sm90 auto; do
  f='*'; [ $be = sm90 ] && f='*-*Portable*'
  OPENMLA_BACKEND=$be timeout 150 /tmp/T --gtest_filter="$f" > $OUT/tests_$be.log 2>&1
  echo "tests $be rc $?: $(grep -E '^\[  (FAILED|PASSED)  \]' $OUT/tests_$be.log | tr '\n' ' ')"
done
SUB='Decode.ManyHeadsMtpEightCausal:Decode.ScheduleIndependentOfPartCount:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.StridedQueryLayouts:Decode.Fp8LargeBatchSplitAndGuards:Decode.SingleRequestSplitOverManyParts:Decode.Fp8MathLargeBatchSplitAndGuards'
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 110 compute-sanitizer --tool $tool /tmp/T --gtest_filter="$SUB" > $OUT/san_$tool.log 2>&1
  echo "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)' $OUT/san_$tool.log | tr '\n' ' ')"
done
python3 scripts/racecheck_known.py $OUT/san_racecheck.log . > $OUT/san_racecheck_known.txt 2>&1; tail -3 $OUT/san_racecheck_known.txt
B="base=/tmp/ab/base desc=/tmp/ab/desc"
OUT=$OUT/ab1 BINS="$B" ROUNDS=2 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format bf16 \
  --shape 128,2,128,1024 --shape 128,4,128,1024 --shape 16,2,64,1024 --shape 64,1,16,4096 --shape 16,1,16,4096 \
  --shape 128,1,128,4096 --shape 64,2,64,4096 --shape 128,1,128,16384 --shape 128,2,128,16384 --shape 1,1,128,32768 \
  --shape 128,1,16,16384 --shape 1,1,16,4096 --shape 128,1,128,4096,varlen --check-samples 1 > $OUT/ab1.txt 2>&1
OUT=$OUT/ab2 BINS="$B" ROUNDS=2 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3,fp8_ds_mla \
  --shape 128,1,16,16384 --shape 1,1,16,32768 --shape 128,1,64,16384 --shape 128,2,128,8192 --check-samples 1 > $OUT/ab2.txt 2>&1
OUT=$OUT/ab3 BINS="$B" ROUNDS=2 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv \
  --shape 128,2,128,8192 --shape 128,1,128,16384 --check-samples 1 > $OUT/ab3.txt 2>&1
cat $OUT/ab1.txt $OUT/ab2.txt $OUT/ab3.txt
