#!/usr/bin/env python3
"""Markdown summary of openmla-bench JSON files: where each ran (GPU, commit, date, command) and one table per file.

Rows carry the same-process peer's time and ratio when the run had `--peer flashmla`, else the anchor columns when
it had `--anchors`. With a peer, a summary of the ratios follows the table: all shapes, compute-bound ones (b >= 16,
s_q * h_q >= 128) and memory-bound ones (the rest of b >= 16), and b < 16.

usage: bench_table.py RESULTS.json [RESULTS.json ...] [--driver TEXT]
"""
import argparse
import json
import statistics


def shape_cell(r):
    return f"~{r['s_k']} ({r['mean_seqlen']:.0f})" if r["varlen"] else str(r["s_k"])


def ratio_summary(rows):
    def line(name, values):
        if not values:
            return None
        return (f"| {name} | {len(values)} | {min(values):.3f} | {statistics.median(values):.3f} | "
                f"{max(values):.3f} | {sum(v >= 1.0 for v in values)} |")

    peer = [r for r in rows if r.get("ratio_vs_flashmla")]
    groups = [
        ("all shapes", [r["ratio_vs_flashmla"] for r in peer]),
        ("b ≥ 16, s_q·h_q ≥ 128 (compute-bound)",
         [r["ratio_vs_flashmla"] for r in peer if r["b"] >= 16 and r["s_q"] * r["h_q"] >= 128]),
        ("b ≥ 16, s_q·h_q < 128 (memory-bound)",
         [r["ratio_vs_flashmla"] for r in peer if r["b"] >= 16 and r["s_q"] * r["h_q"] < 128]),
        ("b < 16", [r["ratio_vs_flashmla"] for r in peer if r["b"] < 16]),
    ]
    out = ["| shapes | n | min | median | max | OpenMLA faster |", "|---|---:|---:|---:|---:|---:|"]
    out += [x for x in (line(n, v) for n, v in groups) if x]
    return out if len(out) > 2 else []


def table(data):
    rows = [r for r in data["results"] if r.get("status") == "ok"]
    peer = data.get("method", {}).get("peer")
    head = ["format", "backend", "b", "s_q", "h_q", "s_k", "µs", "GB/s", "TFLOP/s", "rel err"]
    if peer:
        head += ["FlashMLA µs", "FlashMLA / OpenMLA"]
    elif any(r.get("anchor_us") for r in rows):
        head += ["anchor µs", "anchor / OpenMLA"]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|"]
    for r in rows:
        cells = [r["format"], r["backend"], r["b"], r["s_q"], r["h_q"], shape_cell(r), f"{r['time_us']:.1f}",
                 f"{r['gbps']:.0f}", f"{r['tflops']:.1f}",
                 f"{r['max_rel_err']:.1e}" if r.get("max_rel_err") is not None else "-"]
        if peer:
            fm = r.get("flashmla_us")
            cells += [f"{fm:.1f}" if fm else "-", f"{r['ratio_vs_flashmla']:.3f}" if r.get("ratio_vs_flashmla") else "-"]
        elif len(head) > 10:
            a = r.get("anchor_us")
            cells += [f"{a:.1f}" if a else "-", f"{r['speedup']:.3f}" if r.get("speedup") else "-"]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    summary = ratio_summary(rows) if peer else []
    return out, summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--driver", default="", help="driver version to print when the JSON does not hold it")
    args = ap.parse_args()
    for path in args.results:
        data = json.load(open(path))
        dev = data["device"]
        print(f"### `{path.rsplit('/', 1)[-1]}`\n")
        driver = args.driver or dev.get("driver", "")
        print(f"- GPU: {dev['name']} ({dev['num_sms']} SMs, {dev['memory_gb']:.0f} GB)"
              + (f", driver {driver}" if driver else ""))
        print(f"- openmla {data['version']} at commit `{data['commit']}`, {data['date']}")
        print(f"- command: `{data['command']}`")
        print(f"- device copy ceiling: {data['ceilings']['device_copy_gbps_read_plus_write']:.0f} GB/s (read + write)\n")
        rows, summary = table(data)
        if summary:
            print("FlashMLA / OpenMLA time ratios (above 1: OpenMLA faster):\n")
            print("\n".join(summary) + "\n")
        print("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
