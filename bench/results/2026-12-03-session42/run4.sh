#!/bin/bash
# Run 4 (session 42): split counts on the missed floors whose time is not the seesaw's per-tile speed (lead =
# 1b0ef20, `--num-parts`; the same binary under several names). 64/1/16/4K: the narrow 16-bit kernel at one CTA per
# SM cuts 64 x 65 units into 132 parts of 32, so most requests span three parts, one of them a single unit; 128 or
# 130 parts cut them into two or three more evenly. 16/1/16/4K: 8 parts per request at 128 (whole pages each), 7 at
# 112, 6 at 96. 1/1/128/32K: 66 parts (2 m-tiles) against 55, 44, 33: fewer partial rows to write and merge, longer parts.
set -u
P=/tmp/pre; mkdir -p $P/lead
xz -dc .carry/s42/bench_lead.xz > $P/lead/openmla-bench; chmod +x $P/lead/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
export AB_ARGS_p130="--num-parts 130" AB_ARGS_p128="--num-parts 128" AB_ARGS_p112="--num-parts 112" AB_ARGS_p96="--num-parts 96" \
  AB_ARGS_p55="--num-parts 55" AB_ARGS_p44="--num-parts 44" AB_ARGS_p33="--num-parts 33"
BINS="auto=$P/lead p130=$P/lead p128=$P/lead" OUT=$OUT/a ROUNDS=3 SHAPES="64,1,16,4096 128,1,16,4096 64,1,16,8192" \
  bash scripts/ab_env.sh --backend auto > $OUT/table_b64.md 2>&1
BINS="auto=$P/lead p128=$P/lead p112=$P/lead p96=$P/lead" OUT=$OUT/b ROUNDS=3 SHAPES="16,1,16,4096 16,1,16,8192 32,1,16,4096" \
  bash scripts/ab_env.sh --backend auto > $OUT/table_b16.md 2>&1
BINS="auto=$P/lead p55=$P/lead p44=$P/lead p33=$P/lead" OUT=$OUT/c ROUNDS=3 SHAPES="1,1,128,32768 1,1,128,16384 2,1,128,32768" \
  bash scripts/ab_env.sh --backend auto > $OUT/table_b1.md 2>&1
cd $OUT && tar cJf logs.tar.xz a b c && rm -r a b c
tail -n 5 table_b64.md; tail -n 5 table_b16.md; tail -n 5 table_b1.md; cat summary.txt
