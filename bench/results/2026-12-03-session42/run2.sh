#!/bin/bash
# Run 2 (session 42): split-KV part counts at small batches, main's binary (lead = 1b0ef20), to set a rule for an
# optional length bound at planning (DecodeShape). Session 21 (run 7 of 2026-12-02-h200-narrow-producer.md) found the
# narrow FP8 kernel 1.13-1.19x faster at b=1, 16K-32K with 132 parts instead of its automatic 264, and slower at 128K
# and from b=4 at 32K. Here: where between those the better count changes, in pages per SM, for e4m3 and ds_mla; and
# whether the one-CTA-per-SM kernels (bf16: narrow 16-bit at b <= 2, the seesaw at h_q=128) gain from fewer parts
# when the batch holds few pages. Same binary under several names, each with its --num-parts (AB_ARGS_<name>).
set -u
P=/tmp/pre; mkdir -p $P/lead
xz -dc .carry/s42/bench_lead.xz > $P/lead/openmla-bench; chmod +x $P/lead/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
export AB_ARGS_p132="--num-parts 132" AB_ARGS_p66="--num-parts 66" AB_ARGS_p33="--num-parts 33"
BINS="auto=$P/lead p132=$P/lead p66=$P/lead" OUT=$OUT/e ROUNDS=2 \
  SHAPES="1,1,16,4096 1,1,16,16384 1,1,16,32768 1,1,16,65536 1,1,16,131072 2,1,16,8192 2,1,16,16384 2,1,16,32768 4,1,16,8192 4,1,16,16384 8,1,16,4096 8,1,16,8192 16,1,16,2048 16,1,16,4096 1,2,16,32768 4,2,16,8192" \
  bash scripts/ab_env.sh --backend auto --format fp8_e4m3 > $OUT/table_e4m3.md 2>&1
BINS="auto=$P/lead p132=$P/lead p66=$P/lead" OUT=$OUT/d ROUNDS=2 \
  SHAPES="1,1,16,16384 1,1,16,32768 1,1,16,65536 2,1,16,16384 4,1,16,8192 8,1,16,8192" \
  bash scripts/ab_env.sh --backend auto --format fp8_ds_mla > $OUT/table_dsmla.md 2>&1
BINS="auto=$P/lead p66=$P/lead p33=$P/lead" OUT=$OUT/b ROUNDS=2 \
  SHAPES="1,1,16,1024 1,1,16,4096 1,1,16,8192 2,1,16,4096 1,1,128,1024 1,1,128,4096 1,2,128,1024 2,1,128,2048" \
  bash scripts/ab_env.sh --backend auto > $OUT/table_bf16.md 2>&1
cd $OUT && tar cJf logs.tar.xz e d b && rm -r e d b
tail -n 18 table_e4m3.md; tail -n 8 table_dsmla.md; tail -n 10 table_bf16.md; cat summary.txt
