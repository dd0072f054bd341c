#!/bin/bash
# Session 36 run 5: 1) per-pair clock64 stamps of one CTA (part 10, both m-tiles) in FlashMLA's kernel (scratch build
# with stamps, stdout) and ours (experiment_pair_trace.diff, OPENMLA_EXP_TRACE=1, stderr) at b=128, s_q=1, h_q=128,
# 16K and b=64, s_q=2, h_q=64, 4K; 2) the landed build (consumer 1's late boxes in copy order): sm90 GPU suite and
# memcheck / racecheck / synccheck on the seesaw's tests; 3) its times on run 4's shapes.
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s36/bench_trace.xz > $P/bench_trace; xz -dc .carry/s36/fm_trace.xz > $P/fm_trace
xz -dc .carry/s36/bench_o.xz > $P/openmla-bench; xz -dc .carry/s36/gpu_tests_o.xz > $P/tests/openmla_gpu_tests
chmod +x $P/bench_trace $P/fm_trace $P/openmla-bench $P/tests/openmla_gpu_tests
mkdir -p $OUT/trace
for s in 128,1,128,16384 64,2,64,4096; do
  timeout 120 $P/fm_trace --shape $s --replays 5 > $OUT/trace/fm_$s.txt 2>&1 || echo "fm_trace $s failed"
  OPENMLA_EXP_TRACE=1 timeout 120 $P/bench_trace --backend sm90 --shape $s --check-samples 0 --json /dev/null \
    > /dev/null 2> $OUT/trace/ours_$s.txt || echo "bench_trace $s failed"
  echo "== $s"; grep -h -E '^FLASHMLA' $OUT/trace/fm_$s.txt
  python3 bench/results/2026-12-03-session36/trace_pairs.py $OUT/trace/fm_$s.txt $OUT/trace/ours_$s.txt | tee $OUT/trace_$s.txt
done
SEESAW='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:Decode.Sm90ScheduleForced:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount'
PREBUILT=$P BACKENDS="sm90" SANITIZE=1 SANITIZE_FILTER="$SEESAW" TEST_TIMEOUT=240 SANITIZE_TIMEOUT=150 \
  COMMIT=${COMMIT:-unknown} bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -12 $OUT/check.txt
for s in 128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,64,1024 128,1,128,4096,varlen; do
  timeout 120 $P/openmla-bench --backend sm90 --shape $s --check-samples 1 --json $OUT/trace/landed_$s.json > /dev/null 2>&1 || echo "landed $s failed"
done
python3 - $OUT/trace <<'PY' | tee $OUT/landed_times.md
import glob, json, sys
print('| b | s_q | h_q | s_k | varlen | µs | rel err | lse err | device errors |')
print('|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
for p in sorted(glob.glob(sys.argv[1] + '/landed_*.json')):
    for x in json.load(open(p))['results']:
        print(f"| {x['b']} | {x['s_q']} | {x['h_q']} | {x['s_k']} | {int(x['varlen'])} | {x['time_us']:.1f} | {x.get('max_rel_err')} | {x.get('max_lse_err')} | {x.get('device_errors')} |")
PY
cd $OUT && tar cJf run5_logs.tar.xz trace check && rm -r trace check
ls -la $OUT
