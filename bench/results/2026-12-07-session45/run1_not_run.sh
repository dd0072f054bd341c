#!/bin/bash
# NOT RUN: no H200 came in session 45 (twenty calls, 14:00-15:38 UTC). Binaries: .carry/s45/ (gitignored; remade
# from 0798cde, dt1 with session 44's diff named in 2.). Carry .carry/s45 and run from the repository root.
# Run 1 (session 45): the record at HEAD (0798cde; the kernels as at 70ea509, session 44, SASS unchanged since ff2c4da)
# and what the seesaw's floors would need.
# 1. The deepseek grid (one process, FlashMLA's anchors carried).
# 2. main = 0798cde against dt1 = 0798cde with session 44's experiment_detached_copies_timing.diff at
#    OPENMLA_EXP_DETACH=1 (timing only: after a CTA's first two tiles no KV page is copied and every box completes at
#    once, on stale data: no copy latency and no copy traffic). The floor shapes the seesaw runs, and b=1, h_q=128,
#    32K; one process each, two rounds, the second in reverse order (round 1 of main checked against the CPU reference).
# 3. The sm90 suite and compute-sanitizer memcheck / racecheck / synccheck on gpu_check.sh's subsets (last: device
#    time was short).
set -u
SECONDS=0
P=/tmp/pre; mkdir -p $P/main/tests $P/dt1
xz -dc .carry/s45/bench.xz > $P/main/openmla-bench; xz -dc .carry/s45/bench_dt1.xz > $P/dt1/openmla-bench
xz -dc .carry/s45/gpu_tests.xz > $P/main/tests/openmla_gpu_tests
chmod +x $P/*/openmla-bench $P/main/tests/openmla_gpu_tests
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $S
# The grid compares with FlashMLA's H200 anchors and the H200 floors: on another GPU only the checks run.
if grep -q H200 $S; then
  OPENMLA_COMMIT=0798cde timeout 90 $P/main/openmla-bench --grid deepseek --anchors .carry/s45/h200-anchors.csv \
    --json $OUT/deepseek.json > /tmp/deepseek.txt 2>&1
  echo "deepseek grid: rc=$? at ${SECONDS}s" >> $S
  python3 scripts/grid_summary.py $OUT/deepseek.json > $OUT/grid_summary.txt 2>&1
  [ "${GRID_ONLY:-0}" = 1 ] && { cat $OUT/grid_summary.txt $S; exit 0; }  # a short device budget: the grid alone
  export AB_ARGS_dt1="--check-samples 0"
  BINS="main=$P/main dt1=$P/dt1" OUT=/tmp/s ROUNDS=2 \
    SHAPES="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,4096,varlen 1,1,128,32768" \
    timeout 280 bash scripts/ab_env.sh --backend sm90 > $OUT/table.md 2>&1
  echo "a/b: rc=$? at ${SECONDS}s" >> $S
fi
COMMIT=0798cde PREBUILT=$P/main BACKENDS=sm90 TEST_TIMEOUT=200 bash scripts/gpu_check.sh none /tmp/checks > /dev/null 2>&1
cat /tmp/checks/summary.txt >> $S
(cd /tmp && tar cJf $OUT/logs.tar.xz $(ls -d checks deepseek.txt s 2>/dev/null))
cd $OUT
cat grid_summary.txt 2>/dev/null; tail -n 10 table.md 2>/dev/null; cat summary.txt
