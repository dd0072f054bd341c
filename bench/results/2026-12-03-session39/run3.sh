#!/bin/bash
# Session 39 run 3: the whole GPU check at 3c8931a from source on the H200 (the last one with the Python tests on a GPU
# was 2026-11-29): configure and build with the Python module (the device's nanobind), the GPU suite with each backend
# forced (sm90, portable), pytest on python/tests with PyTorch, the speculative-decoding example. Kernels unchanged
# since session 38's sanitizer runs, so no sanitizers here (time). GoogleTest from the carried Debian source tree.
set -u
COMMIT=3c8931a PYTHON=1 BACKENDS="sm90 portable" SANITIZE=0 TEST_TIMEOUT=240 timeout 570 \
  bash scripts/gpu_check.sh none $OUT/check > $OUT/check_stdout.txt 2>&1
echo "rc=$? at ${SECONDS} s"
cat $OUT/check/summary.txt
grep -E "FAILED|Error|error" $OUT/check/pytest.log 2>/dev/null | head -20
cd $OUT && tar cJf check_logs.tar.xz check check_stdout.txt && rm -r check check_stdout.txt
