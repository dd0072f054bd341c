#!/bin/bash
# Run 2 (session 41).
#   base = e7f10da's openmla-bench (decode SASS identical to 926ddfc); new = 560b641 (the portable kernel's final
#   output rows as whole 32-byte sectors; sm90 code unchanged).
# A: the portable kernel, base vs new, 16-bit and e4m3 caches.
# B: the 16-bit schedule at small batches (base binary): automatic (the wide kernel below 64 / 128 requests) against
#    the narrow kernel forced, 16 and 32 rows.
# Then the portable suite with new, and memcheck / racecheck on its split and edge tests.
set -u
P=/tmp/pre; mkdir -p $P/base $P/new/tests
xz -dc .carry/s41/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s41/bench_new.xz > $P/new/openmla-bench
xz -dc .carry/s41/gpu_tests_new.xz > $P/new/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/new/openmla-bench $P/new/tests/openmla_gpu_tests
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $OUT/summary.txt
BINS="base=$P/base new=$P/new" OUT=$OUT/a ROUNDS=3 \
  SHAPES="1,1,16,4096 16,1,16,4096 128,1,16,4096 128,1,64,1024 128,2,128,1024 128,4,128,1024 64,2,64,4096" \
  bash scripts/ab_env.sh --backend portable > $OUT/table_portable.md 2>&1
BINS="base=$P/base new=$P/new" OUT=$OUT/a8 ROUNDS=3 SHAPES="1,1,16,4096 128,1,16,4096 128,2,128,1024" \
  bash scripts/ab_env.sh --backend portable --format fp8_e4m3 > $OUT/table_portable_e4m3.md 2>&1
BINS="auto=$P/base narrow=$P/base" AB_ARGS_narrow="--sm90-rows-per-cta 16" OUT=$OUT/b16 ROUNDS=2 \
  SHAPES="1,1,16,4096 1,1,16,32768 2,1,16,16384 4,1,16,4096 4,1,16,32768 8,1,16,8192 8,1,16,32768 32,1,16,8192" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table_rows16.md 2>&1
BINS="auto=$P/base narrow=$P/base" AB_ARGS_narrow="--sm90-rows-per-cta 32" OUT=$OUT/b32 ROUNDS=2 \
  SHAPES="1,2,16,32768 1,1,32,32768 4,2,16,32768 16,2,16,32768 32,2,16,8192" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table_rows32.md 2>&1
OPENMLA_BACKEND=portable timeout 200 $P/new/tests/openmla_gpu_tests > $OUT/gpu_tests_portable.log 2>&1
echo "gpu tests (portable, new): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_portable.log | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E '^\[  FAILED  \]' $OUT/gpu_tests_portable.log | head -20 | tee -a $OUT/summary.txt
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=portable timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $P/new/tests/openmla_gpu_tests \
    --gtest_filter='Decode.ScheduleIndependentOfPartCount:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq16_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq128_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq16_fp16' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
  echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.log | tail -1)" | tee -a $OUT/summary.txt
done
cd $OUT && tar cJf logs.tar.xz a a8 b16 b32 gpu_tests_portable.log sanitizer_*.log && rm -r a a8 b16 b32 gpu_tests_portable.log sanitizer_*.log
tail -n 9 table_portable.md; tail -n 5 table_portable_e4m3.md; tail -n 10 table_rows16.md; tail -n 7 table_rows32.md; cat summary.txt
