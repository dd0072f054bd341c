#!/bin/bash
# Session 28 run 10: consumer 1 takes the rope box last in its S (boxes 4-7, 0-3, 8; it waited on box 8, copied
# last in its group, before boxes 0-3): sm90 suite, sanitizers on a subset, same-run A/B against 7475d3e (desc).
set -u
for v in desc c1; do mkdir -p /tmp/ab/$v; xz -dc .carry/s28/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
xz -dc .carry/s28/gpu_tests_c1.xz > /tmp/T; chmod +x /tmp/T
OPENMLA_BACKEND=sm90 timeout 150 /tmp/T --gtest_filter='*-*Portable*' > $OUT/tests_sm90.log 2>&1
echo "tests sm90 rc $?: $(grep -E '^\[  (FAILED|PASSED)  \]' $OUT/tests_sm90.log | tr '\n' ' ')"
SUB='Decode.ManyHeadsMtpEightCausal:Decode.ScheduleIndependentOfPartCount:Decode.StridedQueryLayouts:Decode.SingleRequestSplitOverManyParts'
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=sm90 timeout 100 compute-sanitizer --tool $tool /tmp/T --gtest_filter="$SUB" > $OUT/san_$tool.log 2>&1
  echo "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)' $OUT/san_$tool.log | tr '\n' ' ')"
done
OUT=$OUT/ab BINS="desc=/tmp/ab/desc c1=/tmp/ab/c1" ROUNDS=3 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format bf16 \
  --shape 128,1,128,16384 --shape 128,2,128,16384 --shape 128,2,128,1024 --shape 128,4,128,1024 --shape 64,2,64,4096 \
  --shape 128,1,128,4096 --shape 16,4,128,32768 --check-samples 1 > $OUT/ab.txt 2>&1
(cd $OUT && tar cf ab_json.tar ab/*.json && rm -rf ab)
cat $OUT/ab.txt
