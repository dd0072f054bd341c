#!/bin/bash
# Run 6 (session 41): the deepseek grid at 7478cc8 (new) and at 3c8931a (s39: the kernels of session 39's README
# snapshot, run 4 there) in one machine start, alternating new, s39, new, s39, each grid in its own process after a
# 30 s pause: what moved since that snapshot, and how far one grid's times spread from the next.
set -u
P=/tmp/pre; mkdir -p $P/new $P/s39
xz -dc .carry/s41/bench_new.xz > $P/new/openmla-bench; xz -dc .carry/s41/bench_s39.xz > $P/s39/openmla-bench
chmod +x $P/new/openmla-bench $P/s39/openmla-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $OUT/gpu.txt
for i in 1 2; do
  for v in new s39; do
    sleep 30
    c=7478cc8; [ $v = s39 ] && c=3c8931a
    OPENMLA_COMMIT=$c timeout 120 $P/$v/openmla-bench --grid deepseek --anchors .carry/s37/h200-anchors.csv \
      --json $OUT/deepseek_${v}_$i.json > $OUT/deepseek_${v}_$i.txt 2>&1
    echo "$v $i rc=$? $(nvidia-smi --query-gpu=temperature.gpu,power.draw --format=csv,noheader)" >> $OUT/gpu.txt
    python3 scripts/grid_summary.py $OUT/deepseek_${v}_$i.json > $OUT/summary_${v}_$i.txt 2>&1
  done
done
python3 - $OUT > $OUT/compare.txt <<'PY'
import json, statistics, sys, glob
out = sys.argv[1]
def load(v, i):
    d = json.load(open(f"{out}/deepseek_{v}_{i}.json"))
    return {(r["b"], r["s_q"], r["h_q"], r["s_k"], r["varlen"]): r["time_us"] for r in d["results"] if r["status"] == "ok"}
g = {(v, i): load(v, i) for v in ("new", "s39") for i in (1, 2)}
keys = sorted(set.intersection(*[set(x) for x in g.values()]))
ratio = lambda a, b: [g[b][k] / g[a][k] for k in keys]  # speed of a against b
for name, a, b in (("new 1 vs s39 1", ("new", 1), ("s39", 1)), ("new 2 vs s39 2", ("new", 2), ("s39", 2)),
                   ("new 2 vs new 1", ("new", 2), ("new", 1)), ("s39 2 vs s39 1", ("s39", 2), ("s39", 1))):
    r = ratio(a, b)
    print(f"{name}: {len(r)} shapes, speed median {statistics.median(r):.3f}x, min {min(r):.3f}x, max {max(r):.3f}x")
med = {k: (statistics.median([g[("s39", 1)][k], g[("s39", 2)][k]]) / statistics.median([g[("new", 1)][k], g[("new", 2)][k]])) for k in keys}
print("per shape (s39 mean / new mean), the 10 largest moves either way:")
for k in sorted(keys, key=lambda k: med[k])[:10] + sorted(keys, key=lambda k: med[k])[-10:]:
    print(k, f"{med[k]:.3f}x", [round(g[(v, i)][k], 1) for v in ("new", "s39") for i in (1, 2)])
PY
cat $OUT/gpu.txt; head -3 $OUT/summary_*.txt; cat $OUT/compare.txt
cd $OUT && tar cJf run6_out.tar.xz *.json *.txt && rm *.json deepseek_*.txt
