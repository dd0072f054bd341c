#!/bin/bash
# Session 32 run 5: the wide kernel without spills (bd48c69: the rows' causal limits computed in the masked branch,
# the tail zeroing from opaque values) against 1585288 (base). The GPU suite under sm90 and the automatic backend
# with compute-sanitizer on gpu_check.sh's subset and on the padded-pages / unmasked tests, then an A/B over seesaw,
# alternating 16-bit and wide FP8 shapes, cold, two interleaved rounds.
set -u
P=/tmp/pre; mkdir -p $P/base $P/nospill/tests
xz -dc .carry/s32/bench_head.xz > $P/base/openmla-bench; xz -dc .carry/s32/bench_nospill.xz > $P/nospill/openmla-bench
xz -dc .carry/s32/gpu_tests_nospill.xz > $P/nospill/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/nospill/openmla-bench $P/nospill/tests/openmla_gpu_tests
mkdir -p $OUT/check $OUT/new $OUT/ab
PREBUILT=$P/nospill BACKENDS="sm90 auto" SANITIZE=1 COMMIT=bd48c69 bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -10 $OUT/check.txt
PREBUILT=$P/nospill BACKENDS=" " SANITIZE=1 SANITIZE_TIMEOUT=150 SANITIZE_FILTER='Decode.Sm90SchedulesOnPaddedPages:Decode.Sm90SchedulesWithoutCausalMask' COMMIT=bd48c69 bash scripts/gpu_check.sh none $OUT/new > $OUT/new.txt 2>&1
tail -4 $OUT/new.txt
S="--shape 1,1,128,32768 --shape 16,1,128,4096 --shape 128,1,128,1024 --shape 128,2,64,4096 --shape 128,1,128,16384 --shape 128,2,128,16384 --shape 128,4,128,1024 --shape 16,4,128,32768 --shape 128,3,32,4096 --shape 128,1,128,4096,varlen"
A="--shape 16,1,16,4096 --shape 64,1,16,4096 --shape 64,1,64,4096 --shape 128,1,64,16384 --shape 128,4,16,4096 --shape 1,1,64,32768"
F="--shape 128,1,64,16384 --shape 128,2,128,8192 --shape 64,2,64,4096"
for r in 1 2; do
  for v in base nospill; do
    timeout 150 $P/$v/openmla-bench --backend sm90 $S $A --check-samples 0 --json $OUT/ab/bf16_${v}_$r.json > /dev/null 2>&1 || echo "bf16 $v $r failed"
    timeout 100 $P/$v/openmla-bench --backend sm90 --format fp8_e4m3 $F --check-samples 0 --json $OUT/ab/e4m3_${v}_$r.json > /dev/null 2>&1 || echo "e4m3 $v $r failed"
    timeout 100 $P/$v/openmla-bench --backend sm90 --format fp8_ds_mla $F --check-samples 0 --json $OUT/ab/dsmla_${v}_$r.json > /dev/null 2>&1 || echo "dsmla $v $r failed"
  done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base nospill | tee $OUT/table.md
cd $OUT && tar cJf logs.tar.xz check new ab && rm -r check new ab
