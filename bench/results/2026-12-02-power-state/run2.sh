#!/bin/bash
# Session 29 run 2: the spread between replays of one config (run 1: 128/4/128/16K replays 3436-3908 us, the
# isolated launch under Nsight Compute 3420 us). Per-replay times (replay_us) next to the SM clock, power and
# clock-event reasons sampled every 20 ms.
set -u
mkdir -p /tmp/ab/new; xz -dc .carry/s29/bench_replays.xz > /tmp/ab/new/openmla-bench; chmod +x /tmp/ab/new/openmla-bench
B=/tmp/ab/new/openmla-bench
F=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_event_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader -lms 20 > $OUT/smi.csv 2>&1 &
SMI=$!
sleep 1
if ! grep -q MHz $OUT/smi.csv; then
  kill $SMI; F=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active
  nvidia-smi --query-gpu=$F --format=csv,noheader -lms 20 > $OUT/smi.csv 2>&1 & SMI=$!; sleep 1
fi
for s in 128,4,128,4096 128,4,128,16384 128,2,128,32768 128,1,128,16384; do
  n=${s//,/_}
  date +%H:%M:%S.%N > $OUT/start_$n.txt
  $B --backend sm90 --format bf16 --shape $s --replays 30 --check-samples 0 --json $OUT/bench_$n.json > $OUT/bench_$n.txt 2>&1
  date +%H:%M:%S.%N >> $OUT/start_$n.txt
done
kill $SMI
cd $OUT && tar cJf smi_and_starts.tar.xz smi.csv start_*.txt && rm start_*.txt && cd - > /dev/null
python3 - <<'PY'
import json, glob, os
out = os.environ['OUT']
for f in sorted(glob.glob(f'{out}/bench_*.json')):
    x = json.load(open(f))['results'][0]
    print(os.path.basename(f), 'median %.1f' % x['time_us'], ' '.join('%.0f' % v for v in x['replay_us']))
rows = [l.strip().split(', ') for l in open(f'{out}/smi.csv') if 'MHz' in l]
import collections
clk = collections.Counter(r[1] for r in rows)
print('sm clock samples', clk.most_common(8))
pw = sorted(float(r[3].split()[0]) for r in rows if 'W' in r[3])
print('power W min/median/max', pw[0], pw[len(pw)//2], pw[-1])
print('reasons', collections.Counter(r[-1] for r in rows).most_common(6))
print('temp', collections.Counter(r[4] for r in rows).most_common(5))
PY
