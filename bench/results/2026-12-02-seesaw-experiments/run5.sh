#!/bin/bash
# Session 27 run 5: is the output's cost a lockstep effect? The no-store timing build on varlen batches (segment
# ends spread) against fixed lengths (all parts end segments together), and with forced equal splits.
set -u
mkdir -p /tmp/ab/base /tmp/ab/nostore
for v in base nostore; do xz -dc .carry/s27/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
OUT=$OUT/ab BINS="base=/tmp/ab/base nostore=/tmp/ab/nostore" ROUNDS=2 AB_TIMEOUT=200 bash scripts/ab_env.sh \
  --backend sm90 --format bf16 --shape 128,2,128,1024 --shape 128,2,128,1024,varlen --shape 128,1,64,1024 \
  --shape 128,1,64,1024,varlen --shape 128,1,128,4096 --shape 128,1,128,4096,varlen --check-samples 0 > $OUT/ab_table.txt 2>&1
cat $OUT/ab_table.txt
