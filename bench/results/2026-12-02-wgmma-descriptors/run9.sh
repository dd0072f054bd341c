#!/bin/bash
# Session 28 run 9: the varlen rows, base (6abbaed) against desc (7475d3e), four interleaved rounds (run 1: 1.004x,
# run 6: 0.972x at b=128, s_q=1, h_q=128, lengths ~4K).
set -u
for v in base desc; do mkdir -p /tmp/ab/$v; xz -dc .carry/s28/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
OUT=$OUT/ab BINS="base=/tmp/ab/base desc=/tmp/ab/desc" ROUNDS=4 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format bf16 \
  --shape 128,1,128,4096,varlen --shape 128,2,64,4096,varlen --shape 128,2,128,16384,varlen --shape 128,1,16,16384,varlen \
  --shape 128,1,128,4096 --check-samples 0 > $OUT/ab.txt 2>&1
(cd $OUT && tar cf ab_json.tar ab/*.json && rm -rf ab)
cat $OUT/ab.txt
