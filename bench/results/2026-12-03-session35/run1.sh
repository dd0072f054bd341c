#!/bin/bash
# Session 35 run 1: the seesaw without a producer warpgroup (seesaw_self_copy_kernel.cuh, 256 threads, each consumer
# refills its own V half; OPENMLA_EXPERIMENT_SEESAW_SELF_COPY=1 "self", =2 "rq8": also Q's rope box in registers) against
# the seesaw with the producer (=0, "prod"), one binary. 1) a hang probe per variant; 2) the sm90 GPU suite and the
# sanitizers on the seesaw's tests with each new kernel; 3) same-run A/B on the seesaw's shapes (>= 65 rows), each
# shape by the three variants back to back, the order reversed in round 2.
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s35/bench.xz > $P/openmla-bench; xz -dc .carry/s35/gpu_tests.xz > $P/tests/openmla_gpu_tests
chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests
export OPENMLA_COMMIT=${COMMIT:-unknown}
mkdir -p $OUT/check $OUT/ab
for e in 1 2; do
  OPENMLA_EXPERIMENT_SEESAW_SELF_COPY=$e timeout 30 $P/openmla-bench --backend sm90 --shape 16,2,128,4096 --check-samples 1 > $OUT/probe$e.txt 2>&1
  rc=$?; echo "probe $e rc=$rc"; tail -3 $OUT/probe$e.txt
  if [ $rc != 0 ]; then echo "probe failed: stopping"; exit 1; fi
done
SEESAW='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:Decode.Sm90ScheduleForced:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount'
for e in 1 2; do
  OPENMLA_EXPERIMENT_SEESAW_SELF_COPY=$e PREBUILT=$P BACKENDS="sm90" SANITIZE=1 SANITIZE_FILTER="$SEESAW" TEST_TIMEOUT=150 \
    SANITIZE_TIMEOUT=120 COMMIT=$OPENMLA_COMMIT bash scripts/gpu_check.sh none $OUT/check/v$e > $OUT/check$e.txt 2>&1
  echo "variant $e:"; tail -5 $OUT/check$e.txt
done
S="128,1,128,16384 128,2,128,8192 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,4096,varlen \
1,1,128,32768 128,3,32,16384 16,1,128,4096 128,1,128,1024"
for r in 1 2; do
  order="prod self rq8"; [ $r = 2 ] && order="rq8 self prod"
  i=0
  for s in $S; do
    i=$((i + 1))
    for v in $order; do
      e=0; [ $v = self ] && e=1; [ $v = rq8 ] && e=2
      OPENMLA_EXPERIMENT_SEESAW_SELF_COPY=$e timeout 60 $P/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) \
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
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab prod self rq8 | tee $OUT/table_self_copy.md
cd $OUT && tar cJf logs.tar.xz check ab && rm -r check ab
