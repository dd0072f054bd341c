#!/bin/bash
# Session 29 run 7: the TP8 (h_q = 16) rows in the power-capped state: the wide kernel (16 rows padded to a 64-row
# wgmma tile) against the portable kernel (16-row mma.sync tiles) on bf16, and the FP8 narrow kernels. 60 replays,
# medians of replays 1-10 (cold) and 31-60 (capped), two interleaved rounds.
set -u
mkdir -p /tmp/ab/new; xz -dc .carry/s29/bench_replays.xz > /tmp/ab/new/openmla-bench; chmod +x /tmp/ab/new/openmla-bench
B=/tmp/ab/new/openmla-bench
mkdir -p $OUT/r7
for r in 1 2; do
  for v in sm90:bf16 portable:bf16 sm90:fp8_e4m3 sm90:fp8_ds_mla; do
    be=${v%%:*}; fmt=${v##*:}
    $B --backend $be --format $fmt --shape 128,1,16,16384 --shape 128,1,16,32768 --shape 64,1,16,4096 --replays 60 \
       --check-samples 1 --json $OUT/r7/${r}_${be}_${fmt}.json > $OUT/r7/${r}_${be}_${fmt}.txt 2>&1
  done
done
python3 - <<'PY'
import json, glob, os, statistics as st, collections
out = os.environ['OUT'] + '/r7'
acc = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(f'{out}/*.json'):
    v = os.path.basename(f)[2:-5]
    for x in json.load(open(f))['results']:
        k = (x['b'], x['s_q'], x['h_q'], x['s_k']); r = x['replay_us']
        acc[k][v].append((st.median(r[:10]), st.median(r[30:]), x['max_rel_err'], x['device_errors']))
for k in sorted(acc):
    d = acc[k]; base = d['sm90_bf16']
    bc = st.median(a for a, *_ in base); bh = st.median(b for _, b, *_ in base)
    for v in ('sm90_bf16', 'portable_bf16', 'sm90_fp8_e4m3', 'sm90_fp8_ds_mla'):
        c = st.median(a for a, *_ in d[v]); h = st.median(b for _, b, *_ in d[v])
        print('%d/%d/%d/%d' % k, f'{v:16s} cold {c:7.1f} ({bc/c:.3f}x)  capped {h:7.1f} ({bh/h:.3f}x)  err {max(e for *_, e, _ in d[v]):.2e} dev {max(z for *_, z in d[v])}')
PY
cd $OUT && tar cJf r7.tar.xz r7 && rm -r r7
