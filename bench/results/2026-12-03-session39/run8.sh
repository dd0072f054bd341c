#!/bin/bash
# Built in session 39, run in session 40 (2026-12-03, first device call). The binaries it names were built from
# 5b7a1fb + experiment_partial_bulk_store_read_wait.diff (in the gitignored .carry/s39/ of this workspace).
# Session 39 run 8: run 7's bulk-copied partial rows, each issuing lane waiting only for its copies' shared-memory reads
# (cp.async.bulk.wait_group.read 0, as CUTLASS's and FlashMLA's TMA-store epilogues end), so the CTA can end while the
# writes drain (psr), against 3c8931a's kernels; then the sm90 suite and memcheck / racecheck on the split test.
set -u
P=/tmp/pre; mkdir -p $P/base $P/psr/tests
xz -dc .carry/s39/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s39/bench_psr.xz > $P/psr/openmla-bench
xz -dc .carry/s39/gpu_tests_psr.xz > $P/psr/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/psr/openmla-bench $P/psr/tests/openmla_gpu_tests
BINS="base=$P/base psr=$P/psr" OUT=$OUT/bf16 ROUNDS=2 SHAPES="1,1,128,32768 16,1,128,4096 1,1,16,4096 128,1,128,4096,varlen" \
  bash scripts/ab_env.sh --backend sm90 | tee $OUT/table_bf16.md
OPENMLA_BACKEND=sm90 timeout 40 $P/psr/tests/openmla_gpu_tests --gtest_brief=1 2>&1 | tail -3
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=sm90 timeout 20 compute-sanitizer --tool $tool $P/psr/tests/openmla_gpu_tests \
    --gtest_filter=Decode.ScheduleIndependentOfPartCount --gtest_brief=1 2>&1 | grep -E "SUMMARY" | tail -1
done
