#!/bin/bash
# Session 39 run 7: fp32 partial rows staged in the free KV stages of a part's last segment and written by one bulk
# copy per row (ps; wide and FP8-math kernels), against 3c8931a's kernels (base). Round 1 checks against the CPU
# reference. Then the sm90 GPU suite and the sanitizers on the split tests with ps.
set -u
P=/tmp/pre; mkdir -p $P/base $P/ps/tests
xz -dc .carry/s39/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s39/bench_ps.xz > $P/ps/openmla-bench
xz -dc .carry/s39/gpu_tests_ps.xz > $P/ps/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/ps/openmla-bench $P/ps/tests/openmla_gpu_tests
BINS="base=$P/base ps=$P/ps" OUT=$OUT/bf16 ROUNDS=2 \
  SHAPES="1,1,128,32768 16,1,128,4096 1,1,16,4096 16,1,16,4096 128,1,128,4096,varlen 1,1,64,32768 128,1,128,16384 16,4,128,32768" \
  bash scripts/ab_env.sh --backend sm90 | tee $OUT/table_bf16.md
BINS="base=$P/base ps=$P/ps" OUT=$OUT/fp8 ROUNDS=2 SHAPES="1,1,128,32768 128,2,128,8192" \
  bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv | tee $OUT/table_fp8math.md
BINS="base=$P/base ps=$P/ps" OUT=$OUT/e4m3 ROUNDS=2 SHAPES="1,1,128,32768" \
  bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3 | tee $OUT/table_e4m3.md
echo "timing done at ${SECONDS} s"
F='Decode.ScheduleIndependentOfPartCount:Decode.Fp8MathIndependentOfPartCount:Decode.DeviceGuardsPoisonOnlyBadRequests:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq128_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq1_hq128_causal_bf16'
PREBUILT=$P/ps BACKENDS="sm90" SANITIZE=1 SANITIZE_FILTER="$F" TEST_TIMEOUT=150 SANITIZE_TIMEOUT=60 COMMIT=082b561+ps \
  bash scripts/gpu_check.sh none $OUT/check > /dev/null 2>&1
tail -5 $OUT/check/summary.txt
echo "all done at ${SECONDS} s"
cd $OUT && tar cJf logs.tar.xz bf16 fp8 e4m3 check && rm -r bf16 fp8 e4m3 check
