#!/bin/bash
# Session 36 run 1: FlashMLA's dense sm90 decode kernel beside ours on this H200.
# fm = a scratch build of FlashMLA's kernel (decode kernel only, no combine; built outside the repository,
# record: ../2026-12-03-h200-flashmla-profile.md); base = openmla-bench (sm90); res = the same binary with
# OPENMLA_EXP_RESIDENT_KV=1 (timing only: after a CTA's first two tiles the producer completes the boxes without
# copying, so the seesaw runs on stale pages with no refill latency). 1) fm's correctness check against a float64
# CPU reference; 2) same-run A/B, each shape by the three back to back, the order reversed in round 2;
# 3) Nsight Compute on both kernels at b=128, s_q=1, h_q=128, 16K; 4) fm's resource usage and SASS.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s36/bench.xz > $P/openmla-bench; xz -dc .carry/s36/fm.xz > $P/fm; chmod +x $P/openmla-bench $P/fm
export OPENMLA_COMMIT=${COMMIT:-unknown}
mkdir -p $OUT/ab
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
timeout 300 $P/fm --check > $OUT/fm_check.txt 2>&1; echo "fm check rc=$?"; cat $OUT/fm_check.txt
S="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,64,1024 128,1,16,16384"
for r in 1 2; do
  order="fm base res"; [ $r = 2 ] && order="res base fm"
  i=0
  for s in $S; do
    i=$((i + 1))
    for v in $order; do
      case $v in
        fm) timeout 120 $P/fm --shape $s --replays 10 > $OUT/ab/s${i}_fm_$r.txt 2>&1 || echo "fm $s $r failed" ;;
        base) timeout 120 $P/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) \
                --json $OUT/ab/s${i}_base_$r.json > /dev/null 2>&1 || echo "base $s $r failed" ;;
        res) OPENMLA_EXP_RESIDENT_KV=1 timeout 120 $P/openmla-bench --backend sm90 --shape $s --check-samples 0 \
                --json $OUT/ab/s${i}_res_$r.json > /dev/null 2>&1 || echo "res $s $r failed" ;;
      esac
    done
  done
done
python3 - $OUT/ab .carry/s36/h200-anchors.csv <<'PY' | tee $OUT/table_flashmla.md
import csv, glob, json, re, statistics, sys
d = sys.argv[1]
anch = {}
for r in csv.DictReader(open(sys.argv[2])):
    if r['kernel'] == 'flashmla_bf16' and r['varlen'] == '0':
        anch[(int(r['b']), int(r['s_q']), int(r['h_q']), int(r['s_k']))] = float(r['time_us'])
rows = {}
for p in glob.glob(d + '/s*_*_*.*'):
    m = re.match(r's(\d+)_(\w+)_(\d)\.(json|txt)', p.split('/')[-1]); i, v = int(m.group(1)), m.group(2)
    if v == 'fm':
        t = open(p).read(); mm = re.search(r'b=(\d+) s_q=(\d+) h_q=(\d+) s_k=(\d+).*median_us=([\d.]+)', t)
        if not mm: continue
        key = tuple(int(x) for x in mm.groups()[:4]); us = float(mm.group(5))
    else:
        x = json.load(open(p))['results'][0]
        if x.get('status') != 'ok': continue
        key = (x['b'], x['s_q'], x['h_q'], x['s_k']); us = x['time_us']
        if v == 'base' and x.get('max_rel_err') is not None and (x['max_rel_err'] > 1e-2 or (x.get('max_lse_err') or 0) > 1e-4):
            print('CHECK FAILED', p)
    rows.setdefault((i, key), {}).setdefault(v, []).append(us)
print('| b | s_q | h_q | s_k | FlashMLA anchor µs | fm decode-only µs | ours µs | ours resident-KV µs | ours / fm speed | resident / base speed |')
print('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
for (i, k), v in sorted(rows.items()):
    f = lambda n: statistics.median(v[n]) if n in v else float('nan')
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {anch.get(k, float('nan')):.1f} | {f('fm'):.1f} ({'/'.join('%.1f' % x for x in v.get('fm', []))}) | "
          f"{f('base'):.1f} ({'/'.join('%.1f' % x for x in v.get('base', []))}) | {f('res'):.1f} | {f('fm') / f('base'):.3f}x | {f('base') / f('res'):.3f}x |")
PY
# 3) Nsight Compute, one launch each, the same sections.
SECT="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy"
timeout 240 ncu --clock-control none --kernel-name regex:flash_fwd_splitkv_mla_kernel --launch-skip 2 --launch-count 1 $SECT \
  --import-source no -f -o $OUT/ncu_fm $P/fm --shape 128,1,128,16384 --replays 2 > $OUT/ncu_fm_run.txt 2>&1; echo "ncu fm rc=$?"
