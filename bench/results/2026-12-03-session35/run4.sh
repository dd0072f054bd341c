#!/bin/bash
# Session 35 run 4: does the order of a request's pages matter (translation locality), and does touching a page a few
# tiles ahead help the wide kernel? Experiment knobs (experiment_page_order_prefetch.diff):
#   OPENMLA_BENCH_SEQUENTIAL_PAGES=1  each request's pages contiguous and in order (the method: a random permutation);
#   OPENMLA_EXP_PREFETCH_AHEAD=N      the wide kernel's half-0 copy threads `prefetch.global.L2` one line of the page N
#                                     tiles ahead in the segment (range-checked id).
# Variants: base, seq, pf2, pf4; each shape by all four back to back, the order reversed in round 2.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s35/bench.xz > $P/openmla-bench; chmod +x $P/openmla-bench
export OPENMLA_COMMIT=${COMMIT:-unknown}
mkdir -p $OUT/ab
S="128,1,64,4096 128,1,64,1024 128,4,16,1024 128,1,128,16384 128,2,128,8192 64,2,64,4096 16,1,128,4096 \
128,3,32,16384 128,1,16,16384"
for r in 1 2; do
  order="base seq pf2 pf4"; [ $r = 2 ] && order="pf4 pf2 seq base"
  i=0
  for s in $S; do
    i=$((i + 1))
    for v in $order; do
      case $v in base) e="";; seq) e="OPENMLA_BENCH_SEQUENTIAL_PAGES=1";; pf2) e="OPENMLA_EXP_PREFETCH_AHEAD=2";;
        pf4) e="OPENMLA_EXP_PREFETCH_AHEAD=4";; esac
      env $e timeout 60 $P/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) \
        --json $OUT/ab/bf16${i}_${v}_$r.json > /dev/null 2>&1 || echo "$s $v $r failed"
    done
  done
done
python3 - $OUT/ab <<'PY'
import glob, json, sys
bad = [(p.split('/')[-1], x.get('max_rel_err'), x.get('max_lse_err'), x.get('device_errors'))
       for p in glob.glob(sys.argv[1] + '/*.json') for x in json.load(open(p))['results']
       if x.get('status') != 'ok' or (x.get('max_rel_err') or 0) > 1e-2 or (x.get('max_lse_err') or 0) > 1e-4 or x.get('device_errors')]
print('round-1 checks and device errors:', 'all fine' if not bad else bad)
PY
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base seq pf2 pf4 | tee $OUT/table_page_order.md
cd $OUT && tar cJf logs.tar.xz ab && rm -r ab
