#!/bin/bash
# Run 7 (session 44): the seesaw's consumers load both page ids of a pair at the pair's start (the per-tile guard: a
# bad id poisons the segment) and ptxas uses the values ~8 instructions later (R2UR), so each pair waits for a
# global load. nc = main (1335dc6) without those loads (experiment_no_page_check_timing.diff: the guard is off, the
# results on valid ids are unchanged). If it pays, the check moves to the segment's epilogue.
set -u
P=/tmp/pre; mkdir -p $P/main $P/nc
for v in main nc; do xz -dc .carry/s44/bench_$v.xz > $P/$v/openmla-bench; done
chmod +x $P/*/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
BINS="main=$P/main nc=$P/nc" OUT=$OUT/s ROUNDS=2 \
  SHAPES="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,128,4096,varlen 128,3,32,16384" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table.md 2>&1
cd $OUT && tar cJf logs.tar.xz s; rm -rf s
tail -n 9 table.md; cat summary.txt
