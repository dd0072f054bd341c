#!/bin/bash
# Session 34 run 2: does the grid's CPU reference checking slow the timed replays? The deepseek grid's b=128 rows at
# 1K-4K ran 7-11% slower in session 33's grid (run 7) than alone in run 1 (e.g. b=128, s_q=1, h_q=64, 4K: 164.6
# against 153.2 µs). Up to 8 checks run at once while the GPU times the next configs, each on all cores; the timed
# region starts with an event on an idle stream, so the host's graph launch falls inside it. The same grid subset:
# checks on (default), off, on again. Binary: run 1's (the trace off, the same kernels otherwise).
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s34/bench_exp.xz > $P/openmla-bench; chmod +x $P/openmla-bench
F="--grid deepseek --filter b=128,s_k=1024/4096,varlen=0 --anchors .carry/s34/h200-anchors.csv"
$P/openmla-bench $F --json $OUT/on1.json > $OUT/on1.txt 2>&1; echo "on1 rc=$?"
$P/openmla-bench $F --check-samples 0 --json $OUT/off.json > $OUT/off.txt 2>&1; echo "off rc=$?"
$P/openmla-bench $F --json $OUT/on2.json > $OUT/on2.txt 2>&1; echo "on2 rc=$?"
python3 - $OUT <<'PY'
import json, sys
d = sys.argv[1]
t = {}
for v in ('on1', 'off', 'on2'):
    for x in json.load(open(f'{d}/{v}.json'))['results']:
        t.setdefault((x['b'], x['s_q'], x['h_q'], x['s_k']), {})[v] = (x['time_us'], x['input_sets'], x.get('anchor_us'))
print('| b | s_q | h_q | s_k | R | checks on µs | checks off µs | on again µs | off / on | FlashMLA µs |')
print('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
for k in sorted(t):
    v = t[k]
    print('| %d | %d | %d | %d | %d | %.1f | %.1f | %.1f | %.3fx | %s |' % (k + (v['off'][1], v['on1'][0], v['off'][0], v['on2'][0], min(v['on1'][0], v['on2'][0]) / v['off'][0], v['off'][2])))
PY
