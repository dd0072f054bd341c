#!/bin/bash
# Session 35 run 5: the deepseek grid at the power cap (--sustain-ms 300), with the arena (16f9a6d's default) and with
# per-configuration allocation, one process each in that order. Sessions 29-30 saw the b=128, h_q=16, 16K rows take
# 625-684 µs inside a sustained grid and 550-610 alone.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s35/bench.xz > $P/openmla-bench; chmod +x $P/openmla-bench
export OPENMLA_COMMIT=${COMMIT:-unknown}
for m in arena per-config; do
  $P/openmla-bench --grid deepseek --sustain-ms 300 --allocation $m --anchors .carry/s35/h200-anchors.csv \
    --json $OUT/sustained_${m}.json > $OUT/sustained_${m}.txt 2>&1
  echo "grid $m rc=$? $(date -u +%T)"
  python3 scripts/grid_summary.py $OUT/sustained_${m}.json > $OUT/summary_sustained_${m}.txt 2>&1; head -3 $OUT/summary_sustained_${m}.txt
done
python3 - $OUT <<'PY'
import json, statistics, sys
def load(p):
    return {(x['b'], x['s_q'], x['h_q'], x['s_k'], x['varlen']): x['time_us'] for x in json.load(open(p))['results'] if x.get('status') == 'ok'}
a, p = load(sys.argv[1] + '/sustained_arena.json'), load(sys.argv[1] + '/sustained_per-config.json')
r = sorted((p[k] / a[k], k) for k in a if k in p)
print('per-config / arena at the cap over %d shapes: median %.3f, min %.3f %s, max %.3f %s' % (len(r), statistics.median([x for x, _ in r]), r[0][0], r[0][1], r[-1][0], r[-1][1]))
for k in [(128, 1, 16, 16384, False), (128, 2, 16, 16384, False), (128, 1, 16, 32768, False), (128, 1, 64, 4096, False), (128, 1, 16, 1024, False), (128, 1, 128, 16384, False), (128, 2, 128, 16384, False)]:
    print(k, 'arena %.1f per-config %.1f' % (a.get(k, 0), p.get(k, 0)))
PY
