#!/bin/bash
# Session 33 run 10: an L2 prefetch of the page two tiles ahead of each copy (experiment_l2_prefetch_env.diff on
# e7b467f, 16-bit wide kernel, OPENMLA_EXP_FLAGS): none = 0; pf0 = 1 (the stage's half-0 copy thread of m-tile 0
# only, page block + 2); pfall = 3 (every m-tile); pf0d4 = 5 (m-tile 0, block + 4). Earlier prefetches were measured
# one page ahead by every copy thread (4-9% slower). Each shape by all variants back to back, order reversed in round 2.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s33/bench_l2pf.xz > $P/openmla-bench; chmod +x $P/openmla-bench
mkdir -p $OUT/pf
S="128,1,128,16384 128,1,128,4096 16,1,128,16384 64,2,64,4096 128,2,128,16384 16,2,128,16384 16,4,128,32768 128,1,64,4096 128,1,64,16384 64,1,64,4096 128,1,16,4096"
for r in 1 2; do
  order="none pf0 pfall pf0d4"; [ $r = 2 ] && order="pf0d4 pfall pf0 none"
  c=0; [ $r = 1 ] && c=1
  i=0
  for s in $S; do
    i=$((i + 1))
    for v in $order; do
      case $v in none) f=0;; pf0) f=1;; pfall) f=3;; pf0d4) f=5;; esac
      OPENMLA_EXP_FLAGS=$f timeout 60 $P/openmla-bench --backend sm90 --shape $s --check-samples $c --json $OUT/pf/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$s $v $r failed"
    done
  done
done
python3 - $OUT/pf <<'PY'
import glob, json, sys
xs = [x for p in glob.glob(sys.argv[1] + '/*_1.json') for x in json.load(open(p))['results']]
bad = [(x['b'], x['s_q'], x['h_q'], x['s_k'], x.get('max_rel_err')) for x in xs
       if x.get('status') != 'ok' or (x.get('max_rel_err') or 0) > 1e-2 or (x.get('max_lse_err') or 0) > 1e-4 or x.get('device_errors')]
print(len(xs), 'round-1 runs checked against the reference:', 'all within tolerance' if not bad else bad)
PY
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/pf none pf0 pfall pf0d4 | tee $OUT/table_pf.md
cd $OUT && tar cJf logs.tar.xz pf && rm -r pf
