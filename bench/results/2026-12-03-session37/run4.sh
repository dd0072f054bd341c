#!/bin/bash
# Session 37 run 4: the order of the pair's last PVs. experiment_pv_order_env.diff (on 21397ce, session 36's
# experiment_pb_spare_env.diff under it), OPENMLA_EXP_FLAGS: i16 (16) = consumer 0 issues P_b V_b only after consumer
# 1 issued P_a V_a (named barrier 10; consumer 1 arrives, as FlashMLA's rO1sP0sV0RIssued); s32 (32) = the same as a
# rendezvous (consumer 1 waits too); os16 (18) = i16 and consumer 0 only arriving at Scale0Ready; pb16 (17) = i16 and
# P_b in the spare P tile (box 8 always with half 1); pbos16 (19) = all three (FlashMLA's arrangement). fm =
# FlashMLA's decode kernel (session 36's scratch build). Same-run A/B, round 1 checks against the CPU reference; then
# the seesaw's tests with s32 and pbos16, racecheck and synccheck on one of them with s32.
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s37/bench_pv.xz > $P/openmla-bench; xz -dc .carry/s37/gpu_tests_pv.xz > $P/tests/openmla_gpu_tests
xz -dc .carry/s37/fm_fast.xz > $P/fm; chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests $P/fm
mkdir -p $OUT/ab $OUT/check
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
S="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,128,4096,varlen 16,1,128,4096"
for r in 1 2; do
  i=0
  for s in $S; do
    i=$((i + 1))
    [ $SECONDS -gt 300 ] && { echo "stopped at round $r shape $i (time)"; break 2; }
    order="fm base i16 s32 os16 pb16 pbos16"; [ $r = 2 ] && order="pbos16 pb16 os16 s32 i16 base fm"
    case $s in *varlen) order=${order/fm/};; esac
    for v in $order; do
      if [ $v = fm ]; then
        timeout 120 $P/fm --shape $s --replays 10 > $OUT/ab/s${i}_fm_$r.txt 2>&1 || echo "fm $s $r failed"; continue
      fi
      case $v in base) f=0;; i16) f=16;; s32) f=32;; os16) f=18;; pb16) f=17;; pbos16) f=19;; esac
      OPENMLA_EXP_FLAGS=$f timeout 120 $P/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) \
        --json $OUT/ab/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$v $s $r failed"
    done
  done
done
echo "A/B done at ${SECONDS} s"
python3 bench/results/2026-12-03-session36/fm_table.py $OUT/ab .carry/s37/h200-anchors.csv base fm i16 s32 os16 pb16 pbos16 | tee $OUT/table_run4.md
SEESAW='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:Decode.Sm90ScheduleForced:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount'
for f in 32 19; do
  OPENMLA_EXP_FLAGS=$f OPENMLA_BACKEND=sm90 timeout 100 $P/tests/openmla_gpu_tests --gtest_filter="$SEESAW" --gtest_brief=1 > $OUT/check/seesaw_flags$f.log 2>&1
  echo "flags $f seesaw tests rc=$?"; tail -1 $OUT/check/seesaw_flags$f.log
done
for tool in racecheck synccheck; do
  OPENMLA_EXP_FLAGS=32 OPENMLA_BACKEND=sm90 timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $P/tests/openmla_gpu_tests \
    --gtest_filter="Decode.Sm90ScheduleForced" --gtest_brief=1 > $OUT/check/s32_$tool.log 2>&1
  echo "s32 $tool rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/check/s32_$tool.log | tail -1
done
echo "all done at ${SECONDS} s"
cd $OUT && tar cJf ab_logs.tar.xz ab check && rm -r ab check
