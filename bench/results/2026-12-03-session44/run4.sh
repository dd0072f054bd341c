#!/bin/bash
# Run 4 (session 44): is the seesaw's refill a latency or a bandwidth cost? Timing-only builds of main (1335dc6) +
# experiment_detached_copies_timing.diff: after a CTA's first two tiles every box completes at once, on stale data.
# dt1 = nothing copied (session 36's "resident" build: no latency, no L2 traffic, no shared-memory writes);
# dt2 = every copy still issued (same bytes from L2 / DRAM, same TMA writes into the stage), on a shadow barrier that
# only the next copy into that half waits for. dt2 ≈ dt1: the refill's latency is what costs; dt2 ≈ main: its traffic.
# One process per variant and shape, two rounds; the timing-only builds' results are wrong (--check-samples 0).
set -u
P=/tmp/pre; mkdir -p $P/main $P/dt1 $P/dt2
for v in main dt1 dt2; do xz -dc .carry/s44/bench_$v.xz > $P/$v/openmla-bench; done
chmod +x $P/*/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
export AB_ARGS_dt1="--check-samples 0" AB_ARGS_dt2="--check-samples 0"
BINS="main=$P/main dt1=$P/dt1 dt2=$P/dt2" OUT=$OUT/s ROUNDS=2 \
  SHAPES="128,1,128,16384 128,2,128,16384 64,2,64,4096 16,4,128,32768 128,1,128,1024 128,3,32,16384" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table.md 2>&1
echo "a/b done at ${SECONDS}s" >> $OUT/summary.txt
cd $OUT && tar cJf logs.tar.xz s; rm -rf s
tail -n 8 table.md; cat summary.txt
