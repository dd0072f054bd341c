#!/bin/bash
# Session 31 run 6 (5784a0d): does the GPU's temperature explain why sustained numbers depend on what ran before
# (docs/benchmarking.md, "Power state": one TP8 row 630-684 µs inside a sustained grid sequence, 560-610 standalone)?
# Two shapes at the power cap (--sustain-ms 300) on a GPU that idled, right after 60 s of a compute-bound shape at
# the cap, and again after 60 s idle; nvidia-smi sampled every 100 ms throughout.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s31/bench_final.xz > $P/openmla-bench; chmod +x $P/openmla-bench
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_event_reasons.active --format=csv,noheader -lms 100 > $OUT/smi.csv 2>&1 &
SMI=$!
S="--shape 128,1,16,16384 --shape 128,1,128,16384"
mark() { echo "$(date +%T.%N | cut -c1-12) $1" >> $OUT/marks.txt; }
mark "A start (idle GPU)"; $P/openmla-bench $S --sustain-ms 300 --check-samples 0 --json $OUT/A.json | grep -E "^\["; mark "A end"
mark "heat start"; $P/openmla-bench --shape 128,4,128,16384 --sustain-ms 60000 --check-samples 0 --json $OUT/heat.json | grep -E "^\["; mark "heat end"
mark "B start (hot)"; $P/openmla-bench $S --sustain-ms 300 --check-samples 0 --json $OUT/B.json | grep -E "^\["; mark "B end"
sleep 60
mark "C start (60 s idle)"; $P/openmla-bench $S --sustain-ms 300 --check-samples 0 --json $OUT/C.json | grep -E "^\["; mark "C end"
kill $SMI
cat $OUT/marks.txt
python3 - $OUT <<'PY'
import sys, csv, datetime
out = sys.argv[1]
rows = []
for r in csv.reader(open(out + '/smi.csv')):
    try:
        t = datetime.datetime.strptime(r[0].strip(), '%Y/%m/%d %H:%M:%S.%f')
        rows.append((t.time(), float(r[1].split()[0]), float(r[3].split()[0]), float(r[4]), r[6].strip()))
    except Exception:
        pass
marks = [l.split(' ', 1) for l in open(out + '/marks.txt').read().splitlines()]
def tt(s): return datetime.datetime.strptime(s, '%H:%M:%S.%f').time()
for i in range(0, len(marks) - 1):
    a, b = tt(marks[i][0]), tt(marks[i + 1][0])
    sel = [x for x in rows if a <= x[0] <= b and x[2] > 150]
    if not sel: continue
    sel.sort(key=lambda x: x[1])
    print(f"{marks[i][1]:24s} samples {len(sel):4d} (power > 150 W): SM clock median {sel[len(sel)//2][1]:.0f} MHz, "
          f"power max {max(x[2] for x in sel):.0f} W, temp {min(x[3] for x in sel):.0f}-{max(x[3] for x in sel):.0f} C")
PY
