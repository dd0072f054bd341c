#!/bin/bash
# Session 33 run 11: the 3% whole-request rule (e7b467f) on the FP8 kernels with 2+ m-tiles (wide e4m3 and ds_mla,
# FP8 math), base (bd48c69) against e7b467f on three shapes whose plan it changes, each shape and format by both
# binaries back to back, the order reversed in round 2.
set -u
P=/tmp/pre; mkdir -p $P/base $P/final
xz -dc .carry/s33/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s33/bench_final.xz > $P/final/openmla-bench
chmod +x $P/base/openmla-bench $P/final/openmla-bench
mkdir -p $OUT/ab
for r in 1 2; do
  order="base final"; [ $r = 2 ] && order="final base"
  c=0; [ $r = 1 ] && c=1
  for s in 128,1,128,8192 128,2,128,4096 64,1,128,16384; do
    for m in e4m3 dsmla fp8m; do
      case $m in e4m3) a="--format fp8_e4m3";; dsmla) a="--format fp8_ds_mla";; fp8m) a="--format fp8_e4m3 --fp8-math qk_and_pv";; esac
      for v in $order; do
        timeout 60 $P/$v/openmla-bench --backend sm90 $a --shape $s --check-samples $c --json $OUT/ab/${m}_${v}_${r}x${s//,/-}.json > /dev/null 2>&1 || echo "$s $m $v $r failed"
      done
    done
  done
done
python3 - $OUT/ab <<'PY'
import glob, json, os, statistics, sys
t = {}; bad = []
for p in glob.glob(sys.argv[1] + '/*.json'):
    tag, v, rest = os.path.basename(p)[:-5].split('_')
    for x in json.load(open(p))['results']:
        t.setdefault((tag, x['b'], x['s_q'], x['h_q'], x['s_k'], v), []).append(x['time_us'])
        if x['status'] != 'ok' or (x.get('max_rel_err') or 0) > 1e-2 or (x.get('max_lse_err') or 0) > 1e-4 or x.get('device_errors'):
            bad.append((tag, x['b'], x['s_q'], x['h_q'], x['s_k'], v, x.get('max_rel_err')))
print('checked in round 1:', 'all within tolerance' if not bad else bad)
print('| mode | b | s_q | h_q | s_k | base µs | e7b467f µs | ratio |')
print('|---|---:|---:|---:|---:|---:|---:|---:|')
for k in sorted({k[:5] for k in t}):
    b, f = statistics.median(t[k + ('base',)]), statistics.median(t[k + ('final',)])
    print('| %s | %d | %d | %d | %d | %.1f | %.1f | %.3fx |' % (k + (b, f, b / f)))
PY
cd $OUT && tar cJf logs.tar.xz ab && rm -r ab
