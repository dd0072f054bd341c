#!/bin/bash
# Session 28 run 2: which descriptors matter. base (6abbaed), desc (b939aa6: all descriptors advanced by one add),
# qk (only Q and K advanced: variant_qk_only.diff on b939aa6), pv (only V and P: variant_pv_only.diff). 3 rounds.
set -u
for v in base desc C D; do mkdir -p /tmp/ab/$v; xz -dc .carry/s28/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
B="base=/tmp/ab/base desc=/tmp/ab/desc qk=/tmp/ab/C pv=/tmp/ab/D"
OUT=$OUT/ab1 BINS="$B" ROUNDS=3 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format bf16 \
  --shape 128,2,128,1024 --shape 128,4,128,1024 --shape 128,1,128,4096 --shape 128,1,128,16384 --shape 128,2,128,16384 \
  --check-samples 0 > $OUT/ab1.txt 2>&1
OUT=$OUT/ab2 BINS="$B" ROUNDS=3 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3 \
  --shape 128,2,128,8192 --shape 128,1,64,4096 --check-samples 0 > $OUT/ab2.txt 2>&1
cat $OUT/ab1.txt $OUT/ab2.txt
