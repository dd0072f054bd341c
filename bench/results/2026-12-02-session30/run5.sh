#!/bin/bash
# Session 30 run 5: the 16-bit narrow kernel with its page in three parts (e2dc97d): the new test and its
# sanitizers; then wide (w), narrow with one copy per page (n1, d5b76ca), narrow in three parts (n3) and,
# at 16 rows, the portable kernel (pt); cold (default timing) and at the power cap (--sustain-ms 200), two
# interleaved rounds each.
set -u
P=/tmp/pre; mkdir -p $P/n1 $P/n3/tests
xz -dc .carry/s30/bench_nopromo.xz > $P/n1/openmla-bench; xz -dc .carry/s30/bench_parts.xz > $P/n3/openmla-bench
xz -dc .carry/s30/gpu_tests_parts.xz > $P/n3/tests/openmla_gpu_tests; chmod +x $P/n1/openmla-bench $P/n3/openmla-bench $P/n3/tests/openmla_gpu_tests
T=$P/n3/tests/openmla_gpu_tests
OPENMLA_BACKEND=sm90 timeout 120 $T --gtest_filter='Decode.Sm90Narrow16BitForced' > $OUT/new_test.log 2>&1
echo "new test rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/new_test.log | tr '\n' ' ')"
grep -q "^\[  PASSED  \] 1 test" $OUT/new_test.log || { tail -30 $OUT/new_test.log; exit 1; }
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $T --gtest_filter=Decode.Sm90Narrow16BitForced --gtest_brief=1 > $OUT/san_$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1)"
done
S32="--shape 128,2,16,4096,varlen --shape 128,2,16,16384,varlen"; S16="--shape 128,1,16,16384,varlen"
for bs in 16,1024 16,4096 16,16384 64,1024 64,4096 64,32768 128,1024 128,4096 128,16384 128,32768 256,4096 256,16384; do
  b=${bs%,*}; sk=${bs#*,}; S32="$S32 --shape $b,2,16,$sk"; S16="$S16 --shape $b,1,16,$sk"
done
C32=""; C16=""
for bs in 64,16384 128,4096 128,16384 256,4096; do b=${bs%,*}; sk=${bs#*,}; C32="$C32 --shape $b,2,16,$sk"; C16="$C16 --shape $b,1,16,$sk"; done
mkdir -p $OUT/ab
run() {  # tag variant round shapes...
  local tag=$1 v=$2 r=$3; shift 3
  local cmd
  case $v in
    w) cmd=($P/n3/openmla-bench --backend sm90 --sm90-rows-per-cta 64) ;;
    n1) cmd=($P/n1/openmla-bench --backend sm90 --sm90-rows-per-cta ${tag#?}) ;;
    n3) cmd=($P/n3/openmla-bench --backend sm90 --sm90-rows-per-cta ${tag#?}) ;;
    pt) cmd=($P/n3/openmla-bench --backend portable) ;;
  esac
  "${cmd[@]}" "$@" --check-samples 0 --json $OUT/ab/${tag}_${v}_$r.json > /dev/null 2>&1
}
for r in 1 2; do
  for v in w n1 n3; do run r32 $v $r $S32; done
  for v in w n1 n3 pt; do run r16 $v $r $S16; done
done
for r in 1 2; do
  for v in w n1 n3; do run c32 $v $r $C32 --sustain-ms 200; done
  for v in w n3 pt; do run c16 $v $r $C16 --sustain-ms 200; done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab w n1 n3 pt
cd $OUT && tar cJf ab.tar.xz ab && rm -r ab
