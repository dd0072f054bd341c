#!/bin/bash
# Session 36 run 2: FlashMLA's kernel built with its own flags (--use_fast_math, --register-usage-level=10; run 1's
# build had neither) beside ours, and release/refill variants of ours (OPENMLA_EXP_FLAGS, one binary):
#   f1 = the seesaw releases a stage half with one arrival per warp (4, not 128);
#   f2 = the producer's copy threads spin on test_wait instead of try_wait;
#   p2 / p4 = the half-0 copy thread of m-tile 0 issues cp.async.bulk.prefetch.L2 of the page 2 / 4 tiles ahead
#   (its id loaded under the wait); p2a = p2 in every m-tile.
# 1) fm's correctness check; 2) Nsight Compute on fm at b=128, s_q=1, h_q=128, 16K and its SASS; 3) same-run A/B,
# each shape by every variant back to back, the order reversed in round 2 (round 1 checks against the CPU reference).
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s36/bench.xz > $P/openmla-bench; xz -dc .carry/s36/fm_fast.xz > $P/fm; chmod +x $P/openmla-bench $P/fm
mkdir -p $OUT/ab
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 300 $P/fm --check > $OUT/fm_check.txt 2>&1; echo "fm check rc=$?"; tail -1 $OUT/fm_check.txt
SECT="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis --section LaunchStats"
timeout 240 ncu --clock-control none --kernel-name regex:flash_fwd_splitkv_mla_kernel --launch-skip 2 --launch-count 1 $SECT \
  --import-source no -f -o $OUT/ncu_fm $P/fm --shape 128,1,128,16384 --replays 2 > $OUT/ncu_fm_run.txt 2>&1; echo "ncu fm rc=$?"
ncu -i $OUT/ncu_fm.ncu-rep --page details --csv > $OUT/ncu_fm_details.csv 2>/dev/null
ncu -i $OUT/ncu_fm.ncu-rep --page source --csv --print-source sass > $OUT/ncu_fm_source.csv 2>/dev/null
cuobjdump -sass $P/fm | xz -9 > $OUT/fm_sass.xz
cd $OUT && tar cJf ncu_reports.tar.xz ncu_fm.ncu-rep ncu_fm_details.csv ncu_fm_source.csv ncu_fm_run.txt && rm ncu_fm.ncu-rep ncu_fm_details.csv ncu_fm_source.csv ncu_fm_run.txt; cd - > /dev/null
flags() { case $1 in f1) echo 1;; f2) echo 2;; p2) echo 8;; p4) echo 24;; p2a) echo 40;; *) echo 0;; esac; }
S="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,64,1024 128,1,16,16384"
for r in 1 2; do
  i=0
  for s in $S; do
    i=$((i + 1))
    order="fm base f1 f2 p2 p4 p2a"; [ $i = 8 ] && order="fm base"
    [ $r = 2 ] && order=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
    for v in $order; do
      if [ $v = fm ]; then
        timeout 120 $P/fm --shape $s --replays 10 > $OUT/ab/s${i}_fm_$r.txt 2>&1 || echo "fm $s $r failed"
      else
        OPENMLA_EXP_FLAGS=$(flags $v) timeout 120 $P/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) \
          --json $OUT/ab/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$v $s $r failed"
      fi
    done
  done
done
python3 bench/results/2026-12-03-session36/fm_table.py $OUT/ab .carry/s36/h200-anchors.csv base fm f1 f2 p2 p4 p2a | tee $OUT/table_run2.md
cd $OUT && tar cJf ab_logs.tar.xz ab && rm -r ab
ls -la $OUT
