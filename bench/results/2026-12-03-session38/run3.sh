#!/bin/bash
# Session 38 run 3: the two-term mode built (per-tensor e4m3 cache, bf16 query, 65+ rows: the FP8-math kernel with Q and
# P as two e4m3 terms each; tt = this session's working tree, consumers 224 / producer 56 registers, 56 B of spills)
# against 6c3d50e's e4m3 storage path (old: wide kernel, in-place expansion, alternating schedule), bf16, FP8 math, and
# run 2's timing-only bound (split). Then the sm90 GPU suite with the two-term build and memcheck / racecheck /
# synccheck on its e4m3 tests of 96-512 rows.
set -u
P=/tmp/pre; mkdir -p $P/base $P/split $P/tt/tests
xz -dc .carry/s38/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s38/bench_split.xz > $P/split/openmla-bench
xz -dc .carry/s38/bench_tt.xz > $P/tt/openmla-bench; xz -dc .carry/s38/gpu_tests_tt.xz > $P/tt/tests/openmla_gpu_tests
chmod +x $P/*/openmla-bench $P/tt/tests/openmla_gpu_tests
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
export AB_ARGS_old="--format fp8_e4m3" AB_ARGS_tt="--format fp8_e4m3" AB_ARGS_fp8m="--format fp8_e4m3 --fp8-math qk_and_pv"
export AB_ARGS_split="--format fp8_e4m3 --fp8-math qk_and_pv --check-samples 0"
BINS="bf16=$P/base old=$P/base tt=$P/tt split=$P/split fp8m=$P/base" OUT=$OUT/tt \
  SHAPES="128,2,128,8192 128,2,128,16384 128,1,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,3,32,4096 1,1,128,32768" \
  bash scripts/ab_env.sh --backend sm90 | tee $OUT/table_tt.md
echo "timing done at ${SECONDS} s"
TT='Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq3_hq32_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq4_hq32_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq128_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq4_hq128_bf16'
PREBUILT=$P/tt BACKENDS="sm90" SANITIZE=1 SANITIZE_FILTER="$TT" TEST_TIMEOUT=300 SANITIZE_TIMEOUT=150 \
  COMMIT=${COMMIT:-unknown} bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -6 $OUT/check.txt; grep -E "FAILED|Failure|error" $OUT/check/gpu_tests_sm90.log | head -20
echo "all done at ${SECONDS} s"
cd $OUT && tar cJf ab_logs.tar.xz tt check && rm -r tt check
