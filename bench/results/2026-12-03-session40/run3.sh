#!/bin/bash
# Session 40 run 3: the fp16 partial rows (6485ecf: fp16 with a power-of-two scale per 64 columns, whole-sector
# stores, in every decode kernel and the combine). Binaries built on the CPU machine (Release, sm_90a + sm_80) and
# carried: new = 6485ecf; base = 3c8931a's kernels (HEAD before this session has the same kernel source).
# 1. Same-run A/B on the shapes with split requests (b = 1-16, the varlen batch, 128K), each kernel family
#    (wide seesaw / alternating, narrow 16-bit and FP8, FP8 math, portable), and two controls without many splits.
# 2. The GPU suite with sm90 and portable forced (the new SplitRowsFarOutsideFp16Range included), then
#    memcheck / racecheck / synccheck on the split tests (sm90), memcheck and racecheck on one (portable).
set -u
P=/tmp/pre; mkdir -p $P/base $P/new/tests
xz -dc .carry/s39/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s40/bench_new.xz > $P/new/openmla-bench
xz -dc .carry/s40/gpu_tests_new.xz > $P/new/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/new/openmla-bench $P/new/tests/openmla_gpu_tests
ab() { BINS="base=$P/base new=$P/new" OUT=$OUT/ab_$1 ROUNDS=$2 SHAPES="$3" bash scripts/ab_env.sh "${@:4}" | tee $OUT/table_$1.md; }
ab bf16 2 "1,1,128,32768 1,1,64,32768 1,1,16,4096 1,1,16,32768 16,1,128,4096 16,1,16,4096 64,1,16,4096 128,1,128,4096,varlen 1,1,128,131072 128,2,128,8192 128,1,16,16384" --backend sm90
ab e4m3 2 "1,1,16,32768 1,1,128,32768 16,1,16,4096" --backend sm90 --format fp8_e4m3
ab dsmla 2 "1,1,16,32768 1,1,128,32768" --backend sm90 --format fp8_ds_mla
ab fp8math 2 "1,1,128,32768 128,2,128,8192" --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv
ab portable 2 "1,1,16,4096 1,1,128,32768" --backend portable
ab portable_e4m3 2 "1,1,16,32768" --backend portable --format fp8_e4m3
F='Decode.ScheduleIndependentOfPartCount:Decode.Fp8MathIndependentOfPartCount:Decode.Sm90Narrow32RowsForced:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq16_fp16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq2_hq128_fp16'
PREBUILT=$P/new BACKENDS="sm90 portable" SANITIZE=1 SANITIZE_FILTER="$F" TEST_TIMEOUT=300 SANITIZE_TIMEOUT=90 \
  COMMIT=6485ecf bash scripts/gpu_check.sh none $OUT/check 2>&1 | tail -12
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=portable timeout 80 compute-sanitizer --tool $tool --error-exitcode 9 $P/new/tests/openmla_gpu_tests \
    --gtest_filter=Decode.ScheduleIndependentOfPartCount --gtest_brief=1 > $OUT/check/sanitizer_${tool}_portable.log 2>&1
  echo "compute-sanitizer $tool (portable, ScheduleIndependentOfPartCount): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/check/sanitizer_${tool}_portable.log | tail -1)" | tee -a $OUT/check/summary.txt
done
grep -h "FAILED\|PASSED" $OUT/check/gpu_tests_*.log | head -20
cd $OUT && tar cJf logs.tar.xz ab_* check && rm -r ab_* && mv check/summary.txt summary.txt && rm -r check
cat $OUT/table_*.md
