#!/bin/bash
# Session 37 run 1 = session 36's run7_not_run.sh, part 1 (the A/B), with the binaries session 36 built from
# experiment_pb_spare_env.diff on 1244d53 (.carry/s37/bench_pb.xz; the kernel is unchanged since). OPENMLA_EXP_FLAGS:
# pb (1) = P_b in the spare P tile (sm.p) instead of over b's rope box, so box 8 of every stage goes back with consumer
# 1's half and consumer 1's next S takes boxes 4-8 then 0-3; os (2) = consumer 0 only arrives at Scale0Ready (one-sided,
# as FlashMLA's WG0); pbos (3) = both. Same-run A/B against flags 0 (= 1244d53's kernel); round 1 checks against the CPU
# reference. fm = FlashMLA's decode kernel, session 36's scratch build (fm_fast, not in the repository), decode
# kernel only. Stops starting new rows after 480 s so that the table comes back.
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s37/bench_pb.xz > $P/openmla-bench; xz -dc .carry/s37/fm_fast.xz > $P/fm; chmod +x $P/openmla-bench $P/fm
mkdir -p $OUT/ab
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
S="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,128,4096,varlen 16,1,128,4096"
for r in 1 2; do
  i=0
  for s in $S; do
    i=$((i + 1))
    [ $SECONDS -gt 480 ] && { echo "stopped at round $r shape $i (time)"; break 2; }
    order="fm base pb os pbos"; [ $r = 2 ] && order="pbos os pb base fm"
    case $s in *varlen) order=${order/fm/};; esac
    for v in $order; do
      if [ $v = fm ]; then
        timeout 120 $P/fm --shape $s --replays 10 > $OUT/ab/s${i}_fm_$r.txt 2>&1 || echo "fm $s $r failed"; continue
      fi
      f=0; [ $v = pb ] && f=1; [ $v = os ] && f=2; [ $v = pbos ] && f=3
      OPENMLA_EXP_FLAGS=$f timeout 120 $P/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) \
        --json $OUT/ab/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$v $s $r failed"
    done
  done
done
echo "A/B done at ${SECONDS} s"
python3 bench/results/2026-12-03-session36/fm_table.py $OUT/ab .carry/s37/h200-anchors.csv base fm pb os pbos | tee $OUT/table_run1.md
cd $OUT && tar cJf ab_logs.tar.xz ab && rm -r ab
