#!/bin/bash
# Session 35 run 3: the bench's arena (--allocation arena, the default from this commit) against cudaMalloc / cudaFree
# per buffer (--allocation per-config), over the full deepseek grid, four grids in one order: arena, per-config, arena,
# per-config (each a fresh process), so that a shape's ratio between the modes can be told from run-to-run drift.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s35/bench.xz > $P/openmla-bench; chmod +x $P/openmla-bench
export OPENMLA_COMMIT=${COMMIT:-unknown}
for r in 1 2; do
  for m in arena per-config; do
    $P/openmla-bench --grid deepseek --allocation $m --anchors .carry/s35/h200-anchors.csv --json $OUT/deepseek_${m}_$r.json \
      > $OUT/deepseek_${m}_$r.txt 2>&1
    echo "grid $m $r rc=$? $(date -u +%T)"
  done
done
for f in $OUT/deepseek_*_*.json; do echo "== $(basename $f)"; python3 scripts/grid_summary.py $f | head -3; done
python3 - $OUT <<'PY'
import json, statistics, sys
def load(p):
    return {(x['b'], x['s_q'], x['h_q'], x['s_k'], x['varlen']): x['time_us'] for x in json.load(open(p))['results'] if x.get('status') == 'ok'}
g = {(m, r): load('%s/deepseek_%s_%d.json' % (sys.argv[1], m, r)) for m in ('arena', 'per-config') for r in (1, 2)}
keys = sorted(set.intersection(*[set(v) for v in g.values()]))
print('| b | s_q | h_q | s_k | varlen | arena 1 | arena 2 | per-config 1 | per-config 2 | per-config / arena (medians) |')
print('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
ratios = []
for k in keys:
    a = [g[('arena', r)][k] for r in (1, 2)]; p = [g[('per-config', r)][k] for r in (1, 2)]
    ratio = statistics.median(p) / statistics.median(a); ratios.append((ratio, k))
    if k[0] >= 64 and k[3] <= 4096 or abs(ratio - 1) > 0.03:
        print('| %d | %d | %d | %s | %s | %.1f | %.1f | %.1f | %.1f | %.3f |' % (k + tuple(a + p) + (ratio,)))
r = [x for x, _ in ratios]
print('per-config / arena over %d shapes: median %.3f, min %.3f, max %.3f' % (len(r), statistics.median(r), min(r), max(r)))
PY
