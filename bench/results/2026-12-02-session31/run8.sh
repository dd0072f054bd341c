#!/bin/bash
# Session 31 run 8: the 16-bit narrow kernel on several query tiles per request (33-128 rows as 2-8 CTAs of 16 or
# 32 rows that share each page through L2; experiment_narrow16bit_query_tiles.diff lets sm90_rows_per_cta 16 / 32
# take any row count): its forced test with the new 48-128-row cases, then auto (the wide kernel: alternating to 64
# rows, seesaw from 65) against the narrow kernel in 32-row (n32) and 16-row (n16) CTAs, cold in two interleaved
# rounds and a subset at the power cap.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s31/bench_narrowmt.xz > $P/openmla-bench; xz -dc .carry/s31/gpu_tests_narrowmt.xz > $P/gpu_tests
chmod +x $P/openmla-bench $P/gpu_tests
OPENMLA_BACKEND=sm90 timeout 150 $P/gpu_tests --gtest_filter='Decode.Sm90Narrow16BitForced' > $OUT/test.log 2>&1
echo "forced test rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/test.log | tr '\n' ' ')"; grep -E "Failure|rel|FAILED" $OUT/test.log | head -8
S=""
for b in 16 64 128; do for sk in 4096 16384; do S="$S --shape $b,3,16,$sk --shape $b,1,64,$sk --shape $b,4,16,$sk --shape $b,3,32,$sk"; done; done
S="$S --shape 128,1,64,4096,varlen --shape 128,1,64,16384,varlen --shape 128,1,128,16384"
C="--shape 128,1,64,16384 --shape 128,4,16,4096 --shape 128,3,16,16384 --shape 64,3,32,16384"
mkdir -p $OUT/ab
run() { local tag=$1 v=$2 r=$3; shift 3; local o=""; case $v in n32) o="--sm90-rows-per-cta 32";; n16) o="--sm90-rows-per-cta 16";; esac
  $P/openmla-bench --backend sm90 $o "$@" --check-samples 0 --json $OUT/ab/${tag}_${v}_$r.json > /dev/null 2>&1 || echo "$tag $v $r failed"; }
for r in 1 2; do for v in auto n32 n16; do run cold $v $r $S; done; done
echo "cold done"
for r in 1 2; do for v in auto n32; do run capped $v $r $C --sustain-ms 200; done; done
$P/openmla-bench --backend sm90 --sm90-rows-per-cta 32 --shape 128,1,64,4096 --shape 128,3,16,4096 --json $OUT/ab/checked_n32_1.json.chk | grep -E "^\[" 
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab auto n32 n16
cd $OUT && tar cJf ab.tar.xz ab test.log && rm -r ab test.log
