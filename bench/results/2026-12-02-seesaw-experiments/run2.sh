#!/bin/bash
# Session 27 run 2: the seesaw copies the next segment's Q in its last pair (earlyq) — sm90 suite, racecheck
# subset, same-run A/B against 5dd4cef (base) and a timing-only build that never reloads Q (noq).
set -u
mkdir -p /tmp/ab/base /tmp/ab/earlyq /tmp/ab/noq
for v in base earlyq noq; do xz -dc .carry/s27/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
xz -dc .carry/s27/gpu_tests_earlyq.xz > /tmp/T; chmod +x /tmp/T
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
OPENMLA_BACKEND=sm90 timeout 240 /tmp/T --gtest_filter='*-*Portable*' > $OUT/tests_sm90.log 2>&1
echo "tests rc $?"; grep -E "^\[  (FAILED|PASSED)  \]" $OUT/tests_sm90.log | head -20
OPENMLA_BACKEND=sm90 timeout 150 compute-sanitizer --tool racecheck --racecheck-report all /tmp/T \
  --gtest_filter='Decode.ManyHeadsMtpEightCausal:Decode.ScheduleIndependentOfPartCount' > $OUT/racecheck.log 2>&1
echo "racecheck rc $?"; tail -3 $OUT/racecheck.log
OUT=$OUT/ab BINS="base=/tmp/ab/base noq=/tmp/ab/noq earlyq=/tmp/ab/earlyq" ROUNDS=2 AB_TIMEOUT=200 bash scripts/ab_env.sh \
  --backend sm90 --format bf16 --shape 128,2,128,1024 --shape 16,2,64,1024 --shape 64,2,64,4096 --shape 128,1,128,4096 \
  --shape 16,1,128,1024 --shape 128,2,128,16384 --shape 16,4,128,32768 --shape 128,1,128,4096,varlen \
  --check-samples 1 > $OUT/ab_table.txt 2>&1
cat $OUT/ab_table.txt
