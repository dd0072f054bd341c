#!/bin/bash
# Session 36 run 6: the deepseek grid at 1244d53 (consumer 1's late boxes in copy order) with FlashMLA's anchors, and
# FlashMLA's kernel (scratch build, decode kernel only, no combine) on the grid's 128-512-row shapes from b=16 in the
# same run, after the grid.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s36/bench_o.xz > $P/openmla-bench; xz -dc .carry/s36/fm_fast.xz > $P/fm; chmod +x $P/openmla-bench $P/fm
export OPENMLA_COMMIT=${COMMIT:-unknown}
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 400 $P/openmla-bench --grid deepseek --anchors .carry/s36/h200-anchors.csv --json $OUT/grid.json > $OUT/grid.txt 2>&1
echo "grid rc=$?"
python3 scripts/grid_summary.py $OUT/grid.json | tee $OUT/grid_summary.txt
: > $OUT/fm_grid.txt
for b in 16 64 128; do for sk in 1024 4096 16384 32768; do
  for qh in 1,128 2,128 4,128 2,64 4,64; do
    timeout 60 $P/fm --shape $b,$qh,$sk --replays 10 2>&1 | grep FLASHMLA >> $OUT/fm_grid.txt || echo "fm $b,$qh,$sk failed"
  done
done; done
python3 - $OUT/grid.json $OUT/fm_grid.txt <<'PY' | tee $OUT/table_fm_grid.md
import json, re, statistics, sys
d = json.load(open(sys.argv[1])); rows = d['results'] if isinstance(d, dict) else d
ours = {(r['b'], r['s_q'], r['h_q'], r['s_k']): r for r in rows if not r['varlen'] and r['format'] == 'bf16'}
print('| b | s_q | h_q | s_k | FlashMLA anchor µs | fm decode-only µs (same run) | ours µs | ours / anchor speed | ours / fm speed |')
print('|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
ra, rf = [], []
for line in open(sys.argv[2]):
    m = re.search(r'b=(\d+) s_q=(\d+) h_q=(\d+) s_k=(\d+).*median_us=([\d.]+)', line)
    if not m: continue
    k = tuple(int(x) for x in m.groups()[:4]); fm = float(m.group(5)); o = ours.get(k)
    if not o: continue
    a = o.get('anchor_us') or float('nan')
    ra.append(a / o['time_us']); rf.append(fm / o['time_us'])
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {a:.1f} | {fm:.1f} | {o['time_us']:.1f} | {a / o['time_us']:.3f}x | {fm / o['time_us']:.3f}x |")
print(f'\n{len(rf)} shapes: ours / anchor median {statistics.median(ra):.3f}x (min {min(ra):.3f}, max {max(ra):.3f}); '
      f'ours / fm decode-only median {statistics.median(rf):.3f}x (min {min(rf):.3f}, max {max(rf):.3f})')
PY
cd $OUT && xz -9 grid.json && ls -la
