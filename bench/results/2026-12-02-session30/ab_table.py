# Median µs per (shape, variant) from JSON files <tag>_<variant>_<round>.json in one folder, and each
# variant's speedup over the first one named. Usage: ab_table.py DIR VARIANT [VARIANT ...]
import collections, glob, json, os, statistics, sys

out, order = sys.argv[1], sys.argv[2:]
times = collections.defaultdict(list)
for path in glob.glob(out + '/*.json'):
    tag, variant, _ = os.path.basename(path)[:-5].split('_')
    for x in json.load(open(path))['results']:
        if x.get('status') != 'ok':
            continue
        s_k = ('~%d' % x['mean_seqlen']) if x['varlen'] else str(x['s_k'])
        times[(tag, x['b'], x['s_q'], x['h_q'], s_k, variant)].append(x['time_us'])
shapes = sorted({k[:5] for k in times}, key=lambda k: (k[0], k[2] * k[3], k[1], len(k[4]), k[4]))
print('| mode/rows | b | s_q | h_q | s_k | ' + ' | '.join(f'{v} µs' for v in order) + ' | ' +
      ' | '.join(f'{v} / {order[0]}' for v in order[1:]) + ' |')
print('|---|---:|---:|---:|---|' + '---:|' * (2 * len(order) - 1))
for k in shapes:
    med = {v: statistics.median(times[k + (v,)]) for v in order if k + (v,) in times}
    cells = [f'{med[v]:.1f}' if v in med else '-' for v in order]
    ratios = [f'{med[order[0]] / med[v]:.3f}x' if v in med and order[0] in med else '-' for v in order[1:]]
    print('| ' + ' | '.join(str(x) for x in k) + ' | ' + ' | '.join(cells + ratios) + ' |')
