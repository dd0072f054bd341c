#!/usr/bin/env bash
# One batch on a GPU machine: build, GPU tests, compute-sanitizer on a subset, benchmark.
# Usage: bash scripts/gpu_check.sh [bench grid: quick|deepseek|none] [out dir]
# Knobs (env): PREBUILT=dir (carried binaries instead of a build), BACKENDS, TEST_FILTER, FP8_BACKENDS, PYTHON,
# SANITIZE, SANITIZE_BACKEND, SANITIZE_FILTER, FP8_MATH, SANITIZE_TIMEOUT, TEST_TIMEOUT, BENCH_TIMEOUT, BENCH_FILTER, BENCH_ARGS.
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

commit="${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
# Recorded by openmla-bench in its JSON; without it the binary reports the commit it was built from.
[ "$commit" != unknown ] && export OPENMLA_COMMIT="$commit"
note "== $(date -u +%FT%TZ) commit $commit"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$summary"

bin="${PREBUILT:-build-gpu}"
if [ -n "${PREBUILT:-}" ]; then
  # Binaries built on the CPU machine for sm_90a and carried (no Python module then).
  note "prebuilt binaries from $bin"
  PYTHON=0
else
  gtest_args=()
  if [ -d .carry/googletest ]; then gtest_args=(-DOPENMLA_GTEST_SOURCE_DIR="$root/.carry/googletest"); fi
  py_args=()
  if [ "${PYTHON:-1}" = 1 ] && python3 -c "import nanobind" 2>/dev/null && [ -f python/CMakeLists.txt ]; then py_args=(-DOPENMLA_BUILD_PYTHON=ON); fi
  # sm_90a machine code only: this script runs on Hopper; the sm_80 build is checked by CI.
  cmake -G Ninja -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DOPENMLA_PORTABLE_ARCHS="${ARCHS:-90a}" \
    "${gtest_args[@]}" "${py_args[@]}" >"$out/configure.log" 2>&1 || { note "configure FAILED"; tail -30 "$out/configure.log"; exit 1; }
  # -k 0: a broken tool or CPU test must not hide the GPU results; the two binaries below must exist.
  ninja -C build-gpu -k 0 -j"$(nproc)" >"$out/build.log" 2>&1 || note "build had failures: $(grep -E '^FAILED' "$out/build.log" | head -5 | tr '\n' ' ')"
  if [ ! -x build-gpu/tests/openmla_gpu_tests ] || [ ! -x "$bin"/openmla-bench ]; then
    note "build FAILED"; grep -E "error|FAILED" "$out/build.log" | head -40; exit 1
  fi
  grep -E "spill|Local memory|registers" "$out/build.log" | sort -u >"$out/ptxas.log" || true
  note "build ok ($(grep -c 'spill stores' "$out/ptxas.log" || true) spill warnings)"
  if command -v cuobjdump >/dev/null; then
    cuobjdump -sass build-gpu/libopenmla.a >"$out/sass.txt" 2>/dev/null
    note "SASS of libopenmla.a: $(grep -c 'HMMA' "$out/sass.txt") HMMA, $(grep -c 'HGMMA' "$out/sass.txt") HGMMA, $(grep -cE '\b(LDL|STL)\b' "$out/sass.txt") LDL/STL (local memory) instructions"
  fi
fi

tests="$bin/tests/openmla_gpu_tests"
# The suite once per backend: sm90 forced, then portable forced (every test; the portable-tile
# tests only under portable).
for backend in ${BACKENDS:-sm90 portable}; do
  filter="${TEST_FILTER:-*}"
  [ "$backend" = sm90 ] && filter="$filter-*Portable*"
  # A time limit per suite: a hung kernel must not cost the rest of the batch. The full log names
  # the test that was running.
  OPENMLA_BACKEND=$backend timeout "${TEST_TIMEOUT:-300}" "$tests" --gtest_filter="$filter" >"$out/gpu_tests_$backend.log" 2>&1
  rc=$?
  grep -E '^\[  FAILED  \]' "$out/gpu_tests_$backend.log" | head -25
  [ $rc = 124 ] && note "gpu tests ($backend): TIMED OUT in $(grep -E '^\[ RUN' "$out/gpu_tests_$backend.log" | tail -1)"
  note "gpu tests ($backend): $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gpu_tests_$backend.log" | tr '\n' ' ')"
done

if [ "${PYTHON:-1}" = 1 ] && [ -n "${py_args[*]}" ] && [ -d python/tests ]; then
  export PYTHONPATH="$root/build-gpu/python:$root/python${PYTHONPATH:+:$PYTHONPATH}"
  python3 -m pytest -q python/tests 2>&1 | tee "$out/pytest.log" | tail -15
  note "pytest: $(tail -1 "$out/pytest.log")"
fi

if [ "${PYTHON:-1}" = 1 ] && [ -n "${py_args[*]}" ] && [ -f examples/speculative_decoding.py ]; then
  python3 examples/speculative_decoding.py --steps 1000 2>&1 | tee "$out/example.log" | tail -5
  note "example: $(tail -1 "$out/example.log")"
