#!/bin/bash
# Session 27 run 12: qrow against base (5dd4cef), four interleaved rounds on the rows runs 10 and 11 disagree on.
set -u
mkdir -p /tmp/ab/base /tmp/ab/qrow
for v in base qrow; do xz -dc .carry/s27/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
OUT=$OUT/ab BINS="base=/tmp/ab/base qrow=/tmp/ab/qrow" ROUNDS=4 AB_TIMEOUT=120 bash scripts/ab_env.sh --backend sm90 --format bf16 \
  --shape 128,2,128,1024 --shape 128,4,128,1024 --shape 16,2,64,1024 --shape 64,2,64,4096 --shape 128,1,128,4096 \
  --shape 128,1,128,16384 --check-samples 0 > $OUT/ab_qrow4.txt 2>&1
cat $OUT/ab_qrow4.txt
