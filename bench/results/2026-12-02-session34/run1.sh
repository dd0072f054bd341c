#!/bin/bash
# Session 34 run 1, one experiment build (experiment_trace_slack_env.diff on e1bac6b):
#  A. per-CTA globaltimer stamps of the decode and combine kernels (OPENMLA_EXP_TRACE=1) on the shapes whose
#     fixed cost per call is in question (b=128 at 1K-4K, the small batches);
#  B. the planner's whole-request slack: FP8 math at 16K-32K with 6% instead of 3% (p6 vs p3), and one m-tile
#     at b=128 with no slack (s0: requests split over all 132 parts) against today's 4 units (a4). Each shape by
#     both variants back to back, the order reversed in round 2.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s34/bench_exp.xz > $P/openmla-bench; chmod +x $P/openmla-bench
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
mkdir -p $OUT/trace $OUT/ab
i=0
for s in 128,1,64,1024 128,1,64,4096 128,1,64,16384 128,4,16,1024 128,1,16,1024 128,1,16,4096 128,1,128,1024 \
         128,1,128,4096 128,4,128,1024 128,1,128,4096,varlen 16,1,16,4096 64,1,16,4096 1,1,128,32768 1,1,16,4096; do
  i=$((i + 1))
  OPENMLA_EXP_TRACE=1 timeout 60 $P/openmla-bench --backend sm90 --shape $s --check-samples 0 \
    --json $OUT/trace/t$i.json > /dev/null 2> $OUT/trace/t$i.err || echo "trace $s failed"
  grep TRACE $OUT/trace/t$i.err
done
for r in 1 2; do
  c=0; [ $r = 1 ] && c=1
  for s in 128,1,128,16384 128,2,128,16384 128,1,128,32768 16,4,128,32768; do
    order="p3 p6"; [ $r = 2 ] && order="p6 p3"
    for v in $order; do
      q=3; [ $v = p6 ] && q=6
      OPENMLA_EXP_SLACK_PCT=$q timeout 60 $P/openmla-bench --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv \
        --shape $s --check-samples $c --json $OUT/ab/fp8m_${v}_${r}x${s//,/-}.json > /dev/null 2>&1 || echo "$s $v $r failed"
    done
  done
  for s in 128,1,64,4096 128,1,64,1024 128,4,16,4096 128,1,16,4096 128,2,16,4096; do
    order="a4 s0"; [ $r = 2 ] && order="s0 a4"
    for v in $order; do
      env_pct=""; [ $v = s0 ] && env_pct=-1
      OPENMLA_EXP_SLACK_PCT=$env_pct timeout 60 $P/openmla-bench --backend sm90 --shape $s --check-samples $c \
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
        t.setdefault((tag, x['b'], x['s_q'], x['h_q'], x['s_k'], x['varlen']), {}).setdefault(v, []).append(x['time_us'])
        if x['status'] != 'ok' or (x.get('max_rel_err') or 0) > 1e-2 or (x.get('max_lse_err') or 0) > 1e-4 or x.get('device_errors'):
            bad.append((tag, x['b'], x['s_q'], x['h_q'], x['s_k'], v, x.get('max_rel_err')))
print('checked in round 1:', 'all within tolerance' if not bad else bad)
print('| mode | b | s_q | h_q | s_k | variant A µs | variant B µs | B / A speed |')
print('|---|---:|---:|---:|---:|---|---|---:|')
for k in sorted(t):
    vs = sorted(t[k]); a, b = vs[0], vs[1]
    ma, mb = statistics.median(t[k][a]), statistics.median(t[k][b])
    print('| %s | %d | %d | %d | %d | %s %.1f (%s) | %s %.1f (%s) | %.3fx |' % (k[:5] + (a, ma, ' '.join('%.1f' % x for x in t[k][a]), b, mb, ' '.join('%.1f' % x for x in t[k][b]), ma / mb)))
PY
cd $OUT && tar cJf logs.tar.xz trace ab && rm -r trace ab
