#!/bin/bash
# Session 28 run 5: base (6abbaed), desc (b939aa6) and sapv (desc + variant_s_after_pv.diff: the seesaw's consumer 0
# issues the next S only after its P_b V_b is done, so that consumer 1's P_a V_a reaches the tensor cores first).
set -u
for v in base desc E; do mkdir -p /tmp/ab/$v; xz -dc .carry/s28/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
OUT=$OUT/ab BINS="base=/tmp/ab/base desc=/tmp/ab/desc sapv=/tmp/ab/E" ROUNDS=3 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format bf16 \
  --shape 128,1,128,16384 --shape 128,2,128,16384 --shape 128,2,128,1024 --shape 128,4,128,1024 --shape 64,2,64,4096 \
  --shape 128,1,128,4096 --check-samples 0 > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
