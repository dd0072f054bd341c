#!/bin/bash
# Session 32 run 6: run 5's one loss (b=128, s_q=2, h_q=128, 16K: 0.980x) and three neighbours again, base
# (1585288) against nospill (bd48c69), three interleaved rounds, cold.
set -u
P=/tmp/pre; mkdir -p $P/base $P/nospill
xz -dc .carry/s32/bench_head.xz > $P/base/openmla-bench; xz -dc .carry/s32/bench_nospill.xz > $P/nospill/openmla-bench
chmod +x $P/base/openmla-bench $P/nospill/openmla-bench
S="--shape 128,2,128,16384 --shape 128,1,128,16384 --shape 16,4,128,32768 --shape 128,2,128,8192"
mkdir -p $OUT/ab
for r in 1 2 3; do
  for v in nospill base; do
    timeout 100 $P/$v/openmla-bench --backend sm90 $S --check-samples 0 --json $OUT/ab/bf16_${v}_$r.json > /dev/null 2>&1 || echo "$v $r failed"
  done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base nospill | tee $OUT/table.md
python3 - <<'PY'
import glob, json, os
for f in sorted(glob.glob(os.environ['OUT'] + '/ab/*.json')):
    print(os.path.basename(f), ' '.join('%.1f' % x['time_us'] for x in json.load(open(f))['results']))
PY
cd $OUT && tar cJf ab.tar.xz ab && rm -r ab
