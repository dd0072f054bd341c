#!/bin/bash
# NOT RUN (the session's device time ran out; its binaries are the gitignored .carry/s37/). Session 37 run 8: the spare P_b at 96 rows (s_q=3, h_q=32: two query tiles, the second filled in part), which the
# landed rule covers and runs 5-7 did not time. land = b092c01's kernel (run 7's binary with OPENMLA_EXP_FLAGS=0),
# base = 1244d53's binary, fm = FlashMLA's decode kernel (session 36's scratch build). Round 1 checks against the CPU
# reference.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s37/bench_fpb.xz > $P/openmla-bench; xz -dc .carry/s37/bench_o.xz > $P/bench_base
xz -dc .carry/s37/fm_fast.xz > $P/fm; chmod +x $P/openmla-bench $P/bench_base $P/fm
mkdir -p $OUT/ab
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
S="128,3,32,4096 128,3,32,16384 64,3,32,4096 16,3,32,16384 128,1,128,16384"
for r in 1 2; do
  i=0
  for s in $S; do
    i=$((i + 1))
    order="fm base land"; [ $r = 2 ] && order="land base fm"
    for v in $order; do
      if [ $v = fm ]; then
        timeout 120 $P/fm --shape $s --replays 10 > $OUT/ab/s${i}_fm_$r.txt 2>&1 || echo "fm $s $r failed"; continue
      fi
      bin=$P/openmla-bench; [ $v = base ] && bin=$P/bench_base
      OPENMLA_EXP_FLAGS=0 timeout 120 $bin --backend sm90 --shape $s --check-samples $((2 - r)) --json $OUT/ab/s${i}_${v}_$r.json \
        > /dev/null 2>&1 || echo "$v $s $r failed"
    done
  done
done
echo "A/B done at ${SECONDS} s"
python3 bench/results/2026-12-03-session36/fm_table.py $OUT/ab .carry/s37/h200-anchors.csv base fm land | tee $OUT/table_run8.md
cd $OUT && tar cJf ab_logs.tar.xz ab && rm -r ab
