#!/bin/bash
# Session 33 run 4: the planner's whole-request rule on shapes of 2+ m-tiles (experiment_whole_slack_env.diff on
# 7314028). Run 3 found 32 parts (whole requests on 128 CTAs) 1.009-1.020x faster than the automatic 33 (split) at
# b=128, s_q=2, h_q=128, 8K. Variants: a4 = today's rule (whole when no part exceeds the equal share by more than 4
# units), a16 = 16 units, p3 / p6 = max(4 units, 3% / 6% of the equal share). Two interleaved rounds; the first
# request of every shape checked against the reference.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s33/bench_slack.xz > $P/openmla-bench; chmod +x $P/openmla-bench
mkdir -p $OUT/slack
S="--shape 128,2,128,4096 --shape 128,2,128,8192 --shape 128,2,128,16384 --shape 128,1,128,8192 --shape 128,1,128,16384 --shape 64,2,128,16384 --shape 128,4,64,4096 --shape 128,4,64,16384 --shape 128,3,32,16384 --shape 128,1,128,4096,varlen --shape 128,2,128,1024"
for r in 1 2; do
  for v in a4 a16 p3 p6; do
    case $v in a4) a=4; q=0;; a16) a=16; q=0;; p3) a=4; q=3;; p6) a=4; q=6;; esac
    OPENMLA_EXP_SLACK=$a OPENMLA_EXP_SLACK_PCT=$q timeout 250 $P/openmla-bench --backend sm90 $S --check-samples 1 --json $OUT/slack/bf16_${v}_$r.json > /dev/null 2>&1 || echo "bf16 $v $r failed"
  done
done
python3 - $OUT/slack <<'PY'
import glob, json, sys
bad = [(p, x['b'], x['s_q'], x['h_q'], x['s_k'], x.get('max_rel_err'), x.get('max_lse_err')) for p in glob.glob(sys.argv[1] + '/*.json')
       for x in json.load(open(p))['results'] if x.get('status') != 'ok' or x.get('max_rel_err', 0) > 1e-2 or x.get('max_lse_err', 0) > 1e-4]
print('slack runs checked against the reference:', 'all within tolerance' if not bad else bad)
PY
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/slack a4 a16 p3 p6 | tee $OUT/table_slack.md
cd $OUT && tar cJf logs.tar.xz slack && rm -r slack
