#!/usr/bin/env bash
# Per-instruction warp-stall samples of the decode kernel on one benchmark shape (device batch):
# the SASS lines with the most samples, with their stall reasons. Finds what a warp role waits on.
# Usage: bash scripts/ncu_source.sh "<bench filter>" [format]; env BENCH (default build-gpu/openmla-bench),
# BACKEND (default sm90), TOP (default 45), BENCH_EXTRA (more openmla-bench arguments, e.g.
# --fp8-math qk_and_pv). Report and CSV go to $OUT.
set -uo pipefail
out="${OUT:-ncu-out}"; mkdir -p "$out"
root="$(cd "$(dirname "$0")/.." && pwd)"; cd "$root"
bench="${BENCH:-build-gpu/openmla-bench}"
ncu --clock-control none --kernel-name "regex:decode_kernel" --launch-skip 3 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --import-source no -f -o "$out/source" \
  "$bench" --grid all --backend "${BACKEND:-sm90}" --format "${2:-bf16}" --filter "$1" --replays 5 --check-samples 0 ${BENCH_EXTRA:-} \
  --json /dev/null >"$out/ncu_source_run.txt" 2>&1 || { tail -20 "$out/ncu_source_run.txt"; exit 1; }
ncu -i "$out/source.ncu-rep" --page source --csv --print-source sass >"$out/source.csv" 2>"$out/source_err.txt"
python3 - "$out/source.csv" "${TOP:-45}" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr_i = next(i for i, r in enumerate(rows) if any('Source' == c or 'Source' in c for c in r) and len(r) > 5)
hdr = rows[hdr_i]; data = rows[hdr_i + 1:]
def col(name):
    for i, h in enumerate(hdr):
        if h.strip() == name: return i
    return None
src = col('Source'); samp = col('Warp Stall Sampling (All Samples)') or col('Warp Stall Sampling (All Cycles)')
reasons = [i for i, h in enumerate(hdr) if h.startswith('stall_') or h.startswith('Stall')]
addr = col('Address')
print('columns:', len(hdr), 'samples col:', hdr[samp] if samp is not None else None)
def num(x):
    try: return float(x.replace(',', ''))
    except Exception: return 0.0
total = sum(num(r[samp]) for r in data if len(r) > samp)
top = sorted(data, key=lambda r: -num(r[samp]) if len(r) > samp else 0)[:int(sys.argv[2])]
for r in top:
    rs = sorted(((num(r[i]), hdr[i]) for i in reasons), reverse=True)[:3]
    print(f"{num(r[samp]) / total * 100:5.1f}% {r[addr] if addr is not None else ''} {r[src][:70]:70s} " +
          ' '.join(f"{n}={v:.0f}" for v, n in rs if v > 0))
PY
