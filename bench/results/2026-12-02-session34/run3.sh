#!/bin/bash
# Session 34 run 3: per-CTA stamps (experiment_trace_slack_env.diff, now with the SM id, the part's segments and tiles,
# and the narrow kernel's end) written to a CSV, each shape in two processes, to see what the CTAs that end last
# have in common (their SM, their segments, a late first page). Then the planner's cost of a request's segment
# (kRequestOverheadUnits, 1 unit = one 64-token tile) at 1 (o1, today), 3 and 5 units (OPENMLA_EXP_OVERHEAD) on split
# and varlen shapes, each shape by every variant back to back, the order reversed in round 2.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s34/bench_exp2.xz > $P/openmla-bench; chmod +x $P/openmla-bench
for r in 1 2; do
  for s in 16,1,16,4096 128,1,64,4096 128,1,64,1024 64,1,16,4096 128,1,16,4096 128,1,128,4096 1,1,128,32768 \
           128,1,128,4096,varlen 128,1,16,16384,varlen 128,2,128,4096,varlen 64,1,128,4096,varlen; do
    OPENMLA_EXP_TRACE=1 OPENMLA_EXP_TRACE_CSV=$OUT/cta_$r.csv timeout 60 $P/openmla-bench --backend sm90 --shape $s \
      --check-samples 0 --json /tmp/t.json > /dev/null 2> /tmp/t.err || echo "$s failed"
    grep TRACE /tmp/t.err
  done
done
wc -l $OUT/cta_*.csv
mkdir -p $OUT/ab
for r in 1 2; do
  c=0; [ $r = 1 ] && c=1
  order="o1 o3 o5"; [ $r = 2 ] && order="o5 o3 o1"
  for s in 128,1,128,4096,varlen 128,1,16,16384,varlen 128,2,128,4096,varlen 64,1,128,4096,varlen 16,1,16,4096 \
           16,1,128,4096 64,2,64,4096; do
    for v in $order; do
      OPENMLA_EXP_OVERHEAD=${v#o} timeout 60 $P/openmla-bench --backend sm90 --shape $s --check-samples $c \
        --json $OUT/ab/bf16_${v}_${r}x${s//,/-}.json > /dev/null 2>&1 || echo "$s $v $r failed"
    done
  done
done
python3 - $OUT/ab <<'PY'
import glob, json, os, statistics, sys
t = {}; bad = []
for p in glob.glob(sys.argv[1] + '/*.json'):
    tag, v, rest = os.path.basename(p)[:-5].split('_')
    for x in json.load(open(p))['results']:
        t.setdefault((x['b'], x['s_q'], x['h_q'], x['s_k'], 'varlen' if x['varlen'] else ''), {}).setdefault(v, []).append(x['time_us'])
        if x['status'] != 'ok' or (x.get('max_rel_err') or 0) > 1e-2 or (x.get('max_lse_err') or 0) > 1e-4 or x.get('device_errors'):
            bad.append((x['b'], x['s_q'], x['h_q'], x['s_k'], v, x.get('max_rel_err')))
print('checked in round 1:', 'all within tolerance' if not bad else bad)
print('| b | s_q | h_q | s_k | | o1 µs | o3 µs | o5 µs | o1/o3 | o1/o5 |')
print('|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|')
for k in sorted(t):
    m = {v: statistics.median(x) for v, x in t[k].items()}
    print('| %d | %d | %d | %d | %s | %.1f | %.1f | %.1f | %.3fx | %.3fx |' % (k + (m['o1'], m['o3'], m['o5'], m['o1'] / m['o3'], m['o1'] / m['o5'])))
PY
cd $OUT && tar cJf logs.tar.xz ab && rm -r ab
