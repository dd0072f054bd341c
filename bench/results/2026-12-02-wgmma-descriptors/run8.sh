#!/bin/bash
# Session 28 run 8: SM clock and power while base (6abbaed) and desc (7475d3e) run the long rows back to back
# (nvidia-smi every 50 ms), to see whether desc's 16K loss (runs 1, 2, 6; none in one Nsight Compute launch) is the
# clock under the power limit.
set -u
for v in base desc; do mkdir -p /tmp/ab/$v; xz -dc .carry/s28/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
nvidia-smi --query-gpu=power.limit,enforced.power.limit,clocks.max.sm --format=csv
for round in 1 2; do
  for v in base desc; do
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 50 > $OUT/smi_${v}_$round.csv &
    smi=$!
    /tmp/ab/$v/openmla-bench --backend sm90 --format bf16 --shape 128,1,128,16384 --shape 128,2,128,16384 --replays 30 \
      --check-samples 0 --json $OUT/bench_${v}_$round.json > $OUT/bench_${v}_$round.txt 2>&1
    kill $smi; wait $smi 2>/dev/null
    python3 - $OUT/smi_${v}_$round.csv $OUT/bench_${v}_$round.json $v $round <<'PY'
import csv, json, sys, statistics
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) >= 5]
busy = [r for r in rows if float(r[2].split()[0]) > 300]  # samples while a kernel grid runs (W)
clk = [float(r[1].split()[0]) for r in busy]; pw = [float(r[2].split()[0]) for r in busy]
res = json.load(open(sys.argv[2]))["results"]
print(f"{sys.argv[3]} round {sys.argv[4]}: " + ", ".join(f"{r['b']}/{r['s_q']}/{r['h_q']}/{r['s_k']} {r['time_us']:.1f} us" for r in res),
      f"| samples >300 W: {len(busy)}, SM clock median {statistics.median(clk) if clk else 0:.0f} MHz (min {min(clk) if clk else 0:.0f}),"
      f" power median {statistics.median(pw) if pw else 0:.0f} W, throttle reasons {sorted(set(r[4].strip() for r in busy))}")
PY
  done
done
(cd $OUT && tar cf smi.tar smi_*.csv bench_*.json && rm -f smi_*.csv bench_*.json)
