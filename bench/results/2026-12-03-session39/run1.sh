#!/bin/bash
# Session 39 run 1: does the power cap widen the seesaw's gap to FlashMLA, and does less polling buy clock there?
# Variants (builds of 3c8931a + experiment_wait_suspend.diff, gitignored .carry/s39/):
#   base = as landed (the patch compiled with no macro: the same code);
#   h    = the wide kernel's copy threads wait for a release with a 1 ms suspend-time hint (OPENMLA_EXP_PRODUCER_SUSPEND_NS);
#   a    = every mbarrier wait of every sm90 kernel with that hint (OPENMLA_EXP_ALL_SUSPEND_NS);
#   fm   = FlashMLA's dense decode kernel (session 36's scratch harness, decode only, no combine).
# Each cold (the bench's default: 10 replays) and at the cap (suffix S: --sustain-ms 300 --replays 30 for ours,
# 150 back-to-back replays for fm), with nvidia-smi logging power and SM clock every 50 ms.
set -u
P=/tmp/pre; mkdir -p $P
for v in base h a; do mkdir -p $P/$v; xz -dc .carry/s39/bench_$v.xz > $P/$v/openmla-bench; chmod +x $P/$v/openmla-bench; done
xz -dc .carry/s37/fm_fast.xz > $P/fm; chmod +x $P/fm
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm --format=csv,noheader,nounits -lms 50 > $OUT/smi.csv &
SMI=$!
S="--sustain-ms 300 --replays 30"
export AB_ARGS_baseS="$S" AB_ARGS_hS="$S" AB_ARGS_aS="$S" AB_ARGS_fmS="--replays 150"
BINS="base=$P/base h=$P/h a=$P/a baseS=$P/base hS=$P/h aS=$P/a" EXTRA="fm=$P/fm fmS=$P/fm" OUT=$OUT/bf16 \
  AB_STAMPS=$OUT/stamps.txt \
  SHAPES="128,1,128,16384 128,2,128,16384 128,4,128,16384 128,4,64,32768 16,4,128,32768 64,2,64,4096 128,1,16,16384" \
  bash scripts/ab_env.sh --backend sm90 --anchors .carry/s37/h200-anchors.csv | tee $OUT/table.md
echo "timing done at ${SECONDS} s"
kill $SMI
python3 bench/results/2026-12-03-session39/power_by_run.py $OUT/smi.csv $OUT/stamps.txt | tee $OUT/power.md
# The h build's GPU suite and sanitizers on the seesaw's tests, in case it is kept.
mkdir -p $P/ht/tests; cp $P/h/openmla-bench $P/ht/; xz -dc .carry/s39/gpu_tests_h.xz > $P/ht/tests/openmla_gpu_tests
chmod +x $P/ht/tests/openmla_gpu_tests
F='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq1_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq3_hq32_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq64_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:Decode.Sm90ScheduleForced:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount'
PREBUILT=$P/ht BACKENDS="sm90" SANITIZE=1 SANITIZE_FILTER="$F" TEST_TIMEOUT=300 SANITIZE_TIMEOUT=150 COMMIT=3c8931a+h \
  bash scripts/gpu_check.sh none $OUT/check_h > /dev/null 2>&1
tail -15 $OUT/check_h/summary.txt
echo "all done at ${SECONDS} s"
cd $OUT && tar cJf ab_logs.tar.xz bf16 check_h && rm -r bf16 check_h && xz smi.csv
cat $OUT/power.md; cat $OUT/table.md
