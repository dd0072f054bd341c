#!/usr/bin/env python3
"""Summarises an openmla-bench deepseek-grid JSON against FlashMLA and the Hopper issue's floors.

Usage: python3 scripts/grid_summary.py results.json [anchors.csv]
anchors.csv (shared/notes/h200-anchors.csv): fills in FlashMLA's time where the run had no anchors file (a device
without the shared folder), matched as openmla-bench matches them (tools/bench/anchors.cpp: varlen mean length
within kVarlenMeanTolerance = 10%). Where the anchors file can be carried, `openmla-bench --anchors FILE` is the way.
Prints: shapes faster than the anchor (FlashMLA), the median speedups (all fixed-length shapes, compute-bound ones,
s_k = 1K, and by query rows per request), and each floor shape's time with met / missed.
"""
import csv
import json
import statistics
import sys

# (b, s_q, h_q, s_k or mean length for varlen, varlen) -> floor in µs: the Hopper BF16 issue's floor table.
FLOORS = {
    (128, 1, 16, 16384, 0): 579, (128, 1, 16, 32768, 0): 1137, (64, 1, 16, 4096, 0): 75.8,
    (16, 1, 16, 4096, 0): 22.8, (1, 1, 16, 4096, 0): 12, (1, 1, 16, 32768, 0): 22, (1, 1, 128, 32768, 0): 21,
    (128, 1, 128, 16384, 0): 837, (128, 2, 128, 16384, 0): 1609, (64, 2, 64, 4096, 0): 108.8,
    (128, 4, 128, 1024, 0): 230, (16, 4, 128, 32768, 0): 802, (128, 1, 128, 4096, 1): 228,
    (128, 1, 16, 16384, 1): 582,
}


def key(r):
    if not r["varlen"]:
        return (r["b"], r["s_q"], r["h_q"], r["s_k"], 0)
    return (r["b"], r["s_q"], r["h_q"], 4096 if r["mean_seqlen"] < 8192 else 16384, 1)


def join_anchors(rows, path):
    anchors = list(csv.DictReader(open(path)))
    for r in rows:
        if r.get("anchor_us"):
            continue
        for a in anchors:
            same = (a["kernel"] == r["anchor_kernel"] and int(a["b"]) == r["b"] and int(a["s_q"]) == r["s_q"]
                    and int(a["h_q"]) == r["h_q"] and (a["varlen"] == "1") == r["varlen"])
            s_k = float(a["s_k"])
            if same and (abs(s_k - r["s_k"]) <= 0.10 * r["s_k"] if r["varlen"] else abs(s_k - r["s_k"]) < 0.5):
                r["anchor_us"] = float(a["time_us"])
                r["speedup"] = r["anchor_us"] / r["time_us"]
                break


def main(path, anchors=None):
    data = json.load(open(path))
    rows = data["results"] if isinstance(data, dict) else data
    if anchors:
        join_anchors(rows, anchors)
    fixed = [r for r in rows if not r["varlen"] and r.get("speedup")]
    sp = [r["speedup"] for r in fixed]
    print(f"fixed shapes {len(fixed)}: faster than FlashMLA {sum(s > 1 for s in sp)}, "
          f"median {statistics.median(sp):.3f}x, min {min(sp):.2f}x")
    cb = [r["speedup"] for r in fixed if r["b"] >= 16 and r["s_q"] * r["h_q"] >= 128]
    print(f"compute-bound (b >= 16, s_q*h_q >= 128): {len(cb)} shapes, median {statistics.median(cb):.3f}x")
    k1 = [r["speedup"] for r in fixed if r["b"] >= 16 and r["s_k"] == 1024]
    print(f"s_k = 1K, b >= 16: median {statistics.median(k1):.3f}x")
    # Where the slower shapes are: by query rows per request (s_q * h_q), which picks the sm90 schedule.
    by_rows = {}
    for r in fixed:
        by_rows.setdefault(r["s_q"] * r["h_q"], []).append(r["speedup"])
    print("by rows per request (shapes, slower than FlashMLA, median, min): " + "; ".join(
        f"{n}: {len(v)}, {sum(x < 1 for x in v)}, {statistics.median(v):.3f}x, {min(v):.2f}x"
        for n, v in sorted(by_rows.items())))
    for r in rows:
        k = key(r)
        if k in FLOORS:
            f = FLOORS[k]
            print(f"  b={k[0]} s_q={k[1]} h_q={k[2]} {'~' if k[4] else ''}{k[3]}: {r['time_us']:.1f} us, floor {f}: "
                  f"{'met' if r['time_us'] <= f else 'missed'} (FlashMLA {r.get('anchor_us')})")


if __name__ == "__main__":
    main(*sys.argv[1:3])
