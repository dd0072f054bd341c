# Median time per (shape, variant) from the JSON files <tag>_<variant>_<round>.json of one folder, and ratios.
import json, glob, os, statistics, collections, sys
out = sys.argv[1]
t = collections.defaultdict(list); err = {}
for f in glob.glob(out + '/*.json'):
    tag, v, r = os.path.basename(f)[:-5].split('_')
    for x in json.load(open(f))['results']:
        if x.get('status') != 'ok': continue
        key = (tag, x['b'], x['s_q'], x['h_q'], ('~%d' % x['mean_seqlen']) if x['varlen'] else x['s_k'])
        t[key + (v,)].append(x['time_us'])
        if x.get('max_rel_err') is not None: err[key + (v,)] = max(err.get(key + (v,), 0), x['max_rel_err'])
keys = sorted({k[:-1] for k in t}, key=lambda k: (k[0], k[2] * k[3], k[1], str(k[4])))
for k in keys:
    vs = {v: statistics.median(t[k + (v,)]) for v in ('64', '32', '16', 'portable') if k + (v,) in t}
    new = vs.get('32', vs.get('16'))
    cells = ' '.join('%s %.1f' % (v, x) for v, x in vs.items())
    e = max((err.get(k + (v,), 0) for v in ('32', '16')), default=0)
    print('%-4s b=%-3d s_q=%d h_q=%d s_k=%-6s | %s | narrow/wide %.3fx%s | err %.1e' % (k[0], k[1], k[2], k[3], k[4], cells,
          vs['64'] / new if '64' in vs and new else 0, (' narrow/portable %.3fx' % (vs['portable'] / new)) if 'portable' in vs and new else '', e))
