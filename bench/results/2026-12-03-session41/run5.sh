#!/bin/bash
# Run 5 (session 41): the current numbers at 7478cc8 (sessions 40-41 included): the deepseek grid (automatic backend,
# FlashMLA's anchors), the FP8 issue's grid in every format on the automatic backend, and FP8 math.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s41/bench_new.xz > $P/openmla-bench; chmod +x $P/openmla-bench
B=$P/openmla-bench; export OPENMLA_COMMIT=7478cc8
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/gpu.txt
timeout 220 $B --grid deepseek --anchors .carry/s37/h200-anchors.csv --json $OUT/deepseek.json > $OUT/deepseek.txt 2>&1; echo "deepseek rc=$?" >> $OUT/gpu.txt
python3 scripts/grid_summary.py $OUT/deepseek.json > $OUT/deepseek_summary.txt 2>&1
timeout 150 $B --grid fp8 --format bf16,fp8_e4m3,fp8_ds_mla --backend auto --json $OUT/fp8_auto.json > $OUT/fp8_auto.txt 2>&1
echo "fp8 auto rc=$?" >> $OUT/gpu.txt
timeout 80 $B --grid fp8 --format fp8_e4m3 --fp8-math qk_and_pv --json $OUT/fp8_math.json > $OUT/fp8_math.txt 2>&1
echo "fp8 math rc=$?" >> $OUT/gpu.txt
cat $OUT/gpu.txt $OUT/deepseek_summary.txt; grep -h "^\[" $OUT/fp8_auto.txt $OUT/fp8_math.txt | cut -c1-150
cd $OUT && tar cJf run5_out.tar.xz *.json *.txt && rm *.json fp8_*.txt deepseek.txt
