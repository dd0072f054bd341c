#!/bin/bash
# Run 8 (session 41): the README's snapshot at 7183952 (fix): the deepseek grid twice and the FP8 issue's grid once,
# with 3c8931a's (s39) deepseek grid between them in the same machine start, each in its own process after a pause.
set -u
P=/tmp/pre; mkdir -p $P/s39 $P/fix
xz -dc .carry/s41/bench_s39.xz > $P/s39/openmla-bench; xz -dc .carry/s41/bench_fix.xz > $P/fix/openmla-bench
chmod +x $P/*/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/gpu.txt
for run in fix_1 s39_1 fix_2; do
  sleep 20; v=${run%_*}; c=7183952; [ $v = s39 ] && c=3c8931a
  OPENMLA_COMMIT=$c timeout 60 $P/$v/openmla-bench --grid deepseek --anchors .carry/s37/h200-anchors.csv \
    --json $OUT/deepseek_$run.json > $OUT/deepseek_$run.txt 2>&1
  echo "$run rc=$?" >> $OUT/gpu.txt
  python3 scripts/grid_summary.py $OUT/deepseek_$run.json > $OUT/summary_$run.txt 2>&1
done
OPENMLA_COMMIT=7183952 timeout 60 $P/fix/openmla-bench --grid fp8 --format bf16,fp8_e4m3,fp8_ds_mla --backend auto \
  --json $OUT/fp8_auto.json > $OUT/fp8_auto.txt 2>&1
OPENMLA_COMMIT=7183952 timeout 40 $P/fix/openmla-bench --grid fp8 --format fp8_e4m3 --fp8-math qk_and_pv \
  --json $OUT/fp8_math.json > $OUT/fp8_math.txt 2>&1
cat $OUT/gpu.txt; cat $OUT/summary_*.txt; grep -h "^\[" $OUT/fp8_auto.txt $OUT/fp8_math.txt | cut -c1-110
cd $OUT && tar cJf run8_out.tar.xz *.json *.txt && rm *.json deepseek_*.txt fp8_*.txt
