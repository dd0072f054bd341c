#!/bin/bash
# Session 27 run 3: timing-only bounds on a segment boundary — no output stores (nostore), no Q reload (noq), vs 5dd4cef.
set -u
mkdir -p /tmp/ab/base /tmp/ab/noq /tmp/ab/nostore
for v in base nostore; do xz -dc .carry/s27/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
OUT=$OUT/ab BINS="base=/tmp/ab/base nostore=/tmp/ab/nostore" ROUNDS=2 AB_TIMEOUT=200 bash scripts/ab_env.sh \
  --backend sm90 --format bf16 --shape 128,2,128,1024 --shape 16,2,64,1024 --shape 128,1,64,1024 --shape 64,1,16,4096 \
  --shape 16,1,16,4096 --shape 128,1,128,4096 --shape 128,1,64,4096 --check-samples 0 --shape 128,2,128,16384 > $OUT/ab_table.txt 2>&1
cat $OUT/ab_table.txt
