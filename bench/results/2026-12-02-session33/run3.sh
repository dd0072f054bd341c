#!/bin/bash
# Session 33 run 3. "held" = 7314028: the shared TileMask (tile_mask.cuh) with the FP8-math kernel holding its rows'
# limits through the segment as before (runs 1-2: computing them in the masked branch ran 0.99x on its long
# compute-bound rows); the wide 16-bit kernels' SASS is identical to base's, the wide FP8 ones differ in register
# assignment only. base = bd48c69.
# 1) sm90 GPU suite and the sanitizers on gpu_check.sh's subset; 2) base against held: FP8 math, wide FP8 and
# seesaw shapes, four interleaved rounds; 3) issue #4's compute-bound shape with 32 parts (whole requests,
# 128 CTAs) against the automatic 33 (split), bf16, e4m3 and FP8 math, two rounds.
set -u
P=/tmp/pre; mkdir -p $P/base $P/held/tests
xz -dc .carry/s33/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s33/bench_held.xz > $P/held/openmla-bench
xz -dc .carry/s33/gpu_tests_held.xz > $P/held/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/held/openmla-bench $P/held/tests/openmla_gpu_tests
mkdir -p $OUT/check $OUT/ab $OUT/parts
PREBUILT=$P/held BACKENDS="sm90" SANITIZE=1 COMMIT=7314028 bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -9 $OUT/check.txt
F="--shape 128,2,128,8192 --shape 128,1,128,16384 --shape 16,4,128,32768 --shape 128,4,128,1024 --shape 64,2,64,4096 --shape 1,1,128,32768"
W="--shape 128,1,64,16384 --shape 128,2,128,8192 --shape 64,2,64,4096"
S="--shape 128,1,128,16384 --shape 128,2,128,1024"
for r in 1 2 3 4; do
  for v in base held; do
    timeout 100 $P/$v/openmla-bench --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv $F --check-samples 0 --json $OUT/ab/fp8m_${v}_$r.json > /dev/null 2>&1 || echo "fp8m $v $r failed"
    timeout 100 $P/$v/openmla-bench --backend sm90 --format fp8_e4m3 $W --check-samples 0 --json $OUT/ab/e4m3_${v}_$r.json > /dev/null 2>&1 || echo "e4m3 $v $r failed"
    timeout 100 $P/$v/openmla-bench --backend sm90 --format fp8_ds_mla $W --check-samples 0 --json $OUT/ab/dsmla_${v}_$r.json > /dev/null 2>&1 || echo "dsmla $v $r failed"
    timeout 100 $P/$v/openmla-bench --backend sm90 $S --check-samples 0 --json $OUT/ab/bf16_${v}_$r.json > /dev/null 2>&1 || echo "bf16 $v $r failed"
  done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base held | tee $OUT/table_held.md
for r in 1 2; do
  for v in auto p32; do
    n=0; [ $v = p32 ] && n=32
    timeout 100 $P/held/openmla-bench --num-parts $n --format bf16,fp8_e4m3 --shape 128,2,128,8192 --check-samples 1 --json $OUT/parts/cb_${v}_$r.json > /dev/null 2>&1 || echo "cb $v $r failed"
    timeout 100 $P/held/openmla-bench --num-parts $n --format fp8_e4m3 --fp8-math qk_and_pv --shape 128,2,128,8192 --check-samples 1 --json $OUT/parts/cbfp8m_${v}_$r.json > /dev/null 2>&1 || echo "cbfp8m $v $r failed"
  done
done
python3 - $OUT/parts <<'PY'
import glob, json, os, statistics, sys
t = {}
for p in sorted(glob.glob(sys.argv[1] + '/*.json')):
    tag, v, r = os.path.basename(p)[:-5].split('_')
    for x in json.load(open(p))['results']:
        t.setdefault((tag, x['format'], v), []).append((x['time_us'], x.get('max_rel_err'), x['status']))
for k in sorted(t):
    print(k, 'median %.1f us' % statistics.median(a for a, _, _ in t[k]), 'errs', [e for _, e, _ in t[k]], {s for _, _, s in t[k]})
PY
cd $OUT && tar cJf logs.tar.xz check ab parts && rm -r check ab parts
