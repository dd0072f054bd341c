#!/bin/bash
# Session 28 run 6: the commit to land (desc_advance, b939aa6, + the FP8-math tidy-up of the next commit): sm90 suite,
# sanitizers on a subset, and a three-round A/B against 6abbaed (base) over bf16, FP8 and FP8-math rows.
set -u
for v in base desc; do mkdir -p /tmp/ab/$v; xz -dc .carry/s28/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
xz -dc .carry/s28/gpu_tests_desc.xz > /tmp/T; chmod +x /tmp/T
OPENMLA_BACKEND=sm90 timeout 150 /tmp/T --gtest_filter='*-*Portable*' > $OUT/tests_sm90.log 2>&1
echo "tests sm90 rc $?: $(grep -E '^\[  (FAILED|PASSED)  \]' $OUT/tests_sm90.log | tr '\n' ' ')"
SUB='Decode.ManyHeadsMtpEightCausal:Decode.Fp8LargeBatchSplitAndGuards:Decode.Fp8MathLargeBatchSplitAndGuards:Decode.SingleRequestSplitOverManyParts'
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=sm90 timeout 100 compute-sanitizer --tool $tool /tmp/T --gtest_filter="$SUB" > $OUT/san_$tool.log 2>&1
  echo "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)' $OUT/san_$tool.log | tr '\n' ' ')"
done
python3 scripts/racecheck_known.py $OUT/san_racecheck.log . | tail -1
B="base=/tmp/ab/base desc=/tmp/ab/desc"
OUT=$OUT/ab1 BINS="$B" ROUNDS=3 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format bf16 \
  --shape 128,2,128,1024 --shape 128,4,128,1024 --shape 128,1,128,4096 --shape 64,2,64,4096 --shape 128,1,128,16384 \
  --shape 128,2,128,16384 --shape 16,4,128,32768 --shape 1,1,128,32768 --shape 128,1,128,4096,varlen --check-samples 0 > $OUT/ab1.txt 2>&1
OUT=$OUT/ab2 BINS="$B" ROUNDS=3 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3,fp8_ds_mla \
  --shape 128,2,128,8192 --shape 128,2,128,16384 --shape 128,1,64,16384 --check-samples 0 > $OUT/ab2.txt 2>&1
OUT=$OUT/ab3 BINS="$B" ROUNDS=3 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv \
  --shape 128,2,128,8192 --check-samples 1 > $OUT/ab3.txt 2>&1
(cd $OUT && tar cf ab_json.tar ab1/*.json ab2/*.json ab3/*.json && rm -rf ab1 ab2 ab3)
cat $OUT/ab1.txt $OUT/ab2.txt $OUT/ab3.txt