fi

if [ "$grid" != none ]; then
  timeout "${BENCH_TIMEOUT:-300}" "$bin"/openmla-bench --grid "$grid" ${BENCH_FILTER:+--filter "$BENCH_FILTER"} ${BENCH_ARGS:-} --json "$out/bench_$grid.json" 2>&1 | tee "$out/bench_$grid.txt" | tail -n 200
  # The FP8 issue's shapes, every format, on the default (sm90) and the portable backend.
  for backend in ${FP8_BACKENDS:-auto portable}; do
    timeout "${BENCH_TIMEOUT:-300}" "$bin"/openmla-bench --grid fp8 --format bf16,fp8_e4m3,fp8_ds_mla --backend "$backend" ${BENCH_ARGS:-} \
      --json "$out/bench_fp8_$backend.json" 2>&1 | tee "$out/bench_fp8_$backend.txt" | tail -n 20
  done
  # FP8 math (opt-in, sm90) on the per-tensor e4m3 cache, same shapes.
  if [ "${FP8_MATH:-1}" = 1 ]; then
    timeout "${BENCH_TIMEOUT:-300}" "$bin"/openmla-bench --grid fp8 --format fp8_e4m3 --fp8-math qk_and_pv ${BENCH_ARGS:-} \
      --json "$out/bench_fp8_math.json" 2>&1 | tee "$out/bench_fp8_math.txt" | tail -n 20
  fi
fi
# Sanitizers last: they are slow, and a time limit must not cost the benchmark.
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  common='Decode.DeviceGuardsPoisonOnlyBadRequests:Decode.ScheduleIndependentOfPartCount:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq16_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq4_hq128_causal_bf16'
  if [ "${SANITIZE_BACKEND:-sm90}" = sm90 ]; then
    subset="$common:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq128_causal_fp16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq1_hq16_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq2_hq8_causal_bf16:AllSupported/DecodeShapes.EdgeLengthsMatchReference/sq16_hq16_causal_fp16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq4_hq16_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq128_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq2_hq128_fp16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq2_hq16_fp16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq16_fp16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq2_hq8_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq2_hq8_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq1_hq16_bf16:Decode.Sm90ScheduleForced:Decode.Fp8MathIndependentOfPartCount:Decode.Fp8MathLargeBatchSplitAndGuards:Decode.Fp8MathQueryScalesAndPeakyRows"
  else
    subset="$common:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq4_hq16_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq128_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq1_hq16_fp16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/e4m3_sq2_hq8_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq1_hq16_bf16:Fp8Formats/DecodeFp8.EdgeLengthsMatchReference/dsmla_sq2_hq128_fp16:WriteKV.PaddedPagesAlignedRows"
  fi
  subset="${SANITIZE_FILTER:-$subset}"
  for tool in memcheck racecheck synccheck; do
    # Every report printed (the default limit is 100), so that racecheck_known.py below sees them all.
    OPENMLA_BACKEND=${SANITIZE_BACKEND:-sm90} timeout "${SANITIZE_TIMEOUT:-90}" compute-sanitizer --tool "$tool" --print-limit 100000 --error-exitcode 9 "$tests" --gtest_filter="$subset" --gtest_brief=1 >"$out/sanitizer_$tool.log" 2>&1
    note "compute-sanitizer $tool (${SANITIZE_BACKEND:-sm90}): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1)"
  done
  # A filter may take in the FP8 32-row narrow kernel, whose known racecheck artifact racecheck_known.py tells apart.
  if grep -q "Race reported between" "$out/sanitizer_racecheck.log"; then
    note "$(python3 scripts/racecheck_known.py "$out/sanitizer_racecheck.log" . | tail -1)"
  fi
  # The 32-row narrow kernel on its own: racecheck reports a known tool artifact in its merge
  # (docs/hopper-kernel.md), which racecheck_known.py tells apart from anything else.
  if [ "${SANITIZE_BACKEND:-sm90}" = sm90 ] && [ -z "${SANITIZE_FILTER:-}" ]; then
    narrow32='Decode.Sm90Narrow32RowsForced:Decode.Fp8LargeBatchSplitAndGuards'
    for tool in memcheck racecheck synccheck; do
      # Every report printed (the default limit is 100), so that racecheck_known.py sees them all.
      OPENMLA_BACKEND=sm90 timeout "${SANITIZE_TIMEOUT:-90}" compute-sanitizer --tool "$tool" --print-limit 100000 --error-exitcode 9 "$tests" --gtest_filter="$narrow32" --gtest_brief=1 >"$out/sanitizer_${tool}_narrow32.log" 2>&1
      note "compute-sanitizer $tool (sm90, 32-row narrow): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_${tool}_narrow32.log" | tail -1)"
    done
    note "$(python3 scripts/racecheck_known.py "$out/sanitizer_racecheck_narrow32.log" . | tail -1)"
  fi
fi

echo; cat "$summary"
