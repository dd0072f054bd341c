#!/bin/bash
# Session 31 run 3: the seesaw from 33 rows (s33) against HEAD (base: seesaw from 128 rows, the alternating
# schedule below), bf16, sm90 automatic schedule, on the 48-96-row shapes the change moves; default timing
# (cold) in two interleaved rounds, then a subset at the power cap (--sustain-ms 200), two rounds. Then f94aa38 (fold:
# the 16-bit narrow loop's single PV wait) against base on TP8 shapes the automatic schedule runs on that kernel, and
# memcheck / racecheck / synccheck on the 16-bit narrow kernel's tests with f94aa38.
set -u
P=/tmp/pre; mkdir -p $P/base $P/s33 $P/fold
xz -dc .carry/s31/bench_head.xz > $P/base/openmla-bench; xz -dc .carry/s31/bench_seesaw33.xz > $P/s33/openmla-bench
xz -dc .carry/s31/bench_fold.xz > $P/fold/openmla-bench; xz -dc .carry/s31/gpu_tests_fold.xz > $P/fold/gpu_tests
chmod +x $P/base/openmla-bench $P/s33/openmla-bench $P/fold/openmla-bench $P/fold/gpu_tests
S=""
for b in 1 16 64 128; do for sk in 1024 4096 16384 32768; do S="$S --shape $b,1,64,$sk --shape $b,4,16,$sk"; done; done
for b in 16 64 128; do for sk in 4096 16384; do S="$S --shape $b,3,16,$sk"; done; done
for b in 16 128; do for sk in 4096 16384; do S="$S --shape $b,3,32,$sk"; done; done
S="$S --shape 128,2,32,4096 --shape 128,1,64,4096,varlen --shape 128,1,64,16384,varlen"
C="--shape 128,1,64,4096 --shape 128,1,64,16384 --shape 128,4,16,4096 --shape 128,4,16,16384 --shape 64,1,64,16384 --shape 128,3,32,16384"
mkdir -p $OUT/ab
for r in 1 2; do
  for v in base s33; do
    $P/$v/openmla-bench --backend sm90 $S --check-samples 0 --json $OUT/ab/cold_${v}_$r.json > /dev/null 2>&1 || echo "cold $v $r failed"
  done
done
echo "cold done $(date +%T)"
for r in 1 2; do
  for v in base s33; do
    $P/$v/openmla-bench --backend sm90 $C --sustain-ms 200 --check-samples 0 --json $OUT/ab/capped_${v}_$r.json > /dev/null 2>&1 || echo "capped $v $r failed"
  done
done
T="--shape 64,1,16,4096 --shape 128,1,16,16384 --shape 128,1,16,1024 --shape 128,2,16,4096 --shape 128,2,16,16384"
for r in 1 2; do
  for v in base fold; do
    $P/$v/openmla-bench --backend sm90 $T --check-samples 0 --json $OUT/ab/tp8_${v}_$r.json > /dev/null 2>&1 || echo "tp8 $v $r failed"
  done
done
F='Decode.Narrow16BitLargeBatchSplitAndGuards:Decode.Sm90Narrow16BitForced:Decode.GraphReplayWithChangingLengthsEqualsEager'
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $P/fold/gpu_tests --gtest_filter="$F" --gtest_brief=1 > $OUT/fold_san_$tool.log 2>&1
  echo "f94aa38 sanitizer $tool (16-bit narrow tests) rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/fold_san_$tool.log | tail -1)"
done
# One checked pass of the new schedule (samples against the CPU reference).
$P/s33/openmla-bench --backend sm90 --shape 128,1,64,4096 --shape 128,3,32,4096 --shape 16,3,16,4096 --json $OUT/ab/checked_s33_1.json.chk | grep -E "^\[" 
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base s33 fold
cd $OUT && tar cJf ab.tar.xz ab *.log && rm -r ab *.log
