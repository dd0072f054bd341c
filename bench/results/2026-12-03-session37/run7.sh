#!/bin/bash
# Session 37 run 7: where the spare P_b stops paying. experiment_spare_pb_all_rows_env.diff on b092c01 (the landed
# rule: spare P_b up to 128 rows), OPENMLA_EXP_FLAGS: fpb (1) = spare P_b at every row count. Shapes by rows per request
# (query tiles per request): 128 (2, control: the same code either way), 192 (3), 256 (4), 512 (8). Same-run A/B,
# round 1 checks against the CPU reference.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s37/bench_fpb.xz > $P/openmla-bench; chmod +x $P/openmla-bench
mkdir -p $OUT/ab
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
S="128,1,128,16384 128,3,64,4096 128,3,64,16384 128,2,128,16384 128,2,128,4096 64,4,64,4096 32,2,128,16384 128,4,128,1024 16,4,128,32768"
for r in 1 2; do
  i=0
  for s in $S; do
    i=$((i + 1))
    order="base fpb"; [ $r = 2 ] && order="fpb base"
    for v in $order; do
      f=0; [ $v = fpb ] && f=1
      OPENMLA_EXP_FLAGS=$f timeout 120 $P/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) \
        --json $OUT/ab/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$v $s $r failed"
    done
  done
done
echo "A/B done at ${SECONDS} s"
python3 bench/results/2026-12-03-session36/fm_table.py $OUT/ab .carry/s37/h200-anchors.csv base fpb | tee $OUT/table_run7.md
cd $OUT && tar cJf ab_logs.tar.xz ab && rm -r ab
