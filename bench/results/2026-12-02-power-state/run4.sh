#!/bin/bash
# Session 29 run 4: issue #4's compute-bound ratios with both sides in the same power state. Run 7 of session 28
# took the bf16 time from one invocation and FP8 math's from another; runs 2-3 here showed a call slowing by
# 6-17% over the first ~50 ms of sustained load (SW power cap). Each format: 60 replays, twice, interleaved;
# medians of replays 1-10 (cold) and 31-60 (capped).
set -u
mkdir -p /tmp/ab/new; xz -dc .carry/s29/bench_replays.xz > /tmp/ab/new/openmla-bench; chmod +x /tmp/ab/new/openmla-bench
B=/tmp/ab/new/openmla-bench
mkdir -p $OUT/r4
S=${SHAPE:-128,2,128,8192}
for r in 1 2; do
  for f in bf16 fp8_e4m3 fp8_e4m3:qk_and_pv fp8_ds_mla; do
    fmt=${f%%:*}; math=off; [ "$f" != "$fmt" ] && math=${f##*:}
    $B --backend sm90 --format $fmt --fp8-math $math --shape $S --replays 60 --check-samples 1 \
       --json $OUT/r4/${r}_${fmt}_${math}.json > $OUT/r4/${r}_${fmt}_${math}.txt 2>&1
    sleep 1
  done
done
python3 - <<'PY'
import json, glob, os, statistics as st
out = os.environ['OUT'] + '/r4'
res = {}
for f in sorted(glob.glob(f'{out}/*.json')):
    x = json.load(open(f))['results'][0]; r = x['replay_us']
    k = os.path.basename(f)[2:-5]
    res.setdefault(k, []).append((st.median(r[:10]), st.median(r[30:]), x['max_rel_err'], x['device_errors']))
    print(os.path.basename(f), 'cold %.1f capped %.1f' % (st.median(r[:10]), st.median(r[30:])), 'err', x['max_rel_err'], 'dev', x['device_errors'])
b = res['bf16_off']
for k, v in res.items():
    for i in range(len(v)):
        print('%-22s round %d: cold %.1f (%.3fx bf16)  capped %.1f (%.3fx bf16)' % (k, i + 1, v[i][0], b[i][0] / v[i][0], v[i][1], b[i][1] / v[i][1]))
PY
cd $OUT && tar cJf r4.tar.xz r4 && rm -r r4