timeout 240 ncu --clock-control none --kernel-name regex:decode_kernel --launch-skip 3 --launch-count 1 $SECT \
  --import-source no -f -o $OUT/ncu_ours $P/openmla-bench --grid all --backend sm90 --format bf16 \
  --filter "b=128,s_q=1,h_q=128,s_k=16384,varlen=0" --replays 5 --check-samples 0 --json /dev/null > $OUT/ncu_ours_run.txt 2>&1; echo "ncu ours rc=$?"
for k in fm ours; do
  ncu -i $OUT/ncu_$k.ncu-rep --page details --csv > $OUT/ncu_${k}_details.csv 2>/dev/null
  ncu -i $OUT/ncu_$k.ncu-rep --page source --csv --print-source sass > $OUT/ncu_${k}_source.csv 2>/dev/null
done
python3 - $OUT <<'PY' | tee $OUT/ncu_compare.txt
import csv, sys, collections
d = sys.argv[1]
want = ['Duration', 'Elapsed Cycles', 'SM Frequency', 'Compute (SM) Throughput', 'Memory Throughput', 'DRAM Throughput',
        'Executed Ipc Active', 'Issue Slots Busy', 'Registers Per Thread', 'Dynamic Shared Memory Per Block', 'Threads',
        'Warp Cycles Per Issued Instruction', 'Avg. Active Threads Per Warp', 'L2 Hit Rate', 'L1/TEX Hit Rate', 'Mem Busy', 'Max Bandwidth']
for k in ('fm', 'ours'):
    print('==', k)
    for r in csv.DictReader(open(f'{d}/ncu_{k}_details.csv')):
        if r['Metric Name'] in want or 'Pipe' in r['Metric Name'] or 'Tensor' in r['Metric Name'] or 'Stall' in r['Metric Name']:
            print(f"  {r['Section Name'][:28]:28s} {r['Metric Name'][:60]:60s} {r['Metric Value']:>14s} {r['Metric Unit']}")
for k in ('fm', 'ours'):
    rows = list(csv.reader(open(f'{d}/ncu_{k}_source.csv')))
    hi = next(i for i, r in enumerate(rows) if 'Source' in r and len(r) > 5)
    hdr = rows[hi]; data = rows[hi + 1:]
    col = lambda n: next((i for i, h in enumerate(hdr) if h.strip() == n), None)
    src, samp = col('Source'), col('Warp Stall Sampling (All Samples)') or col('Warp Stall Sampling (All Cycles)')
    reasons = [i for i, h in enumerate(hdr) if h.startswith('stall_')]
    num = lambda x: float(x.replace(',', '')) if x.strip() not in ('', '-') else 0.0
    tot = sum(num(r[samp]) for r in data if len(r) > samp)
    agg = collections.Counter()
    for r in data:
        for i in reasons:
            if len(r) > i: agg[hdr[i]] += num(r[i])
    s = sum(agg.values()) or 1
    print(f'== {k}: samples {tot:.0f}; stall reasons (% of reason samples):')
    print('  ' + ', '.join(f'{n[6:]} {v / s * 100:.1f}' for n, v in agg.most_common(12)))
    ops = collections.Counter()
    for r in data:
        if len(r) > samp: ops[r[src].split()[0] if r[src].split() else '?'] += num(r[samp])
    print('  samples by opcode: ' + ', '.join(f'{o} {v / tot * 100:.1f}' for o, v in ops.most_common(14)))
    top = sorted(data, key=lambda r: -num(r[samp]) if len(r) > samp else 0)[:30]
    for r in top:
        rs = sorted(((num(r[i]), hdr[i][6:]) for i in reasons), reverse=True)[:3]
        print(f"  {num(r[samp]) / tot * 100:5.1f}% {r[src][:64]:64s} " + ' '.join(f'{n}={v:.0f}' for v, n in rs if v > 0))
PY
cuobjdump -res-usage $P/fm 2>&1 | grep -A1 flash_fwd | head -4 > $OUT/fm_resources.txt
cuobjdump -sass $P/fm > $P/fm.sass 2>&1
python3 - $P/fm.sass <<'PY' | tee -a $OUT/fm_resources.txt
import collections, re, sys
t = open(sys.argv[1]).read()
k = t[t.find('Function : _Z29flash_fwd_splitkv_mla_kernel'):]
k = k[:k.find('.....', 100)] if '.....' in k[100:] else k
ops = collections.Counter(m.group(1).split('.')[0] for m in re.finditer(r'/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)', k))
print('fm kernel SASS instructions:', sum(ops.values()))
print(', '.join(f'{o} {n}' for o, n in ops.most_common(30)))
PY
xz -9 -c $P/fm.sass > $OUT/fm_sass.xz
cd $OUT && tar cJf ab_logs.tar.xz ab && rm -r ab && tar cJf ncu_reports.tar.xz ncu_fm.ncu-rep ncu_ours.ncu-rep ncu_*_details.csv ncu_*_source.csv ncu_*_run.txt && rm ncu_*.ncu-rep ncu_*_details.csv ncu_*_source.csv ncu_*_run.txt
ls -la $OUT
