#!/bin/bash
# Session 32 run 4: what the combine costs on the shapes whose floors are missed. One timing-only binary
# (HEAD + experiment_no_combine_timing.diff): v0 as HEAD, v1 with OPENMLA_EXPERIMENT_NO_COMBINE set (the combine
# is not launched; the decode still writes its partials; the outputs of split requests are then wrong, so no check).
# Two interleaved rounds, cold.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s32/bench_nocombine.xz > $P/openmla-bench; chmod +x $P/openmla-bench
S="--shape 1,1,16,4096 --shape 1,1,16,32768 --shape 1,1,128,32768 --shape 16,1,16,1024 --shape 16,1,16,4096 --shape 64,1,16,4096 --shape 16,1,128,4096 --shape 64,2,64,4096 --shape 128,4,128,1024 --shape 16,4,128,32768 --shape 128,1,128,4096,varlen --shape 128,1,64,1024"
mkdir -p $OUT/ab
for r in 1 2; do
  timeout 150 $P/openmla-bench --backend sm90 $S --check-samples 0 --json $OUT/ab/cold_v0_$r.json > /dev/null 2>&1 || echo "v0 $r failed"
  OPENMLA_EXPERIMENT_NO_COMBINE=1 timeout 150 $P/openmla-bench --backend sm90 $S --check-samples 0 --json $OUT/ab/cold_v1_$r.json > /dev/null 2>&1 || echo "v1 $r failed"
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab v0 v1 | tee $OUT/table.md
cd $OUT && tar cJf ab.tar.xz ab && rm -r ab
