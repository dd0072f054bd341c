#!/bin/bash
# Session 27 run 8: the final rows staged with stmatrix (half the epilogue's instructions) and written by TMA stores
# (stsm) — sm90 suite, sanitizers on a subset, same-run A/B against 5dd4cef (base); then run 7's stall comparison.
set -u
mkdir -p /tmp/ab/base /tmp/ab/stsm /tmp/ab/nostore
for v in base stsm nostore; do xz -dc .carry/s27/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
xz -dc .carry/s27/gpu_tests_stsm.xz > /tmp/T; chmod +x /tmp/T
OPENMLA_BACKEND=sm90 timeout 200 /tmp/T --gtest_filter='*-*Portable*' > $OUT/tests_sm90.log 2>&1
echo "tests sm90 rc $?"; grep -E "^\[  (FAILED|PASSED)  \]" $OUT/tests_sm90.log | head -20
SUB='Decode.ManyHeadsMtpEightCausal:Decode.ScheduleIndependentOfPartCount:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.StridedQueryLayouts:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq4_hq32_bf16'
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=sm90 timeout 100 compute-sanitizer --tool $tool /tmp/T --gtest_filter="$SUB" > $OUT/san_$tool.log 2>&1
  echo "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)' $OUT/san_$tool.log | tr '\n' ' ')"
done
OUT=$OUT/ab BINS="base=/tmp/ab/base stsm=/tmp/ab/stsm" ROUNDS=2 AB_TIMEOUT=200 bash scripts/ab_env.sh \
  --backend sm90 --format bf16 --shape 128,2,128,1024 --shape 16,2,64,1024 --shape 128,1,64,1024 --shape 64,1,16,4096 \
  --shape 128,1,128,4096 --shape 64,2,64,4096 --shape 128,4,128,1024 --shape 128,2,128,16384 --shape 1,1,128,32768 \
  --shape 128,1,128,4096,varlen --check-samples 1 > $OUT/ab_table.txt 2>&1
cat $OUT/ab_table.txt
for v in base nostore stsm; do
  timeout 150 ncu --clock-control none --kernel-name regex:wide_decode_kernel --launch-skip 5 --launch-count 1 \
    --section WarpStateStats --metrics smsp__pcsamp_warps_issue_stalled_no_instructions,smsp__pcsamp_warps_issue_stalled_lg_throttle,smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__pcsamp_warps_issue_stalled_wait,smsp__pcsamp_sample_count,smsp__inst_executed.sum,gpu__time_duration.sum \
    /tmp/ab/$v/openmla-bench --backend sm90 --format bf16 --shape 128,2,128,1024 --replays 5 --check-samples 0 > $OUT/ncu_stalls_$v.txt 2>&1
  echo "== $v"; grep -E "stalled|Duration|gpu__time|inst_executed|sample_count|Stall No Instruction|Warp Cycles Per Issued" $OUT/ncu_stalls_$v.txt | head -20
done
