#!/usr/bin/env bash
# The maintainers' check on a Hopper GPU machine, in one call: build (sm_90a), the GPU suite once per
# backend, the Python tests, compute-sanitizer (memcheck, racecheck, synccheck) on a subset of the
# suite, and a benchmark grid. Works without network: it installs nothing.
# Usage: bash scripts/gpu_check.sh [bench grid: quick|deepseek|none] [out dir]
# Logs and JSON go to the out dir (default $OUT, else ./gpu-check-out); a summary prints last.
# Env knobs:
#   PREBUILT=dir          binaries built elsewhere (dir/openmla-bench, dir/tests/openmla_gpu_tests); no build,
#                         no Python
#   ARCHS                 OPENMLA_PORTABLE_ARCHS of the build (default 90a)
#   GTEST_SOURCE_DIR      a GoogleTest source tree, for machines without libgtest-dev (default .carry/googletest
#                         when present)
#   OPENMLA_PYTHON        the interpreter for the extension and pytest (default .venv/bin/python when present,
#                         else python3 on PATH, the system's); 0 skips the Python extension and tests
#   BACKENDS              backends the GPU suite runs under (default "sm90 portable"); TEST_FILTER narrows it
#   SANITIZE=0            skips compute-sanitizer; SANITIZE_BACKENDS (default "sm90 portable"), SANITIZE_FILTER
#   FLASHMLA_DIR          a FlashMLA checkout (bench/peers/get_flashmla.sh): the grid times FlashMLA in the same process
#   BENCH_FILTER, BENCH_ARGS  more openmla-bench arguments; FP8_BACKENDS (default "auto portable") for the FP8 grid
#   TEST_TIMEOUT, SANITIZE_TIMEOUT, BENCH_TIMEOUT  seconds per step (a hung kernel must not cost the rest)
set -uo pipefail
grid="${1:-quick}"
out="${2:-${OUT:-gpu-check-out}}"
mkdir -p "$out"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

commit="${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
# openmla-bench records it in its JSON; without it the binary reports the commit it was built from.
[ "$commit" != unknown ] && export OPENMLA_COMMIT="$commit"
note "== $(date -u +%FT%TZ) commit $commit"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$summary"

# ---- Python: the venv when there is one, else the system's python3 ------------------------------------
python="${OPENMLA_PYTHON:-}"
if [ -z "$python" ]; then
  if [ -x .venv/bin/python ]; then python="$root/.venv/bin/python"; else python="$(command -v python3 || echo 0)"; fi
fi
[ -n "${PREBUILT:-}" ] && python=0
has_python_module() { [ "$python" != 0 ] && "$python" -c "import $1" >/dev/null 2>&1; }

# ---- build ----------------------------------------------------------------------------------------
bin="${PREBUILT:-build-gpu}"
if [ -n "${PREBUILT:-}" ]; then
  note "prebuilt binaries from $bin"
else
  cmake_args=(-G Ninja -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DOPENMLA_PORTABLE_ARCHS="${ARCHS:-90a}")
  gtest_dir="${GTEST_SOURCE_DIR:-}"
  [ -z "$gtest_dir" ] && [ -d .carry/googletest ] && gtest_dir="$root/.carry/googletest"
  [ -n "$gtest_dir" ] && cmake_args+=(-DOPENMLA_GTEST_SOURCE_DIR="$gtest_dir")
  [ -n "${FLASHMLA_DIR:-}" ] && cmake_args+=(-DOPENMLA_BENCH_FLASHMLA_DIR="$FLASHMLA_DIR")
  if [ -f python/CMakeLists.txt ] && has_python_module nanobind; then
    cmake_args+=(-DOPENMLA_BUILD_PYTHON=ON -DPython_EXECUTABLE="$python")
  else
    if [ "$python" = 0 ]; then note "Python extension not built (no Python: OPENMLA_PYTHON=0 or no python3)"
    else note "Python extension not built (no nanobind for $python)"; fi
    cmake_args+=(-DOPENMLA_BUILD_PYTHON=OFF)
    python=0
  fi
  cmake "${cmake_args[@]}" >"$out/configure.log" 2>&1 || { note "configure FAILED"; tail -30 "$out/configure.log"; exit 1; }
  # -k 0: a broken tool or CPU test must not hide the GPU results; the two binaries below must exist.
  ninja -C build-gpu -k 0 -j"$(nproc)" >"$out/build.log" 2>&1 ||
    note "build had failures: $(grep -E '^FAILED' "$out/build.log" | head -5 | tr '\n' ' ')"
  if [ ! -x build-gpu/tests/openmla_gpu_tests ] || [ ! -x build-gpu/openmla-bench ]; then
    note "build FAILED"; grep -E "error|FAILED" "$out/build.log" | head -40; exit 1
  fi
  grep -E "spill|Local memory|registers" "$out/build.log" | sort -u >"$out/ptxas.log" || true
  note "build ok ($(grep -c 'spill stores' "$out/ptxas.log" || true) ptxas spill lines, in ptxas.log)"
