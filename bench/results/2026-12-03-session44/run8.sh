#!/bin/bash
# Run 8 (session 44): the change to land. pc = main (1335dc6) + the seesaw's page-id guard once per segment
# (any_page_out_of_range, by the 256 consumer threads before the tile loop; write_segment_rows' row-sum barrier ORs
# it: bar.red.or) in place of the two page-id loads at every pair's start; + the test
# Decode.SeesawLargeBatchSplitAndGuards (a bad id inside a split request on the seesaw) and the ptxas guard (CPU only).
# The sm90 suite; memcheck / racecheck / synccheck on the seesaw's tests, the new test and FP8 math (whose epilogue
# barrier is now the OR form too); then pc against main on the seesaw shapes and on controls (64 rows alternating,
# the wide e4m3 kernel, FP8 math), one process each, two rounds.
set -u
SECONDS=0
P=/tmp/pre; mkdir -p $P/main $P/pc/tests
for v in main pc; do xz -dc .carry/s44/bench_$v.xz > $P/$v/openmla-bench; done
xz -dc .carry/s44/gpu_tests_pc.xz > $P/pc/tests/openmla_gpu_tests
chmod +x $P/*/openmla-bench $P/pc/tests/openmla_gpu_tests
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
OPENMLA_BACKEND=sm90 timeout 200 $P/pc/tests/openmla_gpu_tests --gtest_filter='-*Portable*' > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, pc): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ') at ${SECONDS}s" >> $OUT/summary.txt
grep -E '^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | head -20 >> $OUT/summary.txt
grep -E 'SeesawLargeBatchSplitAndGuards' $OUT/gpu_tests_sm90.log | tail -2 >> $OUT/summary.txt
F='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:Decode.Sm90ScheduleForced:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount:Decode.SeesawLargeBatchSplitAndGuards:Decode.Fp8MathMatchesItsReference'
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 150 compute-sanitizer --tool $tool --print-limit 100000 --error-exitcode 9 $P/pc/tests/openmla_gpu_tests \
    --gtest_filter="$F" --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
  echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.log | tail -1) at ${SECONDS}s" >> $OUT/summary.txt
done
grep -q "Race reported between" $OUT/sanitizer_racecheck.log && python3 scripts/racecheck_known.py $OUT/sanitizer_racecheck.log . | tail -1 >> $OUT/summary.txt
E="--format fp8_e4m3"; M="--format fp8_e4m3 --fp8-math qk_and_pv"
export AB_ARGS_mainE="$E" AB_ARGS_pcE="$E" AB_ARGS_mainM="$M" AB_ARGS_pcM="$M"
BINS="main=$P/main pc=$P/pc" OUT=$OUT/s ROUNDS=2 \
  SHAPES="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,128,4096,varlen 128,3,32,16384 1,1,128,32768 128,1,64,4096" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table.md 2>&1
BINS="mainE=$P/main pcE=$P/pc mainM=$P/main pcM=$P/pc" OUT=$OUT/f ROUNDS=2 SHAPES="128,2,128,8192 128,1,64,16384" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table_fp8.md 2>&1
echo "a/b done at ${SECONDS}s" >> $OUT/summary.txt
cd $OUT && tar cJf logs.tar.xz s f $(ls gpu_tests_*.log sanitizer_*.log 2>/dev/null); rm -rf s f gpu_tests_*.log sanitizer_*.log
tail -n 11 table.md; tail -n 3 table_fp8.md; cat summary.txt
