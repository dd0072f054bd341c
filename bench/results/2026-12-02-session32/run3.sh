#!/bin/bash
# Session 32 run 3: why the pair (run 2) is slower. One binary (the experiment commit plus
# experiment_pair_variants_env.diff), three launches of the 16-bit seesaw chosen by OPENMLA_EXPERIMENT_PAIR:
# v0 = the seesaw as on HEAD, v1 = the same kernel launched in clusters of two (no multicast, nothing shared),
# v2 = the pair (multicast). Two interleaved rounds.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s32/bench_pairvar.xz > $P/openmla-bench; chmod +x $P/openmla-bench
S="--shape 128,1,128,16384 --shape 128,2,64,4096 --shape 16,1,128,4096 --shape 128,4,128,1024 --shape 1,1,128,32768 --shape 128,2,128,16384"
mkdir -p $OUT/ab
for r in 1 2; do
  for v in 0 1 2; do
    OPENMLA_EXPERIMENT_PAIR=$v timeout 150 $P/openmla-bench --backend sm90 $S --check-samples 0 --json $OUT/ab/cold_v${v}_$r.json > /dev/null 2>&1 || echo "v$v $r failed"
  done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab v0 v1 v2 | tee $OUT/table.md
cd $OUT && tar cJf ab.tar.xz ab && rm -r ab
