#!/bin/bash
# Session 36 run 3: how the seesaw's copy threads wait for a released stage half (OPENMLA_EXP_FLAGS, one binary).
# Run 1-2's Nsight Compute showed them polling: 568 try_wait retries per tile (28% of all warp samples), against 90
# try_waits per tile in FlashMLA's kernel. h = try_wait with a 1 ms suspend-time hint; n = test_wait with a 64 ns
# __nanosleep between tries. Same-run A/B (round 1 checks against the CPU reference), then Nsight Compute on h.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s36/bench.xz > $P/openmla-bench; chmod +x $P/openmla-bench
mkdir -p $OUT/ab
flags() { case $1 in h) echo 64;; n) echo 128;; *) echo 0;; esac; }
S="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,64,1024 128,1,128,4096,varlen"
for r in 1 2; do
  i=0
  for s in $S; do
    i=$((i + 1))
    order="base h n"; [ $r = 2 ] && order="n h base"
    for v in $order; do
      OPENMLA_EXP_FLAGS=$(flags $v) timeout 120 $P/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) \
        --json $OUT/ab/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$v $s $r failed"
    done
  done
done
python3 bench/results/2026-12-03-session36/fm_table.py $OUT/ab .carry/s36/h200-anchors.csv base h n | tee $OUT/table_run3.md
for v in h base; do
  OPENMLA_EXP_FLAGS=$(flags $v) timeout 200 ncu --clock-control none --kernel-name regex:decode_kernel --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --import-source no -f -o $OUT/ncu_$v \
    $P/openmla-bench --grid all --backend sm90 --format bf16 --filter "b=128,s_q=1,h_q=128,s_k=16384,varlen=0" --replays 5 \
    --check-samples 0 --json /dev/null > $OUT/ncu_${v}_run.txt 2>&1; echo "ncu $v rc=$?"
  ncu -i $OUT/ncu_$v.ncu-rep --page details --csv > $OUT/ncu_${v}_details.csv 2>/dev/null
  ncu -i $OUT/ncu_$v.ncu-rep --page source --csv --print-source sass > $OUT/ncu_${v}_source.csv 2>/dev/null
  grep -E '"(Duration|Elapsed Cycles|SM Frequency)"' $OUT/ncu_${v}_details.csv | cut -d, -f12-16
done
cd $OUT && tar cJf ab_logs.tar.xz ab && rm -r ab && tar cJf ncu_run3.tar.xz ncu_* && rm ncu_*.ncu-rep ncu_*_details.csv ncu_*_source.csv ncu_*_run.txt
ls -la $OUT
