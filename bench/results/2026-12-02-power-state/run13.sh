#!/bin/bash
# Session 29 run 13: run 12's sustained grid took 670.2 us for b=128, h_q=16, 16K on the portable kernel (559.9 in
# run 11). Wide against portable after the GPU has been heated the same way (the sustained b=128 grid rows first),
# then three interleaved rounds, --sustain-ms 300, with nvidia-smi every 50 ms.
set -u
mkdir -p /tmp/pre; xz -dc .carry/s29/bench_sustain.xz > /tmp/pre/openmla-bench; chmod +x /tmp/pre/openmla-bench
B=/tmp/pre/openmla-bench
mkdir -p $OUT/r13
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_event_reasons.active --format=csv,noheader -lms 50 > $OUT/r13/smi.csv 2>&1 &
SMI=$!
$B --grid deepseek --filter b=128 --sustain-ms 300 --check-samples 0 --json $OUT/r13/heat.json > /dev/null 2>&1
for r in 1 2 3; do
  for be in sm90 portable; do
    echo "$r $be $(date +%H:%M:%S.%N)" >> $OUT/r13/windows.txt
    $B --backend $be --shape 128,1,16,16384 --shape 128,1,16,32768 --sustain-ms 300 --check-samples 0 --json $OUT/r13/${r}_$be.json > /dev/null 2>&1
  done
done
kill $SMI
python3 - <<'PY'
import json, os, glob, collections
out = os.environ['OUT'] + '/r13'
h = json.load(open(f'{out}/heat.json'))['results']
print('heat:', ' '.join('%d/%d/%d/%d%s %.0f' % (x['b'], x['s_q'], x['h_q'], x['s_k'], 'v' if x['varlen'] else '', x['time_us']) for x in h if x['h_q'] == 16 and x['s_q'] == 1))
for r in (1, 2, 3):
    for be in ('sm90', 'portable'):
        d = json.load(open(f'{out}/{r}_{be}.json'))['results']
        print(r, be, ' '.join('%d: %.1f' % (x['s_k'], x['time_us']) for x in d))
rows = [l.strip().split(', ') for l in open(f'{out}/smi.csv') if 'MHz' in l]
print('reasons', collections.Counter(r[-1] for r in rows).most_common(5))
print('temps gpu/mem max', max(int(r[4]) for r in rows), max(r[5] for r in rows))
print('sm clock last 40 samples', [r[1].split()[0] for r in rows[-40:]])
PY
cd $OUT && tar cJf r13.tar.xz r13 && rm -r r13
