#!/bin/bash
# Session 37 run 5 (run 3's script with the spare-P_b build and a wider sanitizer set): the spare-P_b build (up to 128 rows P_b in the spare P tile, box 8 always with consumer 1's half)
# against 21397ce's kernel (1244d53's binary, .carry/s37/bench_o.xz) and FlashMLA's decode kernel (fm, session 36's
# scratch build) in one machine start: 128-row shapes first (changed), then 256 and 512 rows (unchanged: control).
# Round 1 checks against the CPU reference. Then the sm90 GPU suite and memcheck / racecheck / synccheck on the
# seesaw's tests (96, 128, 256 and 512 rows) with the spare-P_b build (c7be677).
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s37/bench_land.xz > $P/openmla-bench; xz -dc .carry/s37/gpu_tests_land.xz > $P/tests/openmla_gpu_tests
xz -dc .carry/s37/bench_o.xz > $P/bench_base; xz -dc .carry/s37/fm_fast.xz > $P/fm
chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests $P/bench_base $P/fm
mkdir -p $OUT/ab
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
S="128,1,128,16384 64,2,64,4096 128,1,128,1024 128,1,128,4096,varlen 16,1,128,4096 64,1,128,4096 128,2,64,1024 1,1,128,32768 128,2,128,16384 128,4,128,1024 16,4,128,32768"
for r in 1 2; do
  i=0
  for s in $S; do
    i=$((i + 1))
    order="fm base land"; [ $r = 2 ] && order="land base fm"
    case $s in *varlen) order=${order/fm/};; esac
    for v in $order; do
      if [ $v = fm ]; then
        timeout 120 $P/fm --shape $s --replays 10 > $OUT/ab/s${i}_fm_$r.txt 2>&1 || echo "fm $s $r failed"; continue
      fi
      bin=$P/openmla-bench; [ $v = base ] && bin=$P/bench_base
      timeout 120 $bin --backend sm90 --shape $s --check-samples $((2 - r)) --json $OUT/ab/s${i}_${v}_$r.json > /dev/null 2>&1 \
        || echo "$v $s $r failed"
    done
  done
done
echo "A/B done at ${SECONDS} s"
python3 bench/results/2026-12-03-session36/fm_table.py $OUT/ab .carry/s37/h200-anchors.csv base fm land | tee $OUT/table_run5.md
SEESAW='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq1_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq3_hq32_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq64_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:Decode.Sm90ScheduleForced:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount'
PREBUILT=$P BACKENDS="sm90" SANITIZE=1 SANITIZE_FILTER="$SEESAW" TEST_TIMEOUT=240 SANITIZE_TIMEOUT=120 \
  COMMIT=${COMMIT:-unknown} bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -5 $OUT/check.txt
echo "all done at ${SECONDS} s"
cd $OUT && tar cJf ab_logs.tar.xz ab check && rm -r ab check
