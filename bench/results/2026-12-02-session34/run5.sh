#!/bin/bash
# Session 34 run 5: the planner's cost of a request's segment (kRequestOverheadUnits, today 1 unit = one 64-token
# tile) at 1, 2 and 3 units (OPENMLA_EXP_OVERHEAD, experiment_trace_slack_env.diff) on split plans with two or more
# query tiles per request (the seesaw's segment costs ~3 units: run 3's per-CTA ends), including FP8 caches, each
# shape by every variant back to back, the order reversed in round 2.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s34/bench_exp2.xz > $P/openmla-bench; chmod +x $P/openmla-bench
mkdir -p $OUT/ab
S="bf16:16,1,128,4096 bf16:16,1,128,1024 bf16:16,2,64,4096 bf16:16,2,128,16384 bf16:16,4,128,32768 bf16:16,4,64,1024 \
bf16:64,1,128,4096 bf16:64,2,64,4096 bf16:64,1,128,1024 bf16:128,1,128,4096,varlen bf16:128,2,128,4096,varlen \
bf16:64,1,128,4096,varlen bf16:128,1,128,16384,varlen e4m3:128,2,64,4096,varlen fp8m:128,2,128,4096,varlen fp8m:16,4,128,32768"
for r in 1 2; do
  c=0; [ $r = 1 ] && c=1
  order="o1 o2 o3"; [ $r = 2 ] && order="o3 o2 o1"
  i=0
  for ms in $S; do
    i=$((i + 1)); m=${ms%%:*}; s=${ms#*:}
    case $m in bf16) a="";; e4m3) a="--format fp8_e4m3";; fp8m) a="--format fp8_e4m3 --fp8-math qk_and_pv";; esac
    for v in $order; do
      OPENMLA_EXP_OVERHEAD=${v#o} timeout 60 $P/openmla-bench --backend sm90 $a --shape $s --check-samples $c \
        --json $OUT/ab/${m}${i}_${v}_$r.json > /dev/null 2>&1 || echo "$ms $v $r failed"
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
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab o1 o2 o3 | tee $OUT/table_overhead.md
cd $OUT && tar cJf logs.tar.xz ab && rm -r ab
