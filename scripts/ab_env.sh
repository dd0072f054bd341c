#!/usr/bin/env bash
# Times variants inside one run, so that the machine start and the GPU's state are shared.
#
# Variants:
#   VAR=NAME VALUES="a b"           one openmla-bench (BIN=dir, default build-gpu), the variable set per value;
#   BINS="base=dir1 new=dir2"       builds against each other (each dir holds an openmla-bench; the names are the values);
#   AB_ARGS_<value>="..."           (optional) openmla-bench arguments for that variant only, after the common ones
#                                   (e.g. AB_ARGS_fp8="--format fp8_e4m3": variants that differ in format or mode);
#   EXTRA="fm=/path/to/binary"      (optional, with SHAPES) a non-openmla harness timed in the same loop, called as
#                                   `binary --shape b,s_q,h_q,s_k` and then AB_ARGS_<name> (default `--replays 10`),
#                                   printing `median_us=`; skipped for varlen shapes (FlashMLA's scratch decode harness
#                                   of session 36 is one). One binary may appear under several names.
# AB_STAMPS=file                    (optional) appends "<start s> <end s> <variant> <job> <round>" per process (epoch
#                                   seconds), to line runs up with a power / clock log (scripts/power_by_run.py).
# What is timed:
#   SHAPES="b,s_q,h_q,s_k[,varlen] ..."  each shape by every variant back to back (shape-major), one process each;
#                                   round 1 checks against the CPU reference, later rounds pass --check-samples 0;
#   FILTERS="spec;spec"             otherwise: one openmla-bench run per --filter entry (or one with the arguments alone),
#                                   each for every value.
# Rounds: ROUNDS (default 2); even rounds take the variants in reverse order, so that a variant's place in the
# sequence (a warmer GPU later on) shows up as spread, not as a difference.
# Usage: [variants] [SHAPES=... | FILTERS=...] [ROUNDS=2] bash scripts/ab_env.sh <openmla-bench args...>
# JSON / text per variant, shape and round to $OUT/ab (device tool) or ./ab-out/ab; a table of median µs per shape last
# (speed of each variant against the first: first's time / its time).
set -uo pipefail
out="${OUT:-ab-out}/ab"
mkdir -p "$out"
bin="${BIN:-build-gpu}"
rounds="${ROUNDS:-2}"
declare -A bin_of=() extra_of=()
if [ -n "${BINS:-}" ]; then
  VALUES=""
  for pair in $BINS; do
    bin_of[${pair%%=*}]="${pair#*=}"
    VALUES="$VALUES ${pair%%=*}"
  done
fi
: "${VALUES:?ab_env.sh: set VALUES=\"a b\" (with VAR=NAME) or BINS=\"name=dir ...\"}"
VAR="${VAR:-OPENMLA_AB_VARIANT}"  # set to the variant's name in openmla-bench's environment
variants="$VALUES"
for pair in ${EXTRA:-}; do
  extra_of[${pair%%=*}]="${pair#*=}"
  variants="$variants ${pair%%=*}"
done
for v in $variants; do  # names go into file names (j<job>_<name>_<round>) and AB_ARGS_<name>
  [[ "$v" =~ ^[A-Za-z0-9]+$ ]] || { echo "ab_env.sh: variant name '$v': letters and digits only"; exit 2; }
done
if [ -n "${SHAPES:-}" ]; then
  read -r -a jobs <<<"$SHAPES"
