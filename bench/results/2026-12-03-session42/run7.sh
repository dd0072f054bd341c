#!/bin/bash
# Run 7 (session 42): 7ca6d79 (new: the narrow kernel's ds_mla map without L2 promotion) against 1b0ef20 (lead) on
# ds_mla, and bf16 for the ratio (each format in its own process), three rounds; then the sm90 suite with new, and
# memcheck on the narrow ds_mla tests.
set -u
P=/tmp/pre; mkdir -p $P/lead $P/new/tests
xz -dc .carry/s42/bench_lead.xz > $P/lead/openmla-bench; xz -dc .carry/s42/bench_new.xz > $P/new/openmla-bench
xz -dc .carry/s42/gpu_tests_new.xz > $P/new/tests/openmla_gpu_tests; chmod +x $P/*/openmla-bench $P/new/tests/openmla_gpu_tests
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
export AB_ARGS_lead="--format fp8_ds_mla" AB_ARGS_new="--format fp8_ds_mla" AB_ARGS_bf16="--format bf16"
BINS="lead=$P/lead new=$P/new bf16=$P/new" OUT=$OUT/d ROUNDS=3 \
  SHAPES="128,1,16,16384 128,2,16,16384 64,1,16,4096 16,1,16,4096 1,1,16,32768" \
  bash scripts/ab_env.sh --backend auto > $OUT/table_dsmla.md 2>&1
OPENMLA_BACKEND=sm90 timeout 150 $P/new/tests/openmla_gpu_tests --gtest_filter='-*Portable*' > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, new): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ')" >> $OUT/summary.txt
grep -E '^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | head -20 >> $OUT/summary.txt
OPENMLA_BACKEND=sm90 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $P/new/tests/openmla_gpu_tests \
  --gtest_filter='Decode.DsMla16RowsLargeBatchEdgeLengths:Decode.DsMlaScalesFarApart:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq1_hq16_bf16' \
  --gtest_brief=1 > $OUT/sanitizer_memcheck.log 2>&1
echo "compute-sanitizer memcheck: rc=$? $(grep -E 'ERROR SUMMARY' $OUT/sanitizer_memcheck.log | tail -1)" >> $OUT/summary.txt
cd $OUT && tar cJf logs.tar.xz d gpu_tests_sm90.log sanitizer_memcheck.log && rm -r d gpu_tests_sm90.log sanitizer_memcheck.log
tail -n 7 table_dsmla.md; cat summary.txt
