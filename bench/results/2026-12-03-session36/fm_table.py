#!/usr/bin/env python3
"""Session 36 tables: FlashMLA's kernel (scratch build "fm", decode kernel only, `fm` harness text output) against
openmla-bench JSONs of variants of ours in one A/B folder (files s<i>_<variant>_<round>.{txt,json}).
Usage: fm_table.py AB_DIR ANCHORS_CSV [variant ...]  (default: every variant found; "base" is the reference)."""
import csv, glob, json, re, statistics, sys

d = sys.argv[1]
anch = {}
for r in csv.DictReader(open(sys.argv[2])):
    if r['kernel'] == 'flashmla_bf16' and r['varlen'] == '0':
        anch[(int(r['b']), int(r['s_q']), int(r['h_q']), int(r['s_k']))] = float(r['time_us'])
rows, seen = {}, []
for p in sorted(glob.glob(d + '/s*_*_*.*')):
    m = re.match(r's(\d+)_(\w+?)_(\d)\.(json|txt)$', p.split('/')[-1])
    if not m:
        continue
    i, v = int(m.group(1)), m.group(2)
    if v == 'fm':
        mm = re.search(r'b=(\d+) s_q=(\d+) h_q=(\d+) s_k=(\d+).*median_us=([\d.]+)', open(p).read())
        if not mm:
            continue
        key, us = tuple(int(x) for x in mm.groups()[:4]), float(mm.group(5))
    else:
        x = json.load(open(p))['results'][0]
        if x.get('status') != 'ok':
            continue
        key, us = (x['b'], x['s_q'], x['h_q'], x['s_k']), x['time_us']
        if x.get('max_rel_err') is not None and (x['max_rel_err'] > 1e-2 or (x.get('max_lse_err') or 0) > 1e-4):
            print('CHECK FAILED', p)
        if x.get('device_errors'):
            print('DEVICE ERRORS', p)
    if v not in seen:
        seen.append(v)
    rows.setdefault((i, key), {}).setdefault(v, []).append(us)
variants = sys.argv[3:] or seen
others = [v for v in variants if v != 'base']
print('| b | s_q | h_q | s_k | FlashMLA anchor µs | ' + ' | '.join(f'{v} µs' for v in variants) + ' | ' +
      ' | '.join(f'base / {v}' for v in others) + ' |')
print('|---:|---:|---:|---:|---:|' + '---:|' * (len(variants) + len(others)))
for (i, k), v in sorted(rows.items()):
    med = {n: statistics.median(v[n]) for n in variants if n in v}
    cells = [f"{med[n]:.1f} ({'/'.join('%.1f' % t for t in v[n])})" if n in med else '-' for n in variants]
    ratios = [f"{med['base'] / med[n]:.3f}x" if n in med and 'base' in med else '-' for n in others]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {anch.get(k, float('nan')):.1f} | " + ' | '.join(cells) + ' | ' +
          ' | '.join(ratios) + ' |')
