#!/bin/bash
# Session 37 run 2: who announces a KV box's bytes. experiment_expect_tx_env.diff (on 21397ce, with session 36's
# experiment_pb_spare_env.diff under it), OPENMLA_EXP_FLAGS: os (2) = consumer 0 only arrives at Scale0Ready; cf (4) =
# the copy thread issues a half's copies first and its arrive.expect_tx's after them (was: one arrival before each
# copy); wa (8) = the seesaw's S waiter (thread 0 of the consumer computing the tile's S) arrives with expect_tx right
# before waiting for each box, as FlashMLA's consumers do, and the copy thread only issues copies (a bad page:
# mbarrier.complete_tx of the box's bytes, no copy); waos (10) = wa and os. fm = FlashMLA's decode kernel (session 36's
# scratch build, not in the repository). Same-run A/B, round 1 checks against the CPU reference; then the sm90 GPU
# suite with wa, memcheck / racecheck / synccheck on the seesaw's tests with wa, and the seesaw's tests with cf and
# waos.
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s37/bench_wa.xz > $P/openmla-bench; xz -dc .carry/s37/gpu_tests_wa.xz > $P/tests/openmla_gpu_tests
xz -dc .carry/s37/fm_fast.xz > $P/fm; chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests $P/fm
mkdir -p $OUT/ab
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
S="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,128,4096,varlen 16,1,128,4096"
for r in 1 2; do
  i=0
  for s in $S; do
    i=$((i + 1))
    [ $SECONDS -gt 240 ] && { echo "stopped at round $r shape $i (time)"; break 2; }
    order="fm base os cf wa waos"; [ $r = 2 ] && order="waos wa cf os base fm"
    case $s in *varlen) order=${order/fm/};; esac
    for v in $order; do
      if [ $v = fm ]; then
        timeout 120 $P/fm --shape $s --replays 10 > $OUT/ab/s${i}_fm_$r.txt 2>&1 || echo "fm $s $r failed"; continue
      fi
      f=0; [ $v = os ] && f=2; [ $v = cf ] && f=4; [ $v = wa ] && f=8; [ $v = waos ] && f=10
      OPENMLA_EXP_FLAGS=$f timeout 120 $P/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) \
        --json $OUT/ab/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$v $s $r failed"
    done
  done
done
echo "A/B done at ${SECONDS} s"
python3 bench/results/2026-12-03-session36/fm_table.py $OUT/ab .carry/s37/h200-anchors.csv base fm os cf wa waos | tee $OUT/table_run2.md
SEESAW='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:Decode.Sm90ScheduleForced:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount'
OPENMLA_EXP_FLAGS=8 PREBUILT=$P BACKENDS="sm90" SANITIZE=1 SANITIZE_FILTER="$SEESAW" TEST_TIMEOUT=240 SANITIZE_TIMEOUT=130 \
  COMMIT=${COMMIT:-21397ce-plus-expect-tx-exp} bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -5 $OUT/check.txt
for f in 4 10; do
  OPENMLA_EXP_FLAGS=$f OPENMLA_BACKEND=sm90 timeout 100 $P/tests/openmla_gpu_tests --gtest_filter="$SEESAW" --gtest_brief=1 > $OUT/check/seesaw_flags$f.log 2>&1
  echo "flags $f seesaw tests rc=$?"; tail -1 $OUT/check/seesaw_flags$f.log
done
echo "all done at ${SECONDS} s"
cd $OUT && tar cJf ab_logs.tar.xz ab check && rm -r ab check
