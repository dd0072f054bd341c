#!/bin/bash
# Session 27 run 11: the issue #3 floor shapes (bf16) and the wide ds_mla rows, base (5dd4cef) against qrow, same run.
set -u
mkdir -p /tmp/ab/base /tmp/ab/qrow
for v in base qrow; do xz -dc .carry/s27/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
B="base=/tmp/ab/base qrow=/tmp/ab/qrow"
OUT=$OUT/ds BINS="$B" ROUNDS=3 AB_TIMEOUT=120 bash scripts/ab_env.sh --backend sm90 --format fp8_ds_mla \
  --shape 128,2,128,8192 --shape 128,2,128,16384 --check-samples 1 > $OUT/ab_dsmla.txt 2>&1
cat $OUT/ab_dsmla.txt
OUT=$OUT/fl BINS="$B" ROUNDS=1 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format bf16 \
  --shape 128,1,16,16384 --shape 128,1,16,32768 --shape 64,1,16,4096 --shape 16,1,16,4096 --shape 1,1,16,4096 \
  --shape 1,1,16,32768 --shape 1,1,128,32768 --shape 128,1,128,16384 --shape 128,2,128,16384 --shape 64,2,64,4096 \
  --shape 128,4,128,1024 --shape 16,4,128,32768 --shape 128,1,128,4096,varlen --shape 128,1,16,16384,varlen \
  --check-samples 1 > $OUT/ab_floors.txt 2>&1
cat $OUT/ab_floors.txt
