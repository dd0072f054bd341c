#!/bin/bash
# Session 39 run 2: consumer 0 of the seesaw releases b's half 0 as soon as its P_b V_b is done (sa,
# -DOPENMLA_EXP_S_AFTER_PV, experiment_s_after_pv.diff), instead of after issuing the S of a + 2 on boxes 0-3, whose
# barrier waits hold the release until that half landed (session 36's trace: released at 3,805 clocks into the pair
# against FlashMLA's 3,391). Session 28 timed the same change on the code of then (run 5 of
# 2026-12-02-h200-wgmma-descriptors.md: slower on a noisy machine); the box order and the spare P_b have landed since.
# base = 3c8931a's kernels; fm = FlashMLA's decode kernel (session 36's scratch harness). Then the sm90 GPU suite and
# the sanitizers on the seesaw's tests with sa, and the deepseek grid with sa.
set -u
P=/tmp/pre; mkdir -p $P/base $P/sa/tests
xz -dc .carry/s39/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s39/bench_sa.xz > $P/sa/openmla-bench
xz -dc .carry/s39/gpu_tests_sa.xz > $P/sa/tests/openmla_gpu_tests; xz -dc .carry/s37/fm_fast.xz > $P/fm
chmod +x $P/base/openmla-bench $P/sa/openmla-bench $P/sa/tests/openmla_gpu_tests $P/fm
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
BINS="base=$P/base sa=$P/sa" EXTRA="fm=$P/fm" OUT=$OUT/ab ROUNDS=3 \
  SHAPES="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,3,32,4096 16,1,128,4096 1,1,128,32768 128,1,128,4096,varlen" \
  bash scripts/ab_env.sh --backend sm90 --anchors .carry/s37/h200-anchors.csv | tee $OUT/table.md
echo "timing done at ${SECONDS} s"
F='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq1_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq3_hq32_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq64_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:Decode.Sm90ScheduleForced:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount'
PREBUILT=$P/sa BACKENDS="sm90" SANITIZE=1 SANITIZE_FILTER="$F" TEST_TIMEOUT=300 SANITIZE_TIMEOUT=150 COMMIT=3c8931a+sa \
  bash scripts/gpu_check.sh none $OUT/check_sa > /dev/null 2>&1
tail -5 $OUT/check_sa/summary.txt
echo "checks done at ${SECONDS} s"
OPENMLA_COMMIT=3c8931a+sa timeout 270 $P/sa/openmla-bench --grid deepseek --anchors .carry/s37/h200-anchors.csv \
  --json $OUT/grid_sa.json > $OUT/grid_sa.txt 2>&1; echo "grid rc=$?"
python3 scripts/grid_summary.py $OUT/grid_sa.json 2>&1 | tee $OUT/grid_sa_summary.txt
echo "all done at ${SECONDS} s"
cd $OUT && tar cJf logs.tar.xz ab check_sa grid_sa.txt && rm -r ab check_sa grid_sa.txt && xz grid_sa.json
cat $OUT/table.md
