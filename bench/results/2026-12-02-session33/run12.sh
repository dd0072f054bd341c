#!/bin/bash
# Session 33 run 12: does FP8 math (run 11: 1.04-1.06x from whole requests at 4K-16K) want a larger whole-request
# slack than the 3% of e7b467f? experiment_whole_slack_env.diff on 7314028 (the env rule, as in run 5): p3 against
# p6 on FP8 math's 16K-32K shapes that need 3.0-3.1% (whole only under p6), each shape by both back to back, the
# order reversed in round 2.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s33/bench_slack.xz > $P/openmla-bench; chmod +x $P/openmla-bench
mkdir -p $OUT/s
for r in 1 2; do
  order="p3 p6"; [ $r = 2 ] && order="p6 p3"
  i=0
  for s in 128,1,128,16384 64,2,128,16384 128,2,128,16384 128,1,128,32768; do
    i=$((i + 1))
    for v in $order; do
      case $v in p3) q=3;; p6) q=6;; esac
      OPENMLA_EXP_SLACK=4 OPENMLA_EXP_SLACK_PCT=$q timeout 60 $P/openmla-bench --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv --shape $s --check-samples 0 --json $OUT/s/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$s $v $r failed"
    done
  done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/s p3 p6 | tee $OUT/table.md
cd $OUT && tar cJf logs.tar.xz s && rm -r s
