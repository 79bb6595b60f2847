#!/usr/bin/env python3
# Reads twig16M_sass.csv.gz (ncu --page source --print-source sass --csv of one continuation+twig
# pass at Plummer 16M) and prints: warp instructions by opcode, by active lanes, the top stall
# locations, and the stores and loads with the most excessive L2 sectors.
import csv, collections, gzip, re, sys
rows = list(csv.reader(gzip.open(sys.argv[1] if len(sys.argv) > 1 else 'twig16M_sass.csv.gz', 'rt')))
hdr, data = rows[1], rows[2:]
col = {h: i for i, h in enumerate(hdr)}
def v(r, h):
    try: return float(r[col[h]])
    except ValueError: return 0.0
base = int(data[0][0], 16)
ie, ss = 'Instructions Executed', 'Warp Stall Sampling (All Samples)'
tot = sum(v(r, ie) for r in data); st = sum(v(r, ss) for r in data)
print(f'warp instructions {tot/1e6:.1f}M, stall samples {st:.0f}')
ops = collections.Counter()
for r in data:
    m = re.match(r'\s*(@!?U?P\w+\s+)?([A-Z0-9_]+)', r[1])
    if m: ops[m.group(2)] += v(r, ie)
print('by opcode:', ', '.join(f'{o} {100*n/tot:.1f}%' for o, n in ops.most_common(16)))
lanes = collections.Counter()
for r in data:
    t = v(r, 'Avg. Threads Executed')
    lanes['1-2' if t <= 2 else '3-8' if t <= 8 else '9-16' if t <= 16 else '17-32'] += v(r, ie)
print('by active lanes:', ', '.join(f'{k} {100*lanes[k]/tot:.1f}%' for k in ['1-2', '3-8', '9-16', '17-32']))
pf = sum(v(r, ie) for r in data if 0x13400 <= int(r[0], 16) - base < 0x14000)
print(f'prefetch hints (0x13400-0x14000, read from the SASS): {pf/1e6:.1f}M ({100*pf/tot:.1f}%)')
print('top stall locations:')
for r in sorted(data, key=lambda r: -v(r, ss))[:6]:
    print(f'  +{int(r[0],16)-base:05x} {100*v(r, ss)/st:4.1f}%  {r[1].strip()[:60]}')
ex, th = 'L2 Theoretical Sectors Global Excessive', 'L2 Theoretical Sectors Global'
print(f'excessive L2 sectors {sum(v(r, ex) for r in data)/1e6:.1f}M of {sum(v(r, th) for r in data)/1e6:.1f}M')
for r in sorted(data, key=lambda r: -v(r, ex))[:12]:
    print(f'  +{int(r[0],16)-base:05x} excess {v(r, ex)/1e6:.2f}M of {v(r, th)/1e6:.2f}M  {r[1].strip()[:60]}')
