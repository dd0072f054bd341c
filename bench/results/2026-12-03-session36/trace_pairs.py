#!/usr/bin/env python3
"""Session 36: per-pair clock64 stamps of the seesaw, FlashMLA's kernel (TRACE,fm,...) against ours (TRACE,ours,...
and PROD,ours,...), one CTA (part 10, both m-tiles). Stamps per consumer (see run5.sh for their places):
  consumer 0 / WG0: 0 pair start, 1 after Scale1Ready, 2 after P0Ready (fm: rO1sP0sV0RIssued), 3 after S(a+2)'s
  early boxes 0-3 were waited and issued, 4 after P_b V_b's wait and b's half-0 release (fm: its copy launch),
  5 after S(a+2)'s late boxes 4-8 were waited and issued, 6 after S(a+2) done;
  consumer 1 / WG1: 0 pair start, 1 after Scale0Ready, 2 after Scale1Ready (fm: sP0Ready), 3 after P_a V_a issued,
  4 after P_b V_b's wait and b's half-1 release (fm: copy launch), 5 after P_a V_a's wait and a's half-1 release
  (fm: copy launch), 6 after S(b+2) waited and issued, 8 after S(b+2) done.
Usage: trace_pairs.py FILE [FILE ...] (lines from the fm harness stdout and openmla-bench stderr)."""
import collections, statistics, sys

recs = collections.defaultdict(dict)   # (kernel, m) -> {(wg, block): [stamps]}
prod = collections.defaultdict(dict)   # (m, half) -> {block: clock}
for f in sys.argv[1:]:
    for line in open(f, errors='replace'):
        x = line.strip().split(',')
        if x[0] == 'TRACE' and len(x) == 14:
            k, m, w, blk = x[1], int(x[2]), int(x[3]), int(x[4])
            recs[(k, m)][(w, blk)] = [int(v) for v in x[5:14]]
        elif x[0] == 'PROD' and len(x) == 6:
            prod[(int(x[2]), int(x[3]))][int(x[4])] = int(x[5])

def med(v):
    return statistics.median(v) if v else float('nan')

for (k, m), r in sorted(recs.items()):
    blocks = sorted(b for (w, b) in r if w == 0 and (1, b) in r and (0, b + 2) in r)
    blocks = blocks[2:-2] if len(blocks) > 8 else blocks  # steady state only
    if not blocks:
        continue
    c0 = lambda b, i: r[(0, b)][i]
    c1 = lambda b, i: r[(1, b)][i]
    period = [c0(b + 2, 0) - c0(b, 0) for b in blocks]
    rows = [
        ('pair period (2 tiles)', period),
        ('C0: softmax a .. Scale1Ready', [c0(b, 1) - c0(b, 0) for b in blocks]),
        ('C0: Scale1Ready .. P0Ready', [c0(b, 2) - c0(b, 1) for b in blocks]),
        ('C0: P0Ready .. S(a+2) early boxes issued', [c0(b, 3) - c0(b, 2) for b in blocks]),
        ('C0: .. P_b V_b done (b half-0 release)', [c0(b, 4) - c0(b, 3) for b in blocks]),
        ('C0: .. S(a+2) late boxes waited+issued', [c0(b, 5) - c0(b, 4) for b in blocks]),
        ('C0: .. S(a+2) done', [c0(b, 6) - c0(b, 5) for b in blocks]),
        ('C1: start .. Scale0Ready', [c1(b, 1) - c1(b, 0) for b in blocks]),
        ('C1: Scale0Ready .. Scale1Ready', [c1(b, 2) - c1(b, 1) for b in blocks]),
        ('C1: Scale1Ready .. P_a V_a issued', [c1(b, 3) - c1(b, 2) for b in blocks]),
        ('C1: .. P_b V_b done (b half-1 release)', [c1(b, 4) - c1(b, 3) for b in blocks]),
        ('C1: .. P_a V_a done (a half-1 release)', [c1(b, 5) - c1(b, 4) for b in blocks]),
        ('C1: .. S(b+2) all boxes waited+issued', [c1(b, 6) - c1(b, 5) for b in blocks]),
        ('C1: .. S(b+2) done', [c1(b, 8) - c1(b, 6) for b in blocks]),
        ('late refill a+2: C1 a-half-1 release .. C0 late boxes issued', [c0(b, 5) - c1(b, 5) for b in blocks]),
        ('late refill b+2: C0 b-half-0 release .. C1 S(b+2) issued', [c1(b, 6) - c0(b, 4) for b in blocks]),
        ('C0 idle: P_b V_b done .. late boxes (wait share)', [c0(b, 5) - c0(b, 4) for b in blocks]),
    ]
    if k == 'ours':
        ph1, ph0 = prod.get((m, 1), {}), prod.get((m, 0), {})
        hop1 = [ph1[b + 2] - c1(b, 5) for b in blocks if b + 2 in ph1]
        hop0 = [ph0[b + 3] - c0(b, 4) for b in blocks if b + 3 in ph0]
        rows += [('producer hop: a half-1 release .. copy issued', hop1),
                 ('producer hop: b half-0 release .. copy issued', hop0),
                 ('a+2 half-1 copy issued .. C0 late boxes issued', [c0(b, 5) - ph1[b + 2] for b in blocks if b + 2 in ph1])]
    print(f'== {k}, m-tile {m}: {len(blocks)} pairs (blocks {blocks[0]}..{blocks[-1]}), median clocks')
    for name, v in rows:
        print(f'  {name:62s} {med(v):8.0f}')
    # The pair as one timeline: every stamp (and, for ours, the copy issues) relative to consumer 0's pair start.
    names0 = {0: 'C0 pair start (softmax a)', 1: 'C0 passed Scale1Ready', 2: 'C0 passed P0Ready (fm: rO1sP0sV0RIssued)',
              3: 'C0 S(a+2) boxes 0-3 issued', 4: 'C0 P_b V_b done, b half 0 released', 5: 'C0 S(a+2) boxes 4-8 issued',
              6: 'C0 S(a+2) done'}
    names1 = {0: 'C1 pair start', 1: 'C1 passed Scale0Ready', 2: 'C1 passed Scale1Ready (fm: sP0Ready)',
              3: 'C1 P_a V_a issued', 4: 'C1 P_b V_b done, b half 1 released', 5: 'C1 P_a V_a done, a half 1 released',
              6: 'C1 S(b+2) all boxes issued', 8: 'C1 S(b+2) done'}
    ev = collections.defaultdict(list)
    for b in blocks:
        t0 = c0(b, 0)
        for i, n in names0.items(): ev[n].append(c0(b, i) - t0)
        for i, n in names1.items(): ev[n].append(c1(b, i) - t0)
        ev['next pair: C0 start'].append(c0(b + 2, 0) - t0)
        if k == 'ours':
            for h in (0, 1):
                d = prod.get((m, h), {})
                if b + 2 in d: ev[f'copy of a+2 half {h} issued'].append(d[b + 2] - t0)
                if b + 3 in d: ev[f'copy of b+2 half {h} issued'].append(d[b + 3] - t0)
    print(f'   timeline (median clocks after C0 pair start):')
    for n, v in sorted(ev.items(), key=lambda kv: med(kv[1])):
        print(f'    {med(v):7.0f}  {n}')
