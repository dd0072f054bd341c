#!/usr/bin/env bash
# One batch on a GPU machine: build, GPU tests, compute-sanitizer on a subset, benchmark.
# Usage: bash scripts/gpu_check.sh [bench grid: quick|deepseek|none] [out dir]
# Logs and JSON go to $OUT (device tool) or ./gpu-check-out. A short summary prints last.
set -uo pipefail
grid="${1:-quick}"
out="${2:-${OUT:-gpu-check-out}}"
mkdir -p "$out"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

note "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$summary"

gtest_args=()
if [ -d .carry/googletest ]; then gtest_args=(-DOPENMLA_GTEST_SOURCE_DIR="$root/.carry/googletest"); fi
py_args=()
if [ "${PYTHON:-1}" = 1 ] && python3 -c "import nanobind" 2>/dev/null && [ -f python/CMakeLists.txt ]; then py_args=(-DOPENMLA_BUILD_PYTHON=ON); fi
cmake -G Ninja -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DOPENMLA_PORTABLE_ARCHS="80;90a" \
  "${gtest_args[@]}" "${py_args[@]}" >"$out/configure.log" 2>&1 || { note "configure FAILED"; tail -30 "$out/configure.log"; exit 1; }
if ! ninja -C build-gpu -j"$(nproc)" >"$out/build.log" 2>&1; then
  note "build FAILED"; grep -E "error|FAILED" "$out/build.log" | head -40; exit 1
fi
grep -E "spill|Local memory|registers" "$out/build.log" | sort -u >"$out/ptxas.log" || true
note "build ok ($(grep -c 'spill stores' "$out/ptxas.log" || true) spill lines)"

tests="build-gpu/tests/openmla_gpu_tests"
"$tests" --gtest_brief=1 2>&1 | tee "$out/gpu_tests.log" | tail -25
note "gpu tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gpu_tests.log" | tr '\n' ' ')"

if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  subset='Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.FlashMlaLseLayoutAndPaddedPages:Decode.ScheduleIndependentOfPartCount:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq16_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16:WriteKV.*:AllFormats/WriteKVSweep.*'
  for tool in memcheck racecheck synccheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$tests" --gtest_filter="$subset" --gtest_brief=1 >"$out/sanitizer_$tool.log" 2>&1
    note "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1)"
  done
fi

if [ -n "${py_args[*]}" ] && [ -d python/tests ]; then
  export PYTHONPATH="$root/build-gpu/python:$root/python${PYTHONPATH:+:$PYTHONPATH}"
  python3 -m pytest -q python/tests 2>&1 | tee "$out/pytest.log" | tail -15
  note "pytest: $(tail -1 "$out/pytest.log")"
fi

if [ "$grid" != none ]; then
  build-gpu/openmla-bench --grid "$grid" --json "$out/bench_$grid.json" 2>&1 | tee "$out/bench_$grid.txt" | tail -n 200
fi
echo; cat "$summary"
