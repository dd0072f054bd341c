import csv, sys, statistics as st, collections
# label,cta,smid,segs,tiles,entry,waited,copy0,q,box0,loop_end,end
rows = collections.defaultdict(list)
for path in sys.argv[1:]:
    run = path.split('_')[-1].split('.')[0]
    for r in csv.reader(open(path)):
        label = r[0].split(' ')
        key = ' '.join(label[:4])
        rows[key].append(dict(run=run, cta=int(r[1]), smid=int(r[2]), segs=int(r[3]), tiles=int(r[4]),
                              t=[float(x) for x in r[5:12]]))
for key, rs in rows.items():
    print('==', key)
    for run in sorted({x['run'] for x in rs}):
        busy = [x for x in rs if x['run'] == run and x['segs'] > 0 and x['t'][6] > 0]
        if not busy: continue
        ends = sorted(x['t'][6] for x in busy)
        med = st.median(ends)
        late = [x for x in busy if x['t'][6] > med + 0.5 * (ends[-1] - med)]
        print(' run', run, 'n', len(busy), 'end min/med/max %.2f/%.2f/%.2f' % (ends[0], med, ends[-1]))
        by = collections.defaultdict(list)
        for x in busy: by[(x['segs'], x['tiles'])].append(x['t'][6])
        print('   end by (segs,tiles):', {k: '%.2f(%d)' % (st.median(v), len(v)) for k, v in sorted(by.items())})
        # correlation of end with box0 and tiles
        def corr(a, b):
            ma, mb = st.mean(a), st.mean(b)
            sa = sum((x - ma) ** 2 for x in a) ** .5; sb = sum((y - mb) ** 2 for y in b) ** .5
            return sum((x - ma) * (y - mb) for x, y in zip(a, b)) / (sa * sb) if sa and sb else 0
        e = [x['t'][6] for x in busy]
        print('   corr(end, box0) %.2f corr(end, tiles) %.2f corr(end, segs) %.2f' % (
            corr(e, [x['t'][4] for x in busy]), corr(e, [x['tiles'] for x in busy]), corr(e, [x['segs'] for x in busy])))
        print('   late smids:', sorted(x['smid'] for x in late))
    # cross-run SM consistency: rank of end per smid
    runs = sorted({x['run'] for x in rs})
    if len(runs) == 2:
        m = [{x['smid']: x['t'][6] for x in rs if x['run'] == r and x['segs'] > 0 and x['t'][6] > 0} for r in runs]
        common = sorted(set(m[0]) & set(m[1]))
        if len(common) > 10:
            a = [m[0][s] for s in common]; b = [m[1][s] for s in common]
            ma, mb = st.mean(a), st.mean(b)
            sa = sum((x - ma) ** 2 for x in a) ** .5; sb = sum((y - mb) ** 2 for y in b) ** .5
            print('  corr of per-SM end across runs: %.2f (%d SMs)' % (sum((x - ma) * (y - mb) for x, y in zip(a, b)) / (sa * sb), len(common)))
