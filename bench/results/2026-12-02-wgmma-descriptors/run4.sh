#!/bin/bash
# Session 28 run 4: base (6abbaed) against desc (b939aa6), five interleaved rounds on the long compute-bound rows
# (run 2 had desc 1.4% slower at b=128, s_q=1, h_q=128, 16K; Nsight Compute's single launch had them equal).
set -u
for v in base desc; do mkdir -p /tmp/ab/$v; xz -dc .carry/s28/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
OUT=$OUT/ab BINS="base=/tmp/ab/base desc=/tmp/ab/desc" ROUNDS=5 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format bf16 \
  --shape 128,1,128,16384 --shape 128,1,128,32768 --shape 64,1,128,16384 --shape 16,4,128,32768 --shape 64,2,64,16384 \
  --shape 128,1,64,16384 --check-samples 0 > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
