#!/usr/bin/env python3
"""Lines up an nvidia-smi power / clock log with ab_env.sh's AB_STAMPS: per process, the samples under load.

Usage: python3 scripts/power_by_run.py smi.csv stamps.txt
smi.csv: `nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm --format=csv,noheader,nounits -lms 50`
(timestamps as "YYYY/MM/DD HH:MM:SS.mmm", local time of the device, which `date +%s` there shares).
Under load = the samples of the process whose power is at least 70% of its highest; prints their median power and
SM clock per variant and shape (medians over rounds), so that a variant's speed at the cap can be read next to its power.
The H200's `power.draw` is an average over a window longer than a short process's loaded part, so its power column
compares processes only roughly; the clock column is the one to read (bench/results/2026-12-03-h200-cap-and-release.md).
"""
import collections
import datetime
import statistics
import sys

samples = []
for line in open(sys.argv[1]):
    parts = [x.strip() for x in line.split(",")]
    if len(parts) < 3:
        continue
    try:
        t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        samples.append((t, float(parts[1]), float(parts[2])))
    except ValueError:
        continue
by = collections.defaultdict(list)
for line in open(sys.argv[2]):
    f = line.split()
    start, end, variant, job = float(f[0]), float(f[1]), f[2], f[3]
    window = [(p, c) for t, p, c in samples if start <= t <= end]
    if not window:
        continue
    top = max(p for p, _ in window)
    loaded = [(p, c) for p, c in window if p >= 0.7 * top]
    by[(job, variant)].append((statistics.median(p for p, _ in loaded), statistics.median(c for _, c in loaded),
                               len(loaded)))
print("| shape | variant | power W (rounds) | SM MHz (rounds) | samples |")
print("|---|---|---:|---:|---:|")
for (job, variant), rows in by.items():
    print(f"| {job} | {variant} | {statistics.median(r[0] for r in rows):.0f} "
          f"({'/'.join('%.0f' % r[0] for r in rows)}) | {statistics.median(r[1] for r in rows):.0f} "
          f"({'/'.join('%.0f' % r[1] for r in rows)}) | {'/'.join(str(r[2]) for r in rows)} |")
