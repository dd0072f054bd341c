#!/bin/bash
# Run 9 (session 44): pc2 = 97f725e (pc: the seesaw's page-id guard once per segment) + the same for the wide
# kernel's alternating schedule (16-bit caches up to 64 rows, every wide FP8 kernel) and the FP8-math kernel, whose
# consumers also loaded a page id per tile; + Decode.WideLargeBatchSplitAndGuards and a second bad id (inside the
# split request 5) in every large-batch guard test. The sm90 suite and memcheck / racecheck / synccheck on a subset
# with pc2; then main (1335dc6), pc and pc2 on alternating, FP8 and seesaw shapes, one process each, two rounds.
set -u
SECONDS=0
P=/tmp/pre; mkdir -p $P/main $P/pc $P/pc2/tests
for v in main pc pc2; do xz -dc .carry/s44/bench_$v.xz > $P/$v/openmla-bench; done
xz -dc .carry/s44/gpu_tests_pc2.xz > $P/pc2/tests/openmla_gpu_tests
chmod +x $P/*/openmla-bench $P/pc2/tests/openmla_gpu_tests
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
OPENMLA_BACKEND=sm90 timeout 200 $P/pc2/tests/openmla_gpu_tests --gtest_filter='-*Portable*' > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, pc2): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ') at ${SECONDS}s" >> $OUT/summary.txt
grep -E '^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | head -20 >> $OUT/summary.txt
grep -E 'OK \] .*(LargeBatchSplitAndGuards)' $OUT/gpu_tests_sm90.log >> $OUT/summary.txt
F='Decode.WideLargeBatchSplitAndGuards:Decode.Fp8MathLargeBatchSplitAndGuards:Decode.Sm90ScheduleForced:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq64_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq2_hq128_fp16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16'
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 150 compute-sanitizer --tool $tool --print-limit 100000 --error-exitcode 9 $P/pc2/tests/openmla_gpu_tests \
    --gtest_filter="$F" --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
  echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.log | tail -1) at ${SECONDS}s" >> $OUT/summary.txt
done
grep -q "Race reported between" $OUT/sanitizer_racecheck.log && python3 scripts/racecheck_known.py $OUT/sanitizer_racecheck.log . | tail -1 >> $OUT/summary.txt
BINS="main=$P/main pc=$P/pc pc2=$P/pc2" OUT=$OUT/s ROUNDS=2 \
  SHAPES="128,1,64,4096 128,1,64,1024 64,1,64,4096 16,4,128,32768 128,1,128,16384" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table.md 2>&1
E="--format fp8_e4m3"; D="--format fp8_ds_mla"; M="--format fp8_e4m3 --fp8-math qk_and_pv"
export AB_ARGS_mainE="$E" AB_ARGS_pc2E="$E" AB_ARGS_mainD="$D" AB_ARGS_pc2D="$D" AB_ARGS_mainM="$M" AB_ARGS_pc2M="$M"
BINS="mainE=$P/main pc2E=$P/pc2 mainD=$P/main pc2D=$P/pc2 mainM=$P/main pc2M=$P/pc2" OUT=$OUT/f ROUNDS=2 \
  SHAPES="128,2,128,8192 128,1,64,16384 128,1,64,1024" bash scripts/ab_env.sh --backend sm90 > $OUT/table_fp8.md 2>&1
echo "a/b done at ${SECONDS}s" >> $OUT/summary.txt
cd $OUT && tar cJf logs.tar.xz s f $(ls gpu_tests_*.log sanitizer_*.log 2>/dev/null); rm -rf s f gpu_tests_*.log sanitizer_*.log
tail -n 6 table.md; tail -n 4 table_fp8.md; cat summary.txt
