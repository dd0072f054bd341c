#!/bin/bash
# Session 34 run 6: b9faf5a (a request's segment costs 2 planner units with 2+ m-tiles on sm90). 1) The GPU suite on
# every backend and the sanitizers on gpu_check.sh's subset; 2) base (e1bac6b) against b9faf5a, each shape by both
# binaries back to back, the order reversed in round 2: split plans with 2+ m-tiles (where it acts), whole-request
# plans with 2+ m-tiles (where the larger cost could move the whole-or-split choice), FP8, and one m-tile (unchanged).
set -u
P=/tmp/pre; mkdir -p $P/base $P/final/tests
xz -dc .carry/s34/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s34/bench_final.xz > $P/final/openmla-bench
xz -dc .carry/s34/gpu_tests_final.xz > $P/final/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/final/openmla-bench $P/final/tests/openmla_gpu_tests
export OPENMLA_COMMIT=b9faf5a
mkdir -p $OUT/check $OUT/ab
PREBUILT=$P/final BACKENDS="sm90 auto portable" SANITIZE=1 COMMIT=b9faf5a bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -11 $OUT/check.txt
grep -E "SegmentCost|RelativeSlack" $OUT/check/gpu_tests_sm90.log | head -4
S="bf16:16,1,128,1024 bf16:16,4,64,1024 bf16:16,1,128,4096 bf16:16,2,64,4096 bf16:16,2,128,16384 \
bf16:128,1,128,4096,varlen bf16:128,2,128,4096,varlen bf16:64,1,128,4096,varlen \
bf16:128,1,128,8192 bf16:128,2,128,4096 bf16:128,4,64,4096 bf16:64,1,128,16384 \
e4m3:128,2,64,4096,varlen fp8m:128,2,128,4096,varlen fp8m:128,2,128,8192 bf16:16,1,16,4096"
for r in 1 2; do
  order="base final"; [ $r = 2 ] && order="final base"
  i=0
  for ms in $S; do
    i=$((i + 1)); m=${ms%%:*}; s=${ms#*:}
    case $m in bf16) a="";; e4m3) a="--format fp8_e4m3";; fp8m) a="--format fp8_e4m3 --fp8-math qk_and_pv";; esac
    for v in $order; do
      timeout 60 $P/$v/openmla-bench --backend sm90 $a --shape $s --check-samples $((2 - r)) --json $OUT/ab/${m}${i}_${v}_$r.json > /dev/null 2>&1 || echo "$ms $v $r failed"
    done
  done
done
python3 - $OUT/ab <<'PY'
import glob, json, sys
bad = [(p.split('/')[-1], x.get('max_rel_err'), x.get('max_lse_err'), x.get('device_errors'))
       for p in glob.glob(sys.argv[1] + '/*.json') for x in json.load(open(p))['results']
       if x.get('status') != 'ok' or (x.get('max_rel_err') or 0) > (2e-2 if 'fp8m' in p else 1e-2) or (x.get('max_lse_err') or 0) > 1e-4 or x.get('device_errors')]
print('round-1 checks and device errors:', 'all fine' if not bad else bad)
PY
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base final | tee $OUT/table_segment_cost.md
cd $OUT && tar cJf logs.tar.xz check ab && rm -r check ab
