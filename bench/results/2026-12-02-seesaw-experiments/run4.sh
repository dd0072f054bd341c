#!/bin/bash
# Session 27 run 4: the wide kernel's final rows by TMA stores through the Q buffer (tmastore) — sm90 and auto
# suites, compute-sanitizer on a subset, same-run A/B against 5dd4cef (base).
set -u
mkdir -p /tmp/ab/base /tmp/ab/tmastore
for v in base tmastore; do xz -dc .carry/s27/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
xz -dc .carry/s27/gpu_tests_tmastore.xz > /tmp/T; chmod +x /tmp/T
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for be in sm90 auto; do
  OPENMLA_BACKEND=$be timeout 200 /tmp/T --gtest_filter='*-*Portable*' > $OUT/tests_$be.log 2>&1
  echo "tests $be rc $?"; grep -E "^\[  (FAILED|PASSED)  \]" $OUT/tests_$be.log | head -20
done
SUB='Decode.ManyHeadsMtpEightCausal:Decode.ScheduleIndependentOfPartCount:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.StridedQueryLayouts:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq4_hq32_bf16'
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 100 compute-sanitizer --tool $tool /tmp/T --gtest_filter="$SUB" > $OUT/san_$tool.log 2>&1
  echo "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)' $OUT/san_$tool.log | tr '\n' ' ')"
done
OUT=$OUT/ab BINS="base=/tmp/ab/base tmastore=/tmp/ab/tmastore" ROUNDS=2 AB_TIMEOUT=200 bash scripts/ab_env.sh \
  --backend sm90 --format bf16 --shape 128,2,128,1024 --shape 16,2,64,1024 --shape 128,1,64,1024 --shape 64,1,16,4096 \
  --shape 16,1,16,4096 --shape 128,1,128,4096 --shape 64,2,64,4096 --shape 128,4,128,1024 --shape 128,1,128,16384 \
  --shape 128,2,128,16384 --shape 1,1,128,32768 --shape 1,1,16,4096 --shape 128,1,16,16384 --shape 128,1,128,4096,varlen \
  --check-samples 1 > $OUT/ab_table.txt 2>&1
OUT=$OUT/ab8 BINS="base=/tmp/ab/base tmastore=/tmp/ab/tmastore" ROUNDS=1 AB_TIMEOUT=200 bash scripts/ab_env.sh \
  --backend sm90 --format fp8_e4m3,fp8_ds_mla --shape 128,2,128,8192 --shape 128,1,64,16384 --shape 128,4,128,1024 \
  --check-samples 1 > $OUT/ab8_table.txt 2>&1
cat $OUT/ab_table.txt $OUT/ab8_table.txt
