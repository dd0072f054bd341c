#!/bin/bash
# Session 38 run 4 (debugging run 3's accuracy failures of the two-term build): the pair conversion alone
# (debug_two_term_convert.cu, built here), then the bench's CPU-reference check on small e4m3 shapes with the
# two-term build (tt), the same with Q_lo zeroed (dbg1, -DOPENMLA_TT_DEBUG=1) and with P_lo zeroed (dbg2), and
# 6c3d50e's build (base: the wide kernel's exact expansion); then e4m3 storage on the 32-row narrow kernel.
# First (the part that can land code), the spare-P_b decision hoisted (see there).
set -u
P=/tmp/pre; mkdir -p $P
for v in base tt dbg1 dbg2; do xz -dc .carry/s38/bench_$v.xz > $P/bench_$v; chmod +x $P/bench_$v; done
# The spare-P_b decision computed once at the wide kernel's top (landed as b0ad2ba; before, the copy threads computed it
# per tile and the consumers per segment; the same value): timed against 6c3d50e's build on the seesaw's 96-512-row
# shapes, then the sm90 GPU suite and memcheck / racecheck / synccheck on the seesaw's tests with it.
mkdir -p $P/base $P/hoist/tests
cp $P/bench_base $P/base/openmla-bench
xz -dc .carry/s38/bench_hoist.xz > $P/hoist/openmla-bench; xz -dc .carry/s38/gpu_tests_hoist.xz > $P/hoist/tests/openmla_gpu_tests
chmod +x $P/hoist/openmla-bench $P/hoist/tests/openmla_gpu_tests
BINS="base=$P/base hoist=$P/hoist" OUT=$OUT/hoist \
  SHAPES="128,1,128,16384 64,2,64,4096 128,1,128,1024 128,3,32,4096 16,4,128,32768 128,2,128,16384 128,4,128,1024" \
  bash scripts/ab_env.sh --backend sm90 | tee $OUT/table_hoist.md
SEESAW='AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq1_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq3_hq32_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq64_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:Decode.Sm90ScheduleForced:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount'
PREBUILT=$P/hoist BACKENDS="sm90" SANITIZE=1 SANITIZE_FILTER="$SEESAW" TEST_TIMEOUT=300 SANITIZE_TIMEOUT=150 \
  COMMIT=${COMMIT:-unknown} bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -6 $OUT/check.txt
chmod +x .carry/s38/conv 2>/dev/null; cp .carry/s38/conv $P/conv; chmod +x $P/conv; $P/conv
for s in 8,4,32,1000 4,1,128,3000; do
  for v in base tt dbg1 dbg2; do
    $P/bench_$v --backend sm90 --shape $s --format fp8_e4m3 --check-samples 4 --check-heads 32 --replays 5 --json $OUT/c_${v}_${s//,/_}.json > /dev/null 2>&1
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results'][0]; print(sys.argv[2], sys.argv[3], r.get('status'), 'out', r.get('max_rel_err'), 'lse', r.get('max_lse_err'), 'us', r.get('time_us'))" $OUT/c_${v}_${s//,/_}.json $v $s
  done
done
# e4m3 storage at 256 rows on the 32-row narrow kernel (--sm90-rows-per-cta 32: eight CTAs per request, each page
# from L2 for seven of them) against the automatic wide kernel, 6c3d50e's build.
for r in 1 2; do
  for v in auto n32; do
    extra=""; [ $v = n32 ] && extra="--sm90-rows-per-cta 32"
    $P/bench_base --backend sm90 --shape 128,2,128,8192 --format fp8_e4m3 --check-samples 0 $extra --json $OUT/n32_${v}_$r.json > /dev/null 2>&1
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results'][0]; print('e4m3 128,2,128,8192', sys.argv[2], r.get('status'), 'us', r.get('time_us'))" $OUT/n32_${v}_$r.json $v
  done
done
echo "all done at ${SECONDS} s"
cd $OUT && tar cJf logs.tar.xz hoist check && rm -r hoist check
