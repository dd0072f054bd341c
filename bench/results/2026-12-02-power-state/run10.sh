#!/bin/bash
# Session 29 run 10: where the 1K rows' fixed cost sits. Nsight Compute's duration of the decode kernel and the
# combine (isolated launches) against the bench's per-call time (graph replay / R) at 38e5767.
set -u
mkdir -p /tmp/pre; xz -dc .carry/s29/bench_auto.xz > /tmp/pre/openmla-bench; chmod +x /tmp/pre/openmla-bench
B=/tmp/pre/openmla-bench
S="128,1,64,1024 128,4,16,1024 128,2,64,1024 128,1,128,1024 128,1,64,4096 128,1,64,16384"
$B --backend sm90 --format bf16 $(for s in $S; do echo --shape $s; done) --check-samples 0 --json $OUT/bench.json > $OUT/bench.txt 2>&1
for s in $S; do
  n=${s//,/_}
  timeout 120 ncu --clock-control none --kernel-name regex:"decode_kernel|combine" --launch-skip 6 --launch-count 6 --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second \
    --csv --print-units base $B --backend sm90 --format bf16 --shape $s --replays 5 --check-samples 0 > $OUT/ncu_$n.csv 2>&1
done
python3 - <<'PY'
import csv, glob, os, json, collections
out = os.environ['OUT']
bench = {'%d_%d_%d_%d' % (x['b'], x['s_q'], x['h_q'], x['s_k']): x['time_us'] for x in json.load(open(f'{out}/bench.json'))['results']}
for f in sorted(glob.glob(f'{out}/ncu_*.csv')):
    name = os.path.basename(f)[4:-4]
    t = collections.defaultdict(list)
    for row in csv.reader(l for l in open(f) if l.startswith('"')):
        if len(row) > 14 and row[0] != 'ID' and row[12] == 'gpu__time_duration.sum':
            t[row[4].split('<')[0].split('::')[-1]].append(float(row[14].replace(',', '')) / 1e3)
    print(name, 'bench %.1f us' % bench.get(name, -1), ' '.join('%s %s' % (k, ['%.1f' % v for v in vs]) for k, vs in t.items()))
PY
cd $OUT && tar cJf ncu_csv.tar.xz ncu_*.csv && rm ncu_*.csv
