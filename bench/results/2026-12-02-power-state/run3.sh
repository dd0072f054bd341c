#!/bin/bash
# Session 29 run 3: how the replays' time follows the SM clock under the power cap (run 2: replays 3369 -> 3930 us at
# 128/4/128/16K, clock-event reason SW power cap). Long replay series per shape, nvidia-smi every 10 ms.
set -u
mkdir -p /tmp/ab/new; xz -dc .carry/s29/bench_replays.xz > /tmp/ab/new/openmla-bench; chmod +x /tmp/ab/new/openmla-bench
B=/tmp/ab/new/openmla-bench
mkdir -p $OUT/r3
nvidia-smi -q -d POWER,CLOCK,TEMPERATURE,PERFORMANCE > $OUT/r3/smi_q_before.txt 2>&1
F=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader -lms 10 > $OUT/r3/smi.csv 2>&1 &
SMI=$!
sleep 2
for s in 128,1,128,16384:150 128,1,16,16384:150 128,4,128,1024:400 128,1,128,16384:150; do
  sh=${s%%:*}; rep=${s##*:}; n=${sh//,/_}
  echo "$n start $(date +%Y/%m/%d\ %H:%M:%S.%N)" >> $OUT/r3/windows.txt
  $B --backend sm90 --format bf16 --shape $sh --replays $rep --check-samples 0 --json $OUT/r3/bench_${n}_$RANDOM.json > /dev/null 2>&1
  echo "$n end $(date +%Y/%m/%d\ %H:%M:%S.%N)" >> $OUT/r3/windows.txt
  sleep 2
done
kill $SMI
nvidia-smi -q -d POWER,CLOCK,TEMPERATURE,PERFORMANCE > $OUT/r3/smi_q_after.txt 2>&1
grep -i -E "limit|Power Draw|Current|SW Power|Thermal|Clocks Event|Max" $OUT/r3/smi_q_before.txt | head -40
python3 - <<'PY'
import json, glob, os, datetime, statistics
out = os.environ['OUT'] + '/r3'
def ts(s): return datetime.datetime.strptime(s.strip(), '%Y/%m/%d %H:%M:%S.%f')
rows = []
for l in open(f'{out}/smi.csv'):
    p = [x.strip() for x in l.split(',')]
    if len(p) >= 6 and 'MHz' in p[1]:
        rows.append((ts(p[0][:26]), int(p[1].split()[0]), float(p[3].split()[0]) if 'W' in p[3] else -1, p[4], p[5]))
w = [l.split() for l in open(f'{out}/windows.txt')]
for i in range(0, len(w), 2):
    t0 = ts(w[i][2] + ' ' + w[i][3][:15]); t1 = ts(w[i+1][2] + ' ' + w[i+1][3][:15])
    sel = [r for r in rows if t0 <= r[0] <= t1]
    n = len(sel); q = max(1, n // 5)
    seg = lambda a: '%d MHz %.0f W T%s %s' % (statistics.median(x[1] for x in a), statistics.median(x[2] for x in a), a[-1][3], max(set(x[4] for x in a), key=[x[4] for x in a].count)) if a else '-'
    print(w[i][0], f'{(t1-t0).total_seconds():.1f}s', 'first fifth:', seg(sel[:q]), '| last fifth:', seg(sel[-q:]))
for f in sorted(glob.glob(f'{out}/bench_*.json'), key=os.path.getmtime):
    x = json.load(open(f))['results'][0]; r = x['replay_us']; k = max(1, len(r) // 10)
    print(os.path.basename(f), 'R=%d median %.1f' % (x['input_sets'], x['time_us']), 'by tenths:', ' '.join('%.0f' % statistics.median(r[i:i+k]) for i in range(0, len(r), k)))
PY
cd $OUT && tar cJf r3.tar.xz r3 && rm -r r3