else
  IFS=';' read -r -a jobs <<<"${FILTERS:-}"
  [ ${#jobs[@]} -eq 0 ] && jobs=("")
fi
stamp() {  # AB_STAMPS: this process's start (set before it ran) and end
  if [ -n "${AB_STAMPS:-}" ]; then echo "$start $(date +%s.%N) $v ${job:-all} $round" >>"$AB_STAMPS"; fi
}
for round in $(seq 1 "$rounds"); do
  order="$variants"
  [ $((round % 2)) = 0 ] && order="$(echo $variants | tr ' ' '\n' | tac | tr '\n' ' ')"
  for j in "${!jobs[@]}"; do
    job="${jobs[$j]}"
    for v in $order; do
      name="$out/j${j}_${v}_${round}"
      own="AB_ARGS_$v"
      start=$(date +%s.%N)
      if [ -n "${extra_of[$v]:-}" ]; then
        if [ -z "${SHAPES:-}" ] || [[ "$job" == *varlen ]]; then continue; fi
        timeout "${AB_TIMEOUT:-300}" "${extra_of[$v]}" --shape "$job" ${!own:---replays 10} >"$name.txt" 2>&1 ||
          { echo "$v failed on $job"; tail -3 "$name.txt"; }
        stamp
        continue
      fi
      if [ -n "${SHAPES:-}" ]; then
        args=(--shape "$job")
        [ "$round" -gt 1 ] && args+=(--check-samples 0)
      else
        args=(${job:+--filter "$job"})
      fi
      timeout "${AB_TIMEOUT:-300}" env "$VAR=$v" "${bin_of[$v]:-$bin}"/openmla-bench "$@" ${!own:-} "${args[@]}" \
        --json "$name.json" >"$name.txt" 2>&1 || { echo "openmla-bench failed for $v on '$job'"; tail -5 "$name.txt"; }
      stamp
    done
  done
done
python3 - "$out" "$variants" <<'EOF'
import glob, json, os, re, statistics, sys
out, variants = sys.argv[1], sys.argv[2].split()
runs, order, formats = {}, [], {}
def add(key, v, us):
    if key not in runs:
        order.append(key)
    runs.setdefault(key, {}).setdefault(v, []).append(us)
for v in variants:
    for path in sorted(glob.glob(f"{out}/j*_{v}_*.json")):
        try:
            data = json.load(open(path))
        except (OSError, ValueError):
            continue
        for res in data["results"]:
            if res.get("status") != "ok":
                continue
            err, lse = res.get("max_rel_err"), res.get("max_lse_err")
            # The tests' tolerances: bf16-level, or FP8 math's against its own reference (tests/gpu/test_decode.cpp:
            # every element within 0.2, lse 5e-3; the bench reports only the worst element).
            fp8_math = data.get("method", {}).get("fp8_math", "off") != "off" and res["format"] == "fp8_e4m3"
            out_tol, lse_tol = (0.2, 5e-3) if fp8_math else (1e-2, 1e-4)
            if (err is not None and err > out_tol) or (lse is not None and lse > lse_tol) or res.get("device_errors"):
                print(f"CHECK FAILED: {path} (out {err}, lse {lse}, device errors {res.get('device_errors')})")
            key = (res["b"], res["s_q"], res["h_q"], f"varlen {res['mean_seqlen']}" if res["varlen"] else res["s_k"])
            add(key, v, res["time_us"])
            formats.setdefault(key, set()).add(res["format"])
    for path in sorted(glob.glob(f"{out}/j*_{v}_*.txt")):  # an EXTRA harness's output (no JSON beside it)
        if os.path.exists(path[:-4] + ".json"):
            continue
        m = re.search(r"b=(\d+) s_q=(\d+) h_q=(\d+) s_k=(\d+).*median_us=([\d.]+)", open(path).read())
        if m:
            add(tuple(int(x) for x in m.groups()[:4]), v, float(m.group(5)))
first, others = variants[0], variants[1:]
print("| format | b | s_q | h_q | s_k | " + " | ".join(f"{v} µs (rounds)" for v in variants) + " | " +
      " | ".join(f"{first} / {v}" for v in others) + " |")
print("|---|---:|---:|---:|---|" + "---:|" * (len(variants) + len(others)))
for key in order:
    by = runs[key]
    med = {v: statistics.median(by[v]) for v in variants if v in by}
    cells = [f"{med[v]:.1f} ({'/'.join('%.1f' % t for t in by[v])})" if v in med else "-" for v in variants]
    ratios = [f"{med[first] / med[v]:.3f}x" if v in med and first in med else "-" for v in others]
    fmt = ",".join(sorted(formats.get(key, {"-"})))
    print(f"| {fmt} | " + " | ".join(str(k) for k in key) + " | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
EOF
