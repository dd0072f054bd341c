#!/bin/bash
# Session 30 run 5 (bench of 5a3d...: the 16-bit narrow map without promotion): the automatic choice for 16-bit
# caches with <= 32 rows. 32 rows (s_q=2, h_q=16): narrow (32 rows per CTA) against wide; 16 rows (h_q=16):
# narrow (16) against wide and portable; b = 64-256, cold (default timing) and at the power cap
# (--sustain-ms 200), two interleaved rounds each.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s30/bench_nopromo.xz > $P/openmla-bench; chmod +x $P/openmla-bench
B=$P/openmla-bench
S32="--shape 64,2,16,1024 --shape 64,2,16,32768 --shape 128,2,16,16384,varlen --shape 128,2,16,4096,varlen"
S16="--shape 128,1,16,16384,varlen --shape 128,1,16,4096,varlen"
for b in 128 256; do for sk in 1024 4096 16384 32768; do S32="$S32 --shape $b,2,16,$sk"; done; done
for b in 64 128 256; do for sk in 1024 4096 16384 32768; do S16="$S16 --shape $b,1,16,$sk"; done; done
mkdir -p $OUT/ab
for mode in r c; do
  extra=""; [ $mode = c ] && extra="--sustain-ms 200"
  for r in 1 2; do
    for v in 64 32; do $B --backend sm90 --sm90-rows-per-cta $v $S32 $extra --check-samples 0 --json $OUT/ab/${mode}32_${v}_$r.json > /dev/null 2>&1; done
    for v in 64 16; do $B --backend sm90 --sm90-rows-per-cta $v $S16 $extra --check-samples 0 --json $OUT/ab/${mode}16_${v}_$r.json > /dev/null 2>&1; done
    $B --backend portable $S16 $extra --check-samples 0 --json $OUT/ab/${mode}16_portable_$r.json > /dev/null 2>&1
  done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab
cd $OUT && tar cJf ab.tar.xz ab && rm -r ab
