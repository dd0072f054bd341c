#!/bin/bash
# Run 1 (session 42): session 41's prepared run 9. Did the narrow FP8 kernel slow down at b = 128 with session 40's
# fp16 partial rows (e4m3 at b=128, h_q=16, 16K: 308.7 us at 3c8931a in session 39, 322.6 / 331.0 us in session 41,
# other machine starts), and does instantiating it once per partial-row form (two) keep the best of both?
#   s39  = 3c8931a (fp32 partial rows everywhere; the kernels of the README's FP8 table)
#   lead = 1b0ef20 (main: the narrow FP8 kernel writes fp16 partial rows, compiled in alone)
#   two  = 1b0ef20 + experiment_narrow_fp8_two_forms.diff of session 41 (the narrow FP8 kernel instantiated once per
#          form: fp16 where every request is split, detail::sm90_every_request_split; fp32 elsewhere)
# Binaries built on the CPU machine (Release; s39 with sm_90a portable code only), carried xz-compressed in .carry/s42.
# Then, with two: the fp8 grid (bf16, e4m3, ds_mla, auto backend; FP8 math), the sm90 suite, memcheck / racecheck on
# the narrow FP8 tests (both forms run there), and the portable suite (its kernels are 1b0ef20's, whose last change,
# 48e1ea9, was checked by SASS only).
set -u
SECONDS=0
P=/tmp/pre; mkdir -p $P/s39 $P/lead $P/two/tests
for v in s39 lead two; do xz -dc .carry/s42/bench_$v.xz > $P/$v/openmla-bench; done
xz -dc .carry/s42/gpu_tests_two.xz > $P/two/tests/openmla_gpu_tests
chmod +x $P/*/openmla-bench $P/two/tests/openmla_gpu_tests
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
B="s39=$P/s39 lead=$P/lead two=$P/two"
BINS="$B" OUT=$OUT/e ROUNDS=2 SHAPES="128,1,16,16384 128,2,16,16384 64,1,16,4096 16,1,16,4096 1,1,16,32768" \
  bash scripts/ab_env.sh --backend auto --format fp8_e4m3 > $OUT/table_e4m3.md 2>&1
BINS="$B" OUT=$OUT/d ROUNDS=2 SHAPES="128,1,16,16384 16,1,16,4096" \
  bash scripts/ab_env.sh --backend auto --format fp8_ds_mla > $OUT/table_dsmla.md 2>&1
BINS="$B" OUT=$OUT/b ROUNDS=2 SHAPES="128,1,16,16384" bash scripts/ab_env.sh --backend auto > $OUT/table_bf16.md 2>&1
echo "a/b done at ${SECONDS}s" >> $OUT/summary.txt
export OPENMLA_COMMIT=1b0ef20+two
timeout 120 $P/two/openmla-bench --grid fp8 --format bf16,fp8_e4m3,fp8_ds_mla --backend auto --json $OUT/fp8_auto.json > $OUT/fp8_auto.txt 2>&1
timeout 60 $P/two/openmla-bench --grid fp8 --format fp8_e4m3 --fp8-math qk_and_pv --json $OUT/fp8_math.json > $OUT/fp8_math.txt 2>&1
echo "fp8 grids done at ${SECONDS}s" >> $OUT/summary.txt
OPENMLA_BACKEND=sm90 timeout 150 $P/two/tests/openmla_gpu_tests --gtest_filter='-*Portable*' > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, two): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ') at ${SECONDS}s" >> $OUT/summary.txt
grep -E '^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | head -20 >> $OUT/summary.txt
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=sm90 timeout 80 compute-sanitizer --tool $tool --print-limit 100000 --error-exitcode 9 $P/two/tests/openmla_gpu_tests \
    --gtest_filter='Decode.Sm90ScheduleForced:Decode.Sm90Narrow32RowsForced:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq16_fp16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq1_hq16_bf16' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
  echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.log | tail -1) at ${SECONDS}s" >> $OUT/summary.txt
done
grep -q "Race reported between" $OUT/sanitizer_racecheck.log && python3 scripts/racecheck_known.py $OUT/sanitizer_racecheck.log . | tail -1 >> $OUT/summary.txt
left=$((560 - SECONDS))
if [ $left -gt 30 ]; then
  OPENMLA_BACKEND=portable timeout $left $P/two/tests/openmla_gpu_tests > $OUT/gpu_tests_portable.log 2>&1
  echo "gpu tests (portable, two): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_portable.log | tr '\n' ' ') at ${SECONDS}s" >> $OUT/summary.txt
  grep -E '^\[  FAILED  \]' $OUT/gpu_tests_portable.log | head -20 >> $OUT/summary.txt
fi
cd $OUT && tar cJf logs.tar.xz e d b gpu_tests_*.log sanitizer_*.log fp8_*.txt && rm -r e d b gpu_tests_*.log sanitizer_*.log
tail -n 7 table_e4m3.md; tail -n 4 table_dsmla.md; tail -n 3 table_bf16.md; grep -E "^\|" fp8_auto.txt | head -20; cat summary.txt
