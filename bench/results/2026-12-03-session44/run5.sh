#!/bin/bash
# Run 5 (session 44): run 4 again, with a third timing-only build of main (1335dc6) +
# experiment_detached_copies_timing.diff: after a CTA's first two tiles every box completes at once, on stale data.
# dt1 = nothing copied (session 36's "resident" build: no latency, no L2 traffic, no shared-memory writes);
# dt2 = every copy still issued (same bytes from L2 / DRAM, same TMA writes into the stage), on a shadow barrier that
# only the next copy into that half waits for; dt3 = each page only into L2 (one `cp.async.bulk.prefetch.L2` of the
# page by half 0's copy thread: its DRAM and L2 traffic, nothing to the SM). dt3 ≈ main: the cost is on the DRAM / L2
# side; dt3 ≈ dt1: it is the transfer into the SM (L2 to SM, or the TMA writes into shared memory).
# One process per variant and shape, two rounds; the timing-only builds' results are wrong (--check-samples 0).
set -u
P=/tmp/pre; mkdir -p $P/main $P/dt1 $P/dt2 $P/dt3
for v in main dt1 dt2 dt3; do xz -dc .carry/s44/bench_$v.xz > $P/$v/openmla-bench; done
chmod +x $P/*/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/summary.txt
export AB_ARGS_dt1="--check-samples 0" AB_ARGS_dt2="--check-samples 0" AB_ARGS_dt3="--check-samples 0"
BINS="main=$P/main dt1=$P/dt1 dt2=$P/dt2 dt3=$P/dt3" OUT=$OUT/s ROUNDS=2 \
  SHAPES="128,1,128,16384 128,3,32,16384 64,2,64,4096 128,1,128,1024 16,4,128,32768" \
  bash scripts/ab_env.sh --backend sm90 > $OUT/table.md 2>&1
echo "a/b done at ${SECONDS}s" >> $OUT/summary.txt
cd $OUT && tar cJf logs.tar.xz s; rm -rf s
tail -n 8 table.md; cat summary.txt
