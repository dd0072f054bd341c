#!/bin/bash
# Session 29 run 1: do the m-tile CTAs of one part share their KV pages through L2?
# Per-tile time at b=128 rises with s_k where a request has 4-8 m-tiles (128/4/128: 4K 1.78 us, 16K 1.94 us per tile
# in the grid of run 7, 2026-12-02-wgmma-descriptors). Count DRAM bytes per call against the KV bytes.
set -u
mkdir -p /tmp/ab/base; xz -dc .carry/s29/bench_base.xz > /tmp/ab/base/openmla-bench; chmod +x /tmp/ab/base/openmla-bench
B=/tmp/ab/base/openmla-bench
SHAPES="128,4,128,4096 128,4,128,16384 128,2,128,16384 128,2,128,32768 64,4,128,32768 128,1,128,32768"
for r in 1 2; do
  $B --backend sm90 --format bf16 $(for s in $SHAPES; do echo --shape $s; done) --replays 7 --check-samples 0 \
     --json $OUT/bench_r$r.json > $OUT/bench_r$r.txt 2>&1
done
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,sm__cycles_elapsed.avg.per_second
for s in $SHAPES; do
  n=${s//,/_}
  timeout 120 ncu --clock-control none --kernel-name regex:wide_decode_kernel --launch-skip 3 --launch-count 2 \
    --metrics $M --csv --print-units base $B --backend sm90 --format bf16 --shape $s --replays 5 --check-samples 0 > $OUT/ncu_$n.csv 2>&1
  echo "$n rc $?"
done
python3 - <<'PY'
import csv, glob, os, json
out = os.environ['OUT']
for r in (1, 2):
    d = json.load(open(f'{out}/bench_r{r}.json'))
    print('bench', r, ' '.join('%d/%d/%d/%d %.1f' % (x['b'], x['s_q'], x['h_q'], x['s_k'], x['time_us']) for x in d['results']))
for f in sorted(glob.glob(f'{out}/ncu_*.csv')):
    rows = [l for l in open(f) if l.startswith('"')]
    vals = {}
    for row in csv.reader(rows):
        if len(row) > 14 and row[0] != 'ID':
            vals.setdefault(row[0], {})[row[12]] = row[14]
    name = os.path.basename(f)[4:-4]
    b, sq, hq, sk = map(int, name.split('_'))
    kv = b * sk * 1152
    for k, v in vals.items():
        t = float(v['gpu__time_duration.sum'].replace(',', ''))
        dram = float(v['dram__bytes_read.sum'].replace(',', ''))
        print(f"{name} launch {k}: {t/1e3:.1f} us  dram {dram/1e9:.3f} GB = {dram/kv:.2f}x KV  l2 hit {v['lts__t_sector_hit_rate.pct']}%  "
              f"tex reads {v['lts__t_sectors_srcunit_tex_op_read.sum']} miss {v['lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum']} clk {v['sm__cycles_elapsed.avg.per_second']}")
PY
