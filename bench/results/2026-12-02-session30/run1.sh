#!/bin/bash
# Session 30 run 1: the portable kernel against the sm90 kernel on 16-bit caches with 32 and 64 query rows
# (s_q=2, h_q=16: MTP at TP8; h_q=64), b = 16-128, cold (default timing, two interleaved rounds) and at the
# power cap (--sustain-ms 200, two interleaved rounds). Build 0984f37 (kernels as at 53fb8b9).
set -u
mkdir -p /tmp/pre; xz -dc .carry/s30/bench_base.xz > /tmp/pre/openmla-bench; chmod +x /tmp/pre/openmla-bench
S=""
for b in 16 64 128; do for sk in 1024 4096 16384; do S="$S --shape $b,2,16,$sk --shape $b,1,64,$sk"; done; done
S="$S --shape 128,2,16,4096,varlen --shape 64,2,16,4096,varlen"
mkdir -p $OUT/cold $OUT/capped
OUT=$OUT/cold VAR=OPENMLA_BACKEND VALUES="sm90 portable" ROUNDS=2 BIN=/tmp/pre bash scripts/ab_env.sh $S --check-samples 0 > $OUT/cold.md 2>&1
C=""
for b in 64 128; do for sk in 1024 4096 16384; do C="$C --shape $b,2,16,$sk"; done; done
OUT=$OUT/capped VAR=OPENMLA_BACKEND VALUES="sm90 portable" ROUNDS=2 BIN=/tmp/pre bash scripts/ab_env.sh $C --sustain-ms 200 --check-samples 0 > $OUT/capped.md 2>&1
cd $OUT && tar cJf json.tar.xz cold capped && rm -r cold capped
echo "== cold"; cat $OUT/cold.md; echo "== capped"; cat $OUT/capped.md
