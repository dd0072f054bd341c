#!/bin/bash
# Session 29 run 9 (38e5767): the GPU suite under the automatic backend (TP8 from 128 requests on 16-bit caches now
# resolves to the portable kernel; Decode.BackendResolution), and the deepseek grid with FlashMLA's anchors.
set -u
mkdir -p /tmp/pre/tests
xz -dc .carry/s29/bench_auto.xz > /tmp/pre/openmla-bench; xz -dc .carry/s29/gpu_tests_auto.xz > /tmp/pre/tests/openmla_gpu_tests
chmod +x /tmp/pre/openmla-bench /tmp/pre/tests/openmla_gpu_tests
PREBUILT=/tmp/pre BACKENDS=auto SANITIZE=0 FP8_BACKENDS="" FP8_MATH=0 BENCH_ARGS="--anchors .carry/s29/h200-anchors.csv" \
  COMMIT=38e5767 bash scripts/gpu_check.sh deepseek $OUT > $OUT/gpu_check.txt 2>&1
python3 scripts/grid_summary.py $OUT/bench_deepseek.json > $OUT/deepseek_summary.txt 2>&1
grep -E "gpu tests|==" $OUT/summary.txt; cat $OUT/deepseek_summary.txt
grep -E "h_q=16 s_k=(16384|32768)" $OUT/bench_deepseek.txt | grep "b=128" | head
