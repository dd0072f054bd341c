#!/usr/bin/env python3
"""Summarises Nsight Compute's per-instruction stall samples of one kernel.

Input: the CSV that `ncu -i REPORT --page source --csv --print-source sass` prints for a report taken with the
SourceCounters section (the data of bench/results/2026-12-02-narrow-producer/ are such files, xz-compressed).
Output: the samples by opcode and by stall reason, the instructions with the most samples (index, samples,
executions, SASS, top two reasons), and optionally the samples of index ranges (--regions "QK:724-1001,PV:1540-1825";
the indices are the first column of the --top listing).

Usage: ncu_source_summary.py CSV [--top N] [--regions NAME:A-B,...]
"""
import argparse
import collections
import csv
import lzma
import re


def read_rows(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    # The first line names the kernel; the second is the header.
    return rows[0], rows[1], rows[2:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--regions", default="")
    args = ap.parse_args()

    title, header, data = read_rows(args.csv)
    col = {name: i for i, name in enumerate(header)}
    samples = col["Warp Stall Sampling (All Samples)"]
    executed = col["Instructions Executed"]
    reasons = [c for c in header if c.startswith("stall_") and "Not Issued" not in c]

    def count(row, name):
        value = row[col[name]]
        return int(value) if value.strip().lstrip("-").isdigit() else 0

    total = sum(count(r, header[samples]) for r in data) or 1
    print(f"{title[1] if len(title) > 1 else title[0]}")
    print(f"{total} samples over {len(data)} instructions")

    by_opcode, by_reason = collections.Counter(), collections.Counter()
    for r in data:
        match = re.match(r"(@!?U?P\w+\s+)?([A-Z0-9_]+)", r[col["Source"]].strip())
        by_opcode[match.group(2) if match else "?"] += count(r, header[samples])
        for c in reasons:
            by_reason[c[len("stall_"):]] += count(r, c)
    print("by opcode: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by_opcode.most_common(12)))
    print("by reason: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by_reason.most_common(10)))

    if args.regions:
        for spec in args.regions.split(","):
            name, span = spec.split(":")
            a, b = (int(x) for x in span.split("-"))
            s = sum(count(r, header[samples]) for r in data[a:b])
            print(f"region {name} [{a}, {b}): {s} samples, {100 * s / total:.1f}%")

    print(f"top {args.top} instructions: index samples executed source reasons")
    ranked = sorted(range(len(data)), key=lambda k: -count(data[k], header[samples]))
    for k in ranked[: args.top]:
        r = data[k]
        top = sorted(((count(r, c), c[len("stall_"):]) for c in reasons), reverse=True)[:2]
        print(f"{k:5d} {count(r, header[samples]):6d} {r[executed]:>9} {r[col['Source']].strip()[:64]:64s} "
              + " ".join(f"{n}:{v}" for v, n in top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
