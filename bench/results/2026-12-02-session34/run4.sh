#!/bin/bash
# Session 34 run 4: the streamed combine (6b886c9). 1) The GPU suite on every backend (the new test
# ManyCallsAfterOnePlanMergeEveryCall included) and the sanitizers on gpu_check.sh's subset; 2) base (e1bac6b)
# against 6b886c9 on split shapes (small batches, varlen, b = 1) and two whole-request controls, each shape by both
# binaries back to back, the order reversed in round 2.
set -u
P=/tmp/pre; mkdir -p $P/base $P/final/tests
xz -dc .carry/s34/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s34/bench_final.xz > $P/final/openmla-bench
xz -dc .carry/s34/gpu_tests_final.xz > $P/final/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/final/openmla-bench $P/final/tests/openmla_gpu_tests
export OPENMLA_COMMIT=6b886c9
mkdir -p $OUT/check $OUT/ab
OPENMLA_BACKEND=sm90 timeout 120 $P/final/tests/openmla_gpu_tests --gtest_filter='*ManyCallsAfterOnePlan*:*GraphReplay*:*SplitOverManyParts*' 2>&1 | tail -3
PREBUILT=$P/final BACKENDS="sm90 auto portable" SANITIZE=1 COMMIT=6b886c9 bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -11 $OUT/check.txt
S="16,1,16,4096 16,1,128,4096 16,1,64,1024 64,1,16,4096 1,1,128,32768 1,1,16,4096 16,4,128,32768 \
128,1,128,4096,varlen 64,1,128,4096,varlen 128,2,128,4096,varlen 128,1,16,16384,varlen 128,1,64,4096 128,2,128,16384"
for r in 1 2; do
  order="base final"; [ $r = 2 ] && order="final base"
  i=0
  for s in $S; do
    i=$((i + 1))
    for v in $order; do
      timeout 60 $P/$v/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) --json $OUT/ab/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$s $v $r failed"
    done
  done
  for v in $order; do
    timeout 60 $P/$v/openmla-bench --backend sm90 --format fp8_e4m3 --shape 16,1,16,4096 --check-samples $((2 - r)) --json $OUT/ab/e4m3_${v}_$r.json > /dev/null 2>&1 || echo "e4m3 $v $r failed"
    timeout 60 $P/$v/openmla-bench --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv --shape 16,4,128,32768 --check-samples $((2 - r)) --json $OUT/ab/fp8math_${v}_$r.json > /dev/null 2>&1 || echo "fp8math $v $r failed"
    timeout 60 $P/$v/openmla-bench --backend portable --shape 16,1,64,4096 --check-samples $((2 - r)) --json $OUT/ab/portable_${v}_$r.json > /dev/null 2>&1 || echo "portable $v $r failed"
  done
done
python3 - $OUT/ab <<'PY'
import glob, json, sys
bad = [(p.split('/')[-1], x.get('status'), x.get('max_rel_err'), x.get('max_lse_err'), x.get('device_errors'))
       for p in glob.glob(sys.argv[1] + '/*.json') for x in json.load(open(p))['results']
       if x.get('status') != 'ok' or (x.get('max_rel_err') or 0) > 1e-2 or (x.get('max_lse_err') or 0) > 1e-4 or x.get('device_errors')]
print('round-1 checks and device errors:', 'all fine' if not bad else bad)
PY
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base final | tee $OUT/table_streamed.md
cd $OUT && tar cJf logs.tar.xz check ab && rm -r check ab
