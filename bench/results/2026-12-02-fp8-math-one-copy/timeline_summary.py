import sys, collections, statistics
ev = collections.defaultdict(dict)  # (role, tile) -> {ev: clk}
for line in open(sys.argv[1]):
    if not line.startswith('TL'): continue
    _, r, t, e, c = line.split(); ev[(int(r), int(t))][int(e)] = int(c)
pairs = sorted(t for (r, t) in ev if r == 0)
base = {t: ev[(0, t)][0] for t in pairs}
names = {0: {0:'top',1:'softmax done',2:'Scale0',3:'vt_a ready',4:'PV_a done',5:'Scale1',6:'P_a stored',7:'P0',8:'vt_b ready',9:'S next issued',10:'PV_b done',11:'S next done'},
         1: {0:'top',1:'Scale0',2:'softmax done',3:'Scale1',4:'vt_b ready',5:'PV_b issued',6:'P0',7:'vt_a ready',8:'PVs done',9:'S next issued',10:'S next done'},
         2: {0:'top',1:'vt_empty',2:'k_full',3:'transposed',10:'issue start',11:'k_empty ok'},
         3: {0:'top',1:'vt_empty',2:'k_full',3:'transposed',10:'issue start',11:'k_empty ok'}}
period = [base[pairs[i+1]] - base[pairs[i]] for i in range(len(pairs)-1)]
print("pair period (clk): median", statistics.median(period), period)
for r in (0, 1):
    print(f"consumer {r}: event offsets from c0's pair top (median over pairs)")
    for e in sorted(names[r]):
        vals = [ev[(r, t)][e] - base[t] for t in pairs if e in ev[(r, t)]]
        if vals: print(f"  {names[r][e]:>14}: {statistics.median(vals):7.0f}  (min {min(vals)}, max {max(vals)})")
for r in (2, 3):
    print(f"producer role {r}: per page offsets from c0's top of the pair containing the page")
    for e in sorted(names[r]):
        vals = []
        for t in range(min(pairs), max(pairs)+2):
            if (r, t) in ev and e in ev[(r, t)]:
                pt = t - (t - min(pairs)) % 2
                if pt in base: vals.append((t % 2, ev[(r, t)][e] - base[pt]))
        for par in (0, 1):
            v = [x for p_, x in vals if p_ == par]
            if v: print(f"  {'ab'[par]} {names[r][e]:>12}: {statistics.median(v):7.0f} (min {min(v)}, max {max(v)})")