fi

# ---- GPU suite, once per backend --------------------------------------------------------------------
tests="$bin/tests/openmla_gpu_tests"
for backend in ${BACKENDS:-sm90 portable}; do
  filter="${TEST_FILTER:-*}"
  # The portable-tile tests force the portable kernel: they run under the portable backend.
  # The speculative shapes and move_kv do not depend on the backend override: they run once, under portable.
  [ "$backend" = sm90 ] && filter="$filter-*Portable*:SpecDecode.*:MoveKV.*:SparseDecode.*"
  log="$out/gpu_tests_$backend.log"
  OPENMLA_BACKEND=$backend timeout "${TEST_TIMEOUT:-300}" "$tests" --gtest_filter="$filter" >"$log" 2>&1
  rc=$?
  grep -E '^\[  FAILED  \]' "$log" | head -25
  [ $rc = 124 ] && note "gpu tests ($backend): TIMED OUT in $(grep -E '^\[ RUN' "$log" | tail -1)"
  note "gpu tests ($backend): rc=$rc $(grep -E '^\[  (PASSED|FAILED)  \]' "$log" | tr '\n' ' ')"
done

# ---- Python tests and example -----------------------------------------------------------------------
if [ "$python" = 0 ]; then
  note "pytest: skipped (no Python extension)"
elif ! has_python_module pytest || ! has_python_module numpy; then
  note "pytest: skipped (pytest or numpy missing for $python)"
else
  PYTHONPATH="$root/python" "$python" -m pytest -q python/tests >"$out/pytest.log" 2>&1
  tail -15 "$out/pytest.log"
  note "pytest: $(tail -1 "$out/pytest.log")"
  if [ -f examples/speculative_decoding.py ]; then
    PYTHONPATH="$root/python" "$python" examples/speculative_decoding.py --steps 1000 >"$out/example.log" 2>&1
    note "example speculative_decoding.py: rc=$? $(tail -1 "$out/example.log")"
  fi
  if [ -f examples/eagle_tree_decoding.py ]; then
    PYTHONPATH="$root/python" "$python" examples/eagle_tree_decoding.py --steps 300 >"$out/example_eagle.log" 2>&1
    note "example eagle_tree_decoding.py: rc=$? $(grep 'plain decoding' "$out/example_eagle.log" | head -1)"
  fi
fi

# ---- benchmark ----------------------------------------------------------------------------------------
bench() {  # NAME ARGS...: one openmla-bench run, JSON and text under NAME
  local name="$1"; shift
  # shellcheck disable=SC2086  # BENCH_ARGS: several arguments
  timeout "${BENCH_TIMEOUT:-300}" "$bin"/openmla-bench "$@" ${BENCH_ARGS:-} --json "$out/$name.json" >"$out/$name.txt" 2>&1
  local rc=$?
  tail -n 40 "$out/$name.txt"
  note "bench $name: rc=$rc"
}
if [ "$grid" != none ]; then
  bench "bench_$grid" --grid "$grid" ${BENCH_FILTER:+--filter "$BENCH_FILTER"} ${FLASHMLA_DIR:+--peer flashmla}
  # Every cache format on the FP8 grid, per backend; then FP8 math (sm90, opt-in) on the e4m3 cache.
  for backend in ${FP8_BACKENDS:-auto portable}; do
    bench "bench_fp8_$backend" --grid fp8 --format bf16,fp8_e4m3,fp8_ds_mla --backend "$backend"
  done
  bench bench_fp8_math --grid fp8 --format fp8_e4m3 --fp8-math qk_and_pv
