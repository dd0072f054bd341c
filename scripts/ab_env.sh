#!/usr/bin/env bash
# Times variants chosen by an environment variable inside one run: openmla-bench once per value, the
# values interleaved ROUNDS times (A B A B ...) so that drift shows up as spread, not as a difference.
# Usage: VAR=NAME VALUES="a b" [ROUNDS=2] [BIN=dir] [FILTERS="spec;spec"] bash scripts/ab_env.sh <openmla-bench args...>
# Or builds against each other: BINS="base=dir1 new=dir2" (each dir holds an openmla-bench; the names are the
# values). (FILTERS: one openmla-bench --filter per entry, each run for every value.)
# JSON per value and round to $OUT (device tool) or ./ab-out; a table of median µs per shape last.
set -uo pipefail
out="${OUT:-ab-out}"
mkdir -p "$out"
bin="${BIN:-build-gpu}"
rounds="${ROUNDS:-2}"
declare -A bin_of=()
if [ -n "${BINS:-}" ]; then
  VAR="${VAR:-OPENMLA_AB_BUILD}"
  VALUES=""
  for pair in $BINS; do
    bin_of[${pair%%=*}]="${pair#*=}"
    VALUES="$VALUES ${pair%%=*}"
  done
fi
IFS=';' read -r -a filters <<<"${FILTERS:-}"
[ ${#filters[@]} -eq 0 ] && filters=("")
for round in $(seq 1 "$rounds"); do
  for f in "${!filters[@]}"; do
    for value in $VALUES; do
      name="ab_${value}_${round}_${f}"
      timeout "${AB_TIMEOUT:-300}" env "$VAR=$value" "${bin_of[$value]:-$bin}"/openmla-bench "$@" ${filters[$f]:+--filter "${filters[$f]}"} --json "$out/$name.json" \
        >"$out/$name.txt" 2>&1 || { echo "openmla-bench failed for $VAR=$value"; tail -5 "$out/$name.txt"; }
    done
  done
done
python3 - "$out" "$VALUES" "$rounds" <<'EOF'
import glob, json, sys, statistics
out, values, rounds = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
runs = {}
for v in values:
    for path in sorted(glob.glob(f"{out}/ab_{v}_*.json")):
        try:
            data = json.load(open(path))
        except (OSError, ValueError):
            continue
        for res in data["results"]:
            if res.get("status") != "ok":
                continue
            s_k = f"varlen {res['mean_seqlen']}" if res["varlen"] else res["s_k"]
            key = (res["format"], res["b"], res["s_q"], res["h_q"], s_k)
            runs.setdefault(key, {}).setdefault(v, []).append(res["time_us"])
print("| format | b | s_q | h_q | s_k | " + " | ".join(f"{v} µs (min-max)" for v in values) + f" | speedup of {values[-1]} |")
print("|---|---:|---:|---:|---|" + "---:|" * (len(values) + 1))
for key, by in runs.items():
    cells = []
    for v in values:
        t = by.get(v, [])
        cells.append(f"{statistics.median(t):.1f} ({min(t):.1f}-{max(t):.1f})" if t else "-")
    a, b = by.get(values[0]), by.get(values[-1])
    ratio = f"{statistics.median(a) / statistics.median(b):.3f}x" if a and b else "-"
    print("| " + " | ".join(str(k) for k in key) + " | " + " | ".join(cells) + f" | {ratio} |")
EOF
