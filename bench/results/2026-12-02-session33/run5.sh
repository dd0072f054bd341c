#!/bin/bash
# Session 33 run 5: run 4's rule candidates again, each shape timed by all variants back to back (one process per
# shape and variant, the order reversed in round 2), since run 4 timed each variant over all shapes in turn and the
# later variants ran up to 5% slower on shapes whose plan they do not change. Variants (experiment_whole_slack_env.diff
# on 7314028): a4 = today's rule; p3 / p4 = whole requests when no part exceeds the equal share by more than
# max(4 units, 3% / 4% of it).
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s33/bench_slack.xz > $P/openmla-bench; chmod +x $P/openmla-bench
mkdir -p $OUT/slack
S="128,1,128,8192 128,2,128,4096 128,4,64,4096 128,2,128,8192 64,1,128,16384 128,1,128,16384 64,2,128,16384 128,2,128,16384 128,1,128,32768 128,1,128,4096,varlen 128,2,128,1024"
for r in 1 2; do
  order="a4 p3 p4"; [ $r = 2 ] && order="p4 p3 a4"
  c=0; [ $r = 1 ] && c=1
  i=0
  for s in $S; do
    i=$((i + 1))
    for v in $order; do
      case $v in a4) q=0;; p3) q=3;; p4) q=4;; esac
      OPENMLA_EXP_SLACK=4 OPENMLA_EXP_SLACK_PCT=$q timeout 60 $P/openmla-bench --backend sm90 --shape $s --check-samples $c --json $OUT/slack/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$s $v $r failed"
    done
  done
done
python3 - $OUT/slack <<'PY'
import glob, json, sys
bad = [(p, x['b'], x['s_q'], x['h_q'], x['s_k'], x.get('max_rel_err'), x.get('max_lse_err')) for p in glob.glob(sys.argv[1] + '/*.json')
       for x in json.load(open(p))['results'] if x.get('status') != 'ok' or x.get('max_rel_err', 0) > 1e-2 or x.get('max_lse_err', 0) > 1e-4]
print('round-1 runs checked against the reference:', 'all within tolerance' if not bad else bad)
PY
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/slack a4 p3 p4 | tee $OUT/table_slack.md
cd $OUT && tar cJf logs.tar.xz slack && rm -r slack
