#!/bin/bash
# NOT RUN (session 41: device time spent). Binaries: the gitignored .carry/s41/ of this workspace (bench_s39.xz =
# 3c8931a, bench_fix.xz = 7183952, bench_n8fp32.xz = 7183952 + experiment_narrow_fp8_fp32_rows.diff built with
# -DOPENMLA_EXP_NARROW_FP8_FP32); carry [".carry/s41"].
# Run 9: did the narrow FP8 kernel (fp16 partial rows since session 40) slow down where few segments are split?
# The e4m3 call at b=128, h_q=16, 16K took 308.7 us at 3c8931a (session 39, run 4) and 322.6 / 331.0 us at
# 7478cc8 / 7183952 (session 41, runs 5 and 8; other machine starts). 3c8931a (s39) against 7183952 (fix) and the
# same with the narrow FP8 kernel's fp32 rows back (n8fp32), e4m3 and ds_mla at h_q = 16, two rounds.
set -u
P=/tmp/pre; mkdir -p $P/s39 $P/fix $P/n8fp32
xz -dc .carry/s41/bench_s39.xz > $P/s39/openmla-bench; xz -dc .carry/s41/bench_fix.xz > $P/fix/openmla-bench
xz -dc .carry/s41/bench_n8fp32.xz > $P/n8fp32/openmla-bench
chmod +x $P/*/openmla-bench
BINS="s39=$P/s39 fix=$P/fix n8fp32=$P/n8fp32" OUT=$OUT/e ROUNDS=2 SHAPES="128,1,16,16384 64,1,16,4096 16,1,16,4096 1,1,16,32768" \
  bash scripts/ab_env.sh --backend auto --format fp8_e4m3 > $OUT/table_e4m3.md 2>&1
BINS="s39=$P/s39 fix=$P/fix n8fp32=$P/n8fp32" OUT=$OUT/d ROUNDS=2 SHAPES="128,1,16,16384" \
  bash scripts/ab_env.sh --backend auto --format fp8_ds_mla > $OUT/table_dsmla.md 2>&1
cd $OUT && tar cJf logs.tar.xz e d && rm -r e d
tail -n 6 table_e4m3.md; tail -n 3 table_dsmla.md
