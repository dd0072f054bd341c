#!/bin/bash
# Session 30 run 3: the 16-bit narrow kernel's map without L2 promotion (b4...): narrow against wide, cold, two
# interleaved rounds, b = 16-128; then both at the power cap.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s30/bench_nopromo.xz > $P/openmla-bench; chmod +x $P/openmla-bench
B=$P/openmla-bench
S32=""; S16=""
for b in 16 64 128; do for sk in 1024 4096 16384; do S32="$S32 --shape $b,2,16,$sk"; S16="$S16 --shape $b,1,16,$sk"; done; done
mkdir -p $OUT/ab
for r in 1 2; do
  for v in 64 32; do $B --backend sm90 --sm90-rows-per-cta $v $S32 --check-samples 0 --json $OUT/ab/r32_${v}_$r.json > /dev/null 2>&1; done
  for v in 64 16; do $B --backend sm90 --sm90-rows-per-cta $v $S16 --check-samples 0 --json $OUT/ab/r16_${v}_$r.json > /dev/null 2>&1; done
done
C32=""; C16=""
for b in 64 128; do for sk in 4096 16384; do C32="$C32 --shape $b,2,16,$sk"; C16="$C16 --shape $b,1,16,$sk"; done; done
for r in 1 2; do
  for v in 64 32; do $B --backend sm90 --sm90-rows-per-cta $v $C32 --sustain-ms 200 --check-samples 0 --json $OUT/ab/c32_${v}_$r.json > /dev/null 2>&1; done
  $B --backend sm90 --sm90-rows-per-cta 16 $C16 --sustain-ms 200 --check-samples 0 --json $OUT/ab/c16_16_$r.json > /dev/null 2>&1
  $B --backend portable $C16 --sustain-ms 200 --check-samples 0 --json $OUT/ab/c16_portable_$r.json > /dev/null 2>&1
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab
cd $OUT && tar cJf ab.tar.xz ab && rm -r ab
