#!/bin/bash
# Session 29 run 6: run 5's builds in the power-capped state: 60 replays per shape, medians of replays 31-60
# (run 3: the cap sets in after 30-60 ms of sustained load) next to the medians of replays 1-10.
set -u
for v in replays idle all; do mkdir -p /tmp/ab/$v; xz -dc .carry/s29/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
export BINS="base=/tmp/ab/replays idle=/tmp/ab/idle all=/tmp/ab/all"
OUT=$OUT/capped ROUNDS=2 bash scripts/ab_env.sh --backend sm90 --format bf16 --shape 128,1,128,16384 --shape 128,2,128,8192 \
  --shape 128,4,128,1024 --shape 128,1,16,16384 --replays 60 --check-samples 0 > $OUT/ab_capped.txt 2>&1
python3 - <<'PY'
import json, glob, os, statistics as st, collections
out = os.environ['OUT'] + '/capped'
acc = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(f'{out}/ab_*.json'):
    v = os.path.basename(f).split('_')[1]
    for x in json.load(open(f))['results']:
        k = (x['b'], x['s_q'], x['h_q'], x['s_k']); r = x['replay_us']
        acc[k][v].append((st.median(r[:10]), st.median(r[30:])))
for k, d in acc.items():
    line = '%d/%d/%d/%d' % k
    for v in ('base', 'idle', 'all'):
        c = st.median(a for a, b in d[v]); h = st.median(b for a, b in d[v])
        line += f'  {v}: cold {c:.1f} capped {h:.1f}'
    print(line)
PY
cd $OUT && tar cJf capped_json.tar.xz capped && rm -r capped
