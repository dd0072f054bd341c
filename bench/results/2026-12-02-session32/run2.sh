#!/bin/bash
# Session 32 run 2: the seesaw in CTA pairs sharing each page by TMA multicast (`pair`, the experiment commit)
# against HEAD (`base`, 1585288). First the sm90 suite and compute-sanitizer on the pair build (the seesaw runs
# the pair kernel wherever a request has an even number of m-tiles: 65-128, 256, 512 rows), then an A/B over
# 128-512-row shapes, cold, two interleaved rounds.
set -u
P=/tmp/pre; mkdir -p $P/base $P/pair/tests
xz -dc .carry/s32/bench_head.xz > $P/base/openmla-bench; xz -dc .carry/s32/bench_pair.xz > $P/pair/openmla-bench
xz -dc .carry/s32/gpu_tests_pair.xz > $P/pair/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/pair/openmla-bench $P/pair/tests/openmla_gpu_tests
mkdir -p $OUT/check $OUT/new $OUT/ab
C=$(git rev-parse --short HEAD)
PREBUILT=$P/pair BACKENDS="sm90" SANITIZE=1 COMMIT=$C bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -9 $OUT/check.txt
PREBUILT=$P/pair BACKENDS=" " SANITIZE=1 SANITIZE_TIMEOUT=150 SANITIZE_FILTER='Decode.Sm90SchedulesOnPaddedPages:Decode.Sm90SchedulesWithoutCausalMask' COMMIT=$C bash scripts/gpu_check.sh none $OUT/new > $OUT/new.txt 2>&1
tail -4 $OUT/new.txt
S=""
for b in 16 64 128; do for sk in 1024 4096 16384; do S="$S --shape $b,1,128,$sk --shape $b,2,64,$sk"; done; done
S="$S --shape 1,1,128,32768 --shape 128,1,128,4096,varlen --shape 128,2,128,16384 --shape 64,4,64,4096 --shape 128,4,128,1024 --shape 16,4,128,32768 --shape 128,3,32,4096"
for r in 1 2; do
  for v in base pair; do
    timeout 200 $P/$v/openmla-bench --backend sm90 $S --check-samples 0 --json $OUT/ab/cold_${v}_$r.json > /dev/null 2>&1 || echo "cold $v $r failed"
  done
done
$P/pair/openmla-bench --backend sm90 --shape 128,1,128,4096 --shape 16,2,64,16384 --shape 128,3,32,4096 --shape 128,4,128,1024 2>&1 | tail -10
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base pair | tee $OUT/table.md
cd $OUT && tar cJf logs.tar.xz check new ab && rm -r check new ab
