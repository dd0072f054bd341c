#!/bin/bash
# Session 31 run 1 (3f590d8): the GPU suite under sm90, the automatic and the portable backend, with session 30's
# three extended tests that had not yet run on a GPU (the 16-bit narrow kernel's split / guard / graph-replay tests),
# and memcheck / racecheck / synccheck on gpu_check.sh's subset and on those tests.
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s31/bench_head.xz > $P/openmla-bench; xz -dc .carry/s31/gpu_tests_head.xz > $P/tests/openmla_gpu_tests
chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests
mkdir -p $OUT/check $OUT/new
PREBUILT=$P BACKENDS="sm90 auto portable" SANITIZE=1 COMMIT=3f590d8 bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -12 $OUT/check.txt
F='Decode.Narrow16BitLargeBatchSplitAndGuards:Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.GraphReplayWithChangingLengthsEqualsEager:Decode.Sm90Narrow16BitForced'
for be in sm90 auto; do
  echo "new tests under $be: $(grep -E "^\[       OK \] ($(echo $F | sed 's/:/|/g'))" $OUT/check/gpu_tests_$be.log | sed 's/ (.*//' | tr '\n' ' ')"
done
PREBUILT=$P BACKENDS=" " SANITIZE=1 SANITIZE_TIMEOUT=150 SANITIZE_FILTER="$F" COMMIT=3f590d8 bash scripts/gpu_check.sh none $OUT/new > $OUT/new.txt 2>&1
tail -3 $OUT/new.txt
cd $OUT && tar cJf check.tar.xz check new && rm -r check new
