#!/bin/bash
# Session 31 run 4: run 3 found the seesaw 1.07-1.12x faster at 96 rows (two query tiles per request) and slower
# at 48-64 rows (one tile). This checks 65-127 rows more widely: HEAD (base) against the seesaw from 33 rows
# (s33, which for these rows is the seesaw from 65), bf16 and fp16, cold in two interleaved rounds and a subset
# at the power cap.
set -u
P=/tmp/pre; mkdir -p $P/base $P/s33
xz -dc .carry/s31/bench_head.xz > $P/base/openmla-bench; xz -dc .carry/s31/bench_seesaw33.xz > $P/s33/openmla-bench
chmod +x $P/base/openmla-bench $P/s33/openmla-bench
S=""
for b in 16 64 128; do for sk in 1024 4096 16384; do S="$S --shape $b,3,32,$sk"; done; done
for b in 16 128; do for sk in 4096 16384; do S="$S --shape $b,5,16,$sk --shape $b,7,16,$sk --shape $b,6,16,$sk"; done; done
S="$S --shape 1,3,32,32768 --shape 1,5,16,4096 --shape 128,3,32,4096,varlen --shape 128,3,32,16384,varlen"
C="--shape 64,3,32,4096 --shape 128,5,16,16384 --shape 128,7,16,4096 --shape 128,3,32,4096,varlen"
mkdir -p $OUT/ab
for r in 1 2; do
  for v in base s33; do
    $P/$v/openmla-bench --backend sm90 $S --check-samples 0 --json $OUT/ab/cold_${v}_$r.json > /dev/null 2>&1 || echo "cold $v $r failed"
    $P/$v/openmla-bench --backend sm90 --format fp16 --shape 128,3,32,4096 --shape 16,5,16,16384 --check-samples 0 --json $OUT/ab/fp16_${v}_$r.json > /dev/null 2>&1 || echo "fp16 $v $r failed"
  done
done
for r in 1 2; do
  for v in base s33; do
    $P/$v/openmla-bench --backend sm90 $C --sustain-ms 200 --check-samples 0 --json $OUT/ab/capped_${v}_$r.json > /dev/null 2>&1 || echo "capped $v $r failed"
  done
done
$P/s33/openmla-bench --backend sm90 --shape 128,5,16,4096 --shape 128,7,16,4096 --shape 16,6,16,4096 --json $OUT/ab/checked_s33_1.json.chk | grep -E "^\[|err"
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base s33
cd $OUT && tar cJf ab.tar.xz ab && rm -r ab
