#!/bin/bash
# Session 33 run 2. (1) FP8 math, base (bd48c69) against new (the shared TileMask, f4f0114), three more interleaved
# rounds. (2) experiment_q_gate_env.diff on new: OPENMLA_EXP_FLAGS=1 lets the copy of a part's second page go
# without waiting for the first Q (8a85623's gate), on the 64-row memory-bound class and a few latency-bound shapes;
# gate (flags 0) against nogate (flags 1), three interleaved rounds.
set -u
P=/tmp/pre; mkdir -p $P/base $P/new $P/qgate
xz -dc .carry/s33/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s33/bench_new.xz > $P/new/openmla-bench
xz -dc .carry/s33/bench_qgate.xz > $P/qgate/openmla-bench; chmod +x $P/*/openmla-bench
mkdir -p $OUT/fp8m $OUT/gate
F="--shape 128,2,128,8192 --shape 128,1,128,16384 --shape 16,4,128,32768 --shape 128,4,128,1024 --shape 64,2,64,4096 --shape 1,1,128,32768"
G="--shape 128,1,64,1024 --shape 128,1,64,4096 --shape 128,4,16,1024 --shape 128,4,16,4096 --shape 64,1,64,1024 --shape 64,1,64,4096 --shape 128,1,64,16384 --shape 16,1,64,1024 --shape 16,1,16,4096 --shape 1,1,64,4096 --shape 1,1,128,32768 --shape 128,1,128,1024 --shape 128,2,128,1024 --shape 128,1,128,4096,varlen"
for r in 3 4 5; do
  for v in base new; do
    timeout 100 $P/$v/openmla-bench --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv $F --check-samples 0 --json $OUT/fp8m/fp8m_${v}_$r.json > /dev/null 2>&1 || echo "fp8m $v $r failed"
  done
  for v in gate nogate; do
    f=0; [ $v = nogate ] && f=1
    OPENMLA_EXP_FLAGS=$f timeout 150 $P/qgate/openmla-bench --backend sm90 $G --check-samples 1 --json $OUT/gate/gate_${v}_$r.json > /dev/null 2>&1 || echo "gate $v $r failed"
  done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/fp8m base new | tee $OUT/table_fp8math.md
python3 - $OUT/gate <<'PY'
import glob, json, sys
bad = [(p, x['b'], x['s_q'], x['h_q'], x['s_k'], x.get('max_rel_err'), x.get('max_lse_err')) for p in glob.glob(sys.argv[1] + '/*.json')
       for x in json.load(open(p))['results'] if x.get('status') != 'ok' or x.get('max_rel_err', 0) > 1e-2 or x.get('max_lse_err', 0) > 1e-4]
print('gate runs checked against the reference:', 'all within tolerance' if not bad else bad)
PY
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/gate gate nogate | tee $OUT/table_gate.md
cd $OUT && tar cJf logs.tar.xz fp8m gate && rm -r fp8m gate
