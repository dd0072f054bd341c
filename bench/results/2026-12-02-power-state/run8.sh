#!/bin/bash
# Session 29 run 8: where the portable kernel beats the wide sm90 kernel on 16-bit caches with <= 16 query rows in
# the power-capped state (run 7: 1.07-1.10x at b=128, 16K-32K; level at b=64, 4K). 60 replays, medians of replays
# 1-10 (cold) and 31-60 (capped), two interleaved rounds.
set -u
mkdir -p /tmp/ab/new; xz -dc .carry/s29/bench_replays.xz > /tmp/ab/new/openmla-bench; chmod +x /tmp/ab/new/openmla-bench
B=/tmp/ab/new/openmla-bench
mkdir -p $OUT/r8
SH="--shape 128,1,16,1024 --shape 128,1,16,4096 --shape 128,1,16,4096,varlen --shape 128,1,16,16384,varlen
    --shape 64,1,16,16384 --shape 64,1,16,32768 --shape 256,1,16,4096 --shape 128,1,8,16384 --shape 128,2,8,16384
    --shape 32,1,16,32768 --shape 16,1,16,32768"
for r in 1 2; do
  for v in sm90:bf16 portable:bf16 sm90:fp16 portable:fp16; do
    be=${v%%:*}; fmt=${v##*:}
    [ $fmt = fp16 ] && S="--shape 128,1,16,16384 --shape 64,1,16,4096" || S=$SH
    $B --backend $be --format $fmt $S --replays 60 --check-samples 1 --json $OUT/r8/${r}_${be}_${fmt}.json > $OUT/r8/${r}_${be}_${fmt}.txt 2>&1
  done
done
python3 - <<'PY'
import json, glob, os, statistics as st, collections
out = os.environ['OUT'] + '/r8'
acc = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(f'{out}/*.json'):
    be, fmt = os.path.basename(f)[2:-5].split('_')
    for x in json.load(open(f))['results']:
        k = (fmt, x['b'], x['s_q'], x['h_q'], x['s_k'], 'v' if x['varlen'] else '');
        r = x['replay_us']
        acc[k][be].append((st.median(r[:10]), st.median(r[30:]), x['max_rel_err'], x['device_errors']))
for k in sorted(acc):
    d = acc[k]
    c = {be: st.median(a for a, *_ in d[be]) for be in d}; h = {be: st.median(b for _, b, *_ in d[be]) for be in d}
    e = max(z for be in d for *_, z in d[be]); err = max(x for be in d for *_, x, _ in d[be])
    print('%s %d/%d/%d/%d%s' % k, f"sm90 cold {c['sm90']:.1f} capped {h['sm90']:.1f} | portable cold {c['portable']:.1f} capped {h['portable']:.1f}"
          f" | portable speedup cold {c['sm90']/c['portable']:.3f}x capped {h['sm90']/h['portable']:.3f}x  err {err:.1e} dev {e}")
PY
cd $OUT && tar cJf r8.tar.xz r8 && rm -r r8
