#!/bin/bash
# Session 39 run 4: the current numbers for the README, at 3c8931a's kernels (HEAD b2dd27a changes no source): the deepseek
# grid (automatic backend, FlashMLA's anchors), the FP8 issue's grid in every format on the automatic and on the portable
# backend, FP8 math, and FlashMLA's decode kernel (session 36's scratch harness) on the FP8 grid's shapes.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s39/bench_base.xz > $P/openmla-bench; xz -dc .carry/s37/fm_fast.xz > $P/fm; chmod +x $P/openmla-bench $P/fm
B=$P/openmla-bench; export OPENMLA_COMMIT=3c8931a
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 200 $B --grid deepseek --anchors .carry/s37/h200-anchors.csv --json $OUT/deepseek.json > $OUT/deepseek.txt 2>&1; echo "deepseek rc=$?"
python3 scripts/grid_summary.py $OUT/deepseek.json > $OUT/deepseek_summary.txt 2>&1
for backend in auto portable; do
  timeout 200 $B --grid fp8 --format bf16,fp8_e4m3,fp8_ds_mla --backend $backend --json $OUT/fp8_$backend.json \
    > $OUT/fp8_$backend.txt 2>&1; echo "fp8 $backend rc=$?"
done
timeout 100 $B --grid fp8 --format fp8_e4m3 --fp8-math qk_and_pv --json $OUT/fp8_math.json > $OUT/fp8_math.txt 2>&1
echo "fp8 math rc=$?"
for s in 128,1,16,16384 128,1,64,16384 128,2,128,8192 128,2,128,16384; do timeout 60 $P/fm --shape $s --replays 10; done \
  > $OUT/fm.txt 2>&1
cat $OUT/deepseek_summary.txt; grep -h "^\[" $OUT/fp8_auto.txt $OUT/fp8_portable.txt $OUT/fp8_math.txt | cut -c1-150
grep -h median_us $OUT/fm.txt
cd $OUT && tar cJf run4_out.tar.xz *.json *.txt && rm *.json *.txt
