#!/bin/bash
# Session 29 run 14: the b=128 grid rows sustained, in the grid's order, once with the sm90 backend forced and once
# with the portable one (run 12-13: the portable kernel took 670-684 us at h_q=16, 16K inside that sequence).
set -u
mkdir -p /tmp/pre; xz -dc .carry/s29/bench_sustain.xz > /tmp/pre/openmla-bench; chmod +x /tmp/pre/openmla-bench
B=/tmp/pre/openmla-bench
for be in sm90 portable; do
  $B --grid deepseek --filter b=128,h_q=16 --backend $be --sustain-ms 300 --check-samples 0 --json $OUT/seq_$be.json > $OUT/seq_$be.txt 2>&1
done
python3 - <<'PY'
import json, os
out = os.environ['OUT']
a = {(x['s_q'], x['s_k'], x['varlen']): x['time_us'] for x in json.load(open(f'{out}/seq_sm90.json'))['results']}
b = {(x['s_q'], x['s_k'], x['varlen']): x['time_us'] for x in json.load(open(f'{out}/seq_portable.json'))['results']}
for k in a:
    print('b=128 h_q=16 s_q=%d s_k=%d%s' % (k[0], k[1], ' varlen' if k[2] else ''), 'sm90 %.1f portable %.1f (%.3fx)' % (a[k], b.get(k, -1), a[k] / b[k] if k in b else 0))
PY
