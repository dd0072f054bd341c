#!/bin/bash
# Session 30 run 2: the narrow kernel on 16-bit caches (16 / 32 rows per CTA). The new test alone, its
# sanitizers, the sm90 suite; then the narrow form against the wide kernel (and the portable kernel at
# 16 rows), cold (two interleaved rounds) and at the power cap (--sustain-ms 200).
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s30/bench_new.xz > $P/openmla-bench; xz -dc .carry/s30/gpu_tests_new.xz > $P/tests/openmla_gpu_tests
chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests
T=$P/tests/openmla_gpu_tests
OPENMLA_BACKEND=sm90 timeout 120 $T --gtest_filter='Decode.Sm90Narrow16BitForced:Decode.Sm90ScheduleOptionRejectsWhatCannotRun' > $OUT/new_test.log 2>&1
echo "new test rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Failure|max_rel|error" $OUT/new_test.log | head -20
if ! grep -q "^\[  PASSED  \] 2 tests" $OUT/new_test.log; then tail -40 $OUT/new_test.log; exit 1; fi
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $T --gtest_filter=Decode.Sm90Narrow16BitForced --gtest_brief=1 > $OUT/san_$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1)"
done
OPENMLA_BACKEND=sm90 timeout 300 $T --gtest_filter='*-*Portable*' > $OUT/suite_sm90.log 2>&1
echo "sm90 suite rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/suite_sm90.log | tr '\n' ' ')"; grep -E '^\[  FAILED  \]' $OUT/suite_sm90.log | head
B=$P/openmla-bench
S32=""; S16=""
for b in 1 16 64 128; do for sk in 1024 4096 16384 32768; do S32="$S32 --shape $b,2,16,$sk"; S16="$S16 --shape $b,1,16,$sk"; done; done
S32="$S32 --shape 128,2,16,4096,varlen"
mkdir -p $OUT/ab
for r in 1 2; do
  for v in 64 32; do $B --backend sm90 --sm90-rows-per-cta $v $S32 --check-samples 1 --json $OUT/ab/r32_${v}_$r.json > /dev/null 2>&1; done
  for v in 64 16; do $B --backend sm90 --sm90-rows-per-cta $v $S16 --check-samples 1 --json $OUT/ab/r16_${v}_$r.json > /dev/null 2>&1; done
  $B --backend portable $S16 --check-samples 0 --json $OUT/ab/r16_portable_$r.json > /dev/null 2>&1
done
C32=""; C16=""
for b in 64 128; do for sk in 4096 16384; do C32="$C32 --shape $b,2,16,$sk"; C16="$C16 --shape $b,1,16,$sk"; done; done
for r in 1 2; do
  for v in 64 32; do $B --backend sm90 --sm90-rows-per-cta $v $C32 --sustain-ms 200 --check-samples 0 --json $OUT/ab/c32_${v}_$r.json > /dev/null 2>&1; done
  for v in 16; do $B --backend sm90 --sm90-rows-per-cta $v $C16 --sustain-ms 200 --check-samples 0 --json $OUT/ab/c16_${v}_$r.json > /dev/null 2>&1; done
  $B --backend portable $C16 --sustain-ms 200 --check-samples 0 --json $OUT/ab/c16_portable_$r.json > /dev/null 2>&1
done
python3 - <<'PY'
import json, glob, os, statistics, collections
out = os.environ['OUT'] + '/ab'
t = collections.defaultdict(list); err = {}
for f in glob.glob(out + '/*.json'):
    tag, v, r = os.path.basename(f)[:-5].split('_')
    for x in json.load(open(f))['results']:
        if x.get('status') != 'ok': continue
        key = (tag, x['b'], x['s_q'], x['h_q'], ('~%d' % x['mean_seqlen']) if x['varlen'] else x['s_k'])
        t[key + (v,)].append(x['time_us'])
        if x.get('max_rel_err') is not None: err[key + (v,)] = max(err.get(key + (v,), 0), x['max_rel_err'])
keys = sorted({k[:-1] for k in t}, key=lambda k: (k[0], k[2] * k[3], k[1], str(k[4])))
for k in keys:
    vs = {v: statistics.median(t[k + (v,)]) for v in ('64', '32', '16', 'portable') if k + (v,) in t}
    new = vs.get('32', vs.get('16'))
    cells = ' '.join('%s %.1f' % (v, x) for v, x in vs.items())
    e = max((err.get(k + (v,), 0) for v in ('32', '16')), default=0)
    print('%-4s b=%-3d s_q=%d h_q=%d s_k=%-6s | %s | narrow/wide %.3fx%s | err %.1e' % (k[0], k[1], k[2], k[3], k[4], cells,
          vs['64'] / new if '64' in vs and new else 0, (' narrow/portable %.3fx' % (vs['portable'] / new)) if 'portable' in vs and new else '', e))
PY
cd $OUT && tar cJf ab.tar.xz ab && rm -r ab