fi

# ---- compute-sanitizer (last: slow, and a time limit must not cost the benchmark) -------------------------
# The subsets of docs/sanitizers.md: each kernel variant once (wide alternating and seesaw, narrow 16/32 rows on
# every cache, FP8 math, every portable tile), the split planner and combine, write_kv; small shapes.
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  edge=AllSupported/DecodeShapes.EdgeLengthsMatchReference
  fp8=Fp8Formats/DecodeFp8.EdgeLengthsMatchReference
  sm90_subset="Decode.Sm90SchedulesWithoutCausalMask:Decode.DsMla16RowsLargeBatchEdgeLengths:Decode.Fp8MathOnPaddedPages:$edge/sq4_hq16_causal_bf16:$edge/sq2_hq128_causal_fp16:$fp8/e4m3_sq1_hq16_fp16:WriteKV.PaddedPagesAlignedRows:WriteKV.Fp8PerTensorScales:Plan.SmallBatchesAndMinimumPartSize"
  portable_subset="Decode.EveryPortableTileMatchesReference:$fp8/dsmla_sq4_hq16_bf16:WriteKV.PaddedPagesAlignedRows:SpecDecode.EagleTreeTopk4Depth4:SpecDecode.GuardsFlagBadOffsetsAndShortRequests:SpecDecode.RaggedNonCausal:MoveKV.ChainsSwapsAndNoOpsInsideAGroup:MoveKV.BadSlotsAreFlaggedAndNeverDereferenced:MoveKV.BadRowRangesMoveNothingForThatGroup:SpecDecode.AnyHeadCountMatchesReference:SparseDecode.BadIndicesAndLengthsAreFlaggedAndPoisonOnlyTheirTokens:SparseDecode.AttentionSink:SparseDecode.ExtraCacheWithItsOwnPageBlockAndLengths:Decode.BadDeviceHeldScalesPoisonRowsAndSetTheScaleBit:WriteKV.BadDeviceScaleWritesNothingAndIsFlagged"
  for backend in ${SANITIZE_BACKENDS:-sm90 portable}; do
    subset="$sm90_subset"; [ "$backend" = portable ] && subset="$portable_subset"
    for tool in memcheck racecheck synccheck; do
      log="$out/sanitizer_${tool}_$backend.log"
      # Every report printed (the default stops at 100), so that racecheck_known.py sees them all.
      OPENMLA_BACKEND=$backend timeout "${SANITIZE_TIMEOUT:-180}" compute-sanitizer --tool "$tool" --print-limit 100000 \
        --error-exitcode 9 "$tests" --gtest_filter="${SANITIZE_FILTER:-$subset}" --gtest_brief=1 >"$log" 2>&1
      note "compute-sanitizer $tool ($backend): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
    done
    # The one report class racecheck gives on the 32-row narrow kernel (docs/sanitizers.md) told apart from
    # anything else: the script fails on any other report.
    if grep -q "Race reported between" "$out/sanitizer_racecheck_$backend.log"; then
      note "racecheck ($backend): $(python3 scripts/racecheck_known.py "$out/sanitizer_racecheck_$backend.log" . | tail -1)"
    fi
  done
  # The handoff reproducer (tests/sanitizer): racecheck's behaviour on the two handoff forms.
  if [ -x "$bin/tests/openmla_racecheck_handoffs" ]; then
    sh tests/sanitizer/racecheck_handoffs.sh "$bin/tests/openmla_racecheck_handoffs" >"$out/racecheck_handoffs.log" 2>&1
    note "racecheck handoff reproducer: rc=$? $(tail -1 "$out/racecheck_handoffs.log")"
  fi
elif [ "${SANITIZE:-1}" = 1 ]; then
  note "compute-sanitizer: not found, skipped"
fi

echo; cat "$summary"
