#!/bin/bash
# Run 1 (session 41): fp16 partial rows where the 16-bit paths still wrote fp32.
#   base = e7f10da's binaries (decode SASS identical to 926ddfc);
#   exp  = 926ddfc + experiment_wide_fp16_all_rows.diff (session 40: the wide kernel's fp16 rows at every row count,
#          warps with no row of the padded tile skipping them) + the narrow kernel's 16-bit form writing fp16 rows
#          from its staged epilogue (-DOPENMLA_EXP_WIDE_FP16_ALL_ROWS -DOPENMLA_EXP_NARROW16_FP16).
# A: automatic schedule; B: the narrow kernel forced (16 / 32 rows), where b < 64 runs the wide kernel by default.
# Then the sm90 suite with exp, and memcheck / racecheck on the split tests.
set -u
P=/tmp/pre; mkdir -p $P/base $P/exp/tests
xz -dc .carry/s41/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s41/bench_exp.xz > $P/exp/openmla-bench
xz -dc .carry/s41/gpu_tests_exp.xz > $P/exp/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/exp/openmla-bench $P/exp/tests/openmla_gpu_tests
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $OUT/summary.txt
BINS="base=$P/base exp=$P/exp" OUT=$OUT/a ROUNDS=3 \
  SHAPES="1,1,16,4096 1,1,16,32768 16,1,16,4096 16,2,16,4096 1,1,32,32768 64,1,16,4096 64,2,16,4096 128,1,16,4096 128,2,16,4096 1,1,128,32768" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table_auto.md 2>&1
BINS="base=$P/base exp=$P/exp" OUT=$OUT/b16 ROUNDS=3 SHAPES="16,1,16,4096 32,1,16,4096 1,1,16,32768" \
  bash scripts/ab_env.sh --backend sm90 --sm90-rows-per-cta 16 > $OUT/table_rows16.md 2>&1
BINS="base=$P/base exp=$P/exp" OUT=$OUT/b32 ROUNDS=3 SHAPES="16,2,16,4096 64,2,16,4096" \
  bash scripts/ab_env.sh --backend sm90 --sm90-rows-per-cta 32 > $OUT/table_rows32.md 2>&1
OPENMLA_BACKEND=sm90 timeout 150 $P/exp/tests/openmla_gpu_tests > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, exp): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E '^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | head -20 | tee -a $OUT/summary.txt
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=sm90 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 $P/exp/tests/openmla_gpu_tests \
    --gtest_filter='Decode.Sm90Narrow16BitForced:Decode.SplitRowsFarOutsideFp16Range' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
  echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.log | tail -1)" | tee -a $OUT/summary.txt
done
cd $OUT && tar cJf logs.tar.xz a b16 b32 gpu_tests_sm90.log sanitizer_*.log && rm -r a b16 b32 gpu_tests_sm90.log sanitizer_*.log
tail -n 14 table_auto.md; tail -n 5 table_rows16.md; tail -n 4 table_rows32.md; cat summary.txt
