#!/bin/bash
# Run 1 (session 43). Two questions, one machine start, every variant in its own process (scripts/ab_env.sh):
#  1. Issue #4's compute-bound ratios with and without segment boundaries. b x s_k fixed at 132 x 8K-equivalent,
#     s_q=2, h_q=128 (4 m-tiles): b=33 at 32K (one request per part: one segment per CTA, nothing split), b=66 at
#     16K (two), b=132 at 8K (four), and the target shape b=128 at 8K; bf16, e4m3 (16-bit math), ds_mla, FP8 math.
#  2. rf = main + the `row_factor` lambda in sm90 write_segment_rows (session 42's review item: SASS of the FP8 wide
#     and FP8-math kernels differs, 16-bit identical) against main on those kernels; then the sm90 suite and
#     memcheck / racecheck on an FP8 wide + FP8-math subset with rf.
# Binaries built on the CPU machine (Release), carried xz-compressed in .carry/s43.
set -u
SECONDS=0
P=/tmp/pre; mkdir -p $P/main $P/rf/tests
xz -dc .carry/s43/bench_main.xz > $P/main/openmla-bench; xz -dc .carry/s43/bench_rf.xz > $P/rf/openmla-bench
xz -dc .carry/s43/gpu_tests_rf.xz > $P/rf/tests/openmla_gpu_tests
chmod +x $P/*/openmla-bench $P/rf/tests/openmla_gpu_tests
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
E="--format fp8_e4m3"; D="--format fp8_ds_mla"; M="--format fp8_e4m3 --fp8-math qk_and_pv"
export AB_ARGS_bf="--format bf16" AB_ARGS_e4="$E" AB_ARGS_e4r="$E" AB_ARGS_ds="$D" AB_ARGS_dsr="$D" AB_ARGS_fm="$M" AB_ARGS_fmr="$M"
BINS="bf=$P/main e4=$P/main e4r=$P/rf ds=$P/main dsr=$P/rf fm=$P/main fmr=$P/rf" OUT=$OUT/s ROUNDS=2 \
  SHAPES="33,2,128,32768 66,2,128,16384 132,2,128,8192 128,2,128,8192 128,2,128,16384 128,1,64,16384" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table.md 2>&1
echo "a/b done at ${SECONDS}s" >> $OUT/summary.txt
OPENMLA_BACKEND=sm90 timeout 150 $P/rf/tests/openmla_gpu_tests --gtest_filter='-*Portable*' > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, rf): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ') at ${SECONDS}s" >> $OUT/summary.txt
grep -E '^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | head -20 >> $OUT/summary.txt
F='Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq64_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq2_hq128_fp16:Decode.Fp8MathLargeBatchSplitAndGuards:Decode.Fp8MathMatchesItsReference'
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=sm90 timeout 100 compute-sanitizer --tool $tool --print-limit 100000 --error-exitcode 9 $P/rf/tests/openmla_gpu_tests \
    --gtest_filter="$F" --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
  echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.log | tail -1) at ${SECONDS}s" >> $OUT/summary.txt
done
grep -q "Race reported between" $OUT/sanitizer_racecheck.log && python3 scripts/racecheck_known.py $OUT/sanitizer_racecheck.log . | tail -1 >> $OUT/summary.txt
cd $OUT && tar cJf logs.tar.xz s gpu_tests_*.log sanitizer_*.log && rm -r s gpu_tests_*.log sanitizer_*.log
tail -n 8 table.md; cat summary.txt
