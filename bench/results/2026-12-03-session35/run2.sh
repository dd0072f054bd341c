#!/bin/bash
# Session 35 run 2: why the grid's b=128, 1K-4K shapes run 7-11% slower inside the full deepseek grid than alone
# (docs/benchmarking.md). Two experiment knobs of the bench (experiment_bench_arena_spacer.diff):
#   OPENMLA_BENCH_ARENA=1      every buffer from one cudaMalloc made at start (bump-allocated, returned per configuration),
#                              as a serving engine's KV pool is, instead of cudaMalloc / cudaFree per configuration;
#   OPENMLA_BENCH_SPACER_US=50 a one-thread kernel spinning 50 µs before each replay's start event, so that the
#                              host's graph launch is already queued when the timed region starts.
# 1) seven shapes, each a fresh process, default / arena / spacer; 2) the full deepseek grid by default (d4999f3's
# evidence) and 3) with the arena, one process each.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s35/bench.xz > $P/openmla-bench; chmod +x $P/openmla-bench
export OPENMLA_COMMIT=${COMMIT:-unknown}
mkdir -p $OUT/alone
S="128,1,64,4096 128,1,64,1024 128,4,16,1024 128,2,64,4096 128,1,16,4096,varlen 1,1,16,4096 128,1,128,16384"
for r in 1 2; do
  i=0
  for s in $S; do
    i=$((i + 1))
    for v in default arena spacer; do
      env=""; [ $v = arena ] && env="OPENMLA_BENCH_ARENA=1"; [ $v = spacer ] && env="OPENMLA_BENCH_SPACER_US=50"
      env $env timeout 60 $P/openmla-bench --backend sm90 --shape $s --check-samples 0 --json $OUT/alone/s${i}_${v}_$r.json \
        > /dev/null 2>&1 || echo "$s $v failed"
    done
  done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/alone default arena spacer | tee $OUT/table_alone.md
$P/openmla-bench --grid deepseek --anchors .carry/s35/h200-anchors.csv --json $OUT/deepseek_default.json > $OUT/deepseek_default.txt 2>&1
echo "grid default rc=$?"
python3 scripts/grid_summary.py $OUT/deepseek_default.json | tee $OUT/summary_default.txt
OPENMLA_BENCH_ARENA=1 $P/openmla-bench --grid deepseek --anchors .carry/s35/h200-anchors.csv --json $OUT/deepseek_arena.json > $OUT/deepseek_arena.txt 2>&1
echo "grid arena rc=$?"
python3 scripts/grid_summary.py $OUT/deepseek_arena.json | tee $OUT/summary_arena.txt
python3 - $OUT <<'PY'
import json, sys
def load(p):
    return {(x['b'], x['s_q'], x['h_q'], x['s_k'], x['varlen']): x['time_us'] for x in json.load(open(p))['results'] if x.get('status') == 'ok'}
d, a = load(sys.argv[1] + '/deepseek_default.json'), load(sys.argv[1] + '/deepseek_arena.json')
al = {}
import glob, os
for p in glob.glob(sys.argv[1] + '/alone/*_default_*.json'):
    for x in json.load(open(p))['results']:
        al.setdefault((x['b'], x['s_q'], x['h_q'], x['s_k'], x['varlen']), []).append(x['time_us'])
print('| b | s_q | h_q | s_k | varlen | grid default µs | grid arena µs | default / arena | alone (default) µs |')
print('|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
for k in sorted(d):
    if k in a and (k[0] == 128 and k[3] <= 4096 or k in al):
        print('| %d | %d | %d | %s | %s | %.1f | %.1f | %.3f | %s |' % (k + (d[k], a[k], d[k] / a[k], ', '.join('%.1f' % t for t in al.get(k, [])))))
import statistics
r = [d[k] / a[k] for k in d if k in a]
print('all shapes: default / arena median %.3f, min %.3f, max %.3f over %d' % (statistics.median(r), min(r), max(r), len(r)))
PY
