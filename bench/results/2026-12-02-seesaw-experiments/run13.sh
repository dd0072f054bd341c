#!/bin/bash
# Session 27 run 13: qrow against base on the wide kernel's FP8 rows at 64 rows (h_q=64, s_q=1, 16K), three rounds.
set -u
mkdir -p /tmp/ab/base /tmp/ab/qrow
for v in base qrow; do xz -dc .carry/s27/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
OUT=$OUT/ab BINS="base=/tmp/ab/base qrow=/tmp/ab/qrow" ROUNDS=3 AB_TIMEOUT=120 bash scripts/ab_env.sh --backend sm90 \
  --format fp8_ds_mla,fp8_e4m3 --shape 128,1,64,16384 --check-samples 0 > $OUT/ab_fp8_64rows.txt 2>&1
cat $OUT/ab_fp8_64rows.txt
