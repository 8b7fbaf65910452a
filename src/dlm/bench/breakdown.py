"""The per-fault timing table of fault-breakdown.sh: for every engine, P004's timing
points (mean us per fault; median of the runs, min..max) in the microbenchmark and in
the stencil at each ratio, the share of the phase's wall time the faulting thread
waited, the claims' times and ratios from the runs without timing, and what timing
every fault costs.

    python3 breakdown.py OUT_DIR             (reads OUT_DIR/<experiment>/<engine>-<rep>.jsonl)
    python3 breakdown.py --markdown OUT_DIR  the per-fault medians as one Markdown table
"""
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import records  # noqa: E402  (one JSON-lines reader for both tables)

POINTS = ('a', 'b', 'q', 'c', 'd', 'wake', 'stall', 'exchange')
ENGINES = ('r3', 'r58', 'r77', 'uffd')


def runs(out, exp):
    """{engine: [records of run 1, run 2, ...]} of one experiment."""
    by = {}
    for path in sorted(glob.glob(os.path.join(out, exp, '*.jsonl'))):
        m = re.fullmatch(r'(\w+)-(\d+)\.jsonl', os.path.basename(path))
        if not m:
            continue
        recs = records(path)
        if any('metric' in r for r in recs):
            by.setdefault(m.group(1), []).append((int(m.group(2)), recs))
    return {e: [recs for _, recs in sorted(rs)] for e, rs in by.items()}


def spread(values):
    """'median (min..max)' of the runs' values; '-' where there are none."""
    vs = [v for v in values if v is not None]
    if not vs:
        return '-'
    fmt = (lambda x: f'{x:.3g}') if max(abs(v) for v in vs) < 10 else (lambda x: f'{x:.0f}')
    med = statistics.median(vs)
    return fmt(med) if len(vs) == 1 else f'{fmt(med)} ({fmt(min(vs))}..{fmt(max(vs))})'


def pick(recs, metric, **match):
    return [r for r in recs if r.get('metric') == metric and all(r.get(k) == v for k, v in match.items())]


def point_table(title, by_engine, **match):
    lines = [title, 'engine  faults    ' + ''.join(f'{p:>22}' for p in POINTS) + '   waited/wall']
    for e in ENGINES:
        rs = by_engine.get(e)
        if not rs:
            continue
        faults = [f[0]['value'] for f in (pick(r, 'faults', **match) for r in rs) if f]
        cells = {'mean': [], 'p50': [], 'p99': []}
        for p in POINTS:
            lines_p = [x[0] if x and x[0]['n'] else None for x in (pick(r, 'fault_time', point=p, **match) for r in rs)]
            for stat, key in (('mean', 'value'), ('p50', 'p50_us'), ('p99', 'p99_us')):
                cells[stat].append(spread([x[key] if x else None for x in lines_p]))
        waited = []
        for r in rs:
            pts = {x['point']: x for x in pick(r, 'fault_time', **match)}
            if not pts or not pts['exchange']['wall_s']:
                continue
            w = pts['stall']['sum_s'] if pts['stall']['n'] else pts['exchange']['sum_s'] - pts['d']['sum_s']
            waited.append(100 * w / pts['exchange']['wall_s'])
        lines.append(f'{e:6}  {spread(faults):>8}  ' + ''.join(f'{c:>22}' for c in cells['mean'])
                     + f'   {spread(waited)}%')
        for stat in ('p50', 'p99'):
            lines.append(f'{"  " + stat:6}  {"":>8}  ' + ''.join(f'{c:>22}' for c in cells[stat]))
    return lines


def markdown(out):
    """One row per run and engine: each point's per-fault median (a run's p50), median of
    the runs (min..max)."""
    rows = ['| run | engine | faults | ' + ' | '.join(POINTS) + ' | waited/wall |',
            '|' + '---|' * (len(POINTS) + 4)]
    micro, stencil = runs(out, 'micro'), runs(out, 'stencil')
    ratios = sorted({r['ratio'] for rs in stencil.values() for recs in rs for r in pick(recs, 'faults')})
    for label, by, match in ([('micro, 1 thread', micro, {'threads': 1})] +
                             [(f'stencil {x:g}x, 1 thread', stencil, {'ratio': x}) for x in ratios]):
        for e in ENGINES:
            rs = by.get(e)
            if not rs:
                continue
            faults = spread([f[0]['value'] for f in (pick(r, 'faults', **match) for r in rs) if f])
            cells = []
            for p in POINTS:
                xs = [pick(r, 'fault_time', point=p, **match) for r in rs]
                cells.append(spread([x[0]['p50_us'] for x in xs if x and x[0]['n']]))
            waited = []
            for r in rs:
                pts = {x['point']: x for x in pick(r, 'fault_time', **match)}
                if pts and pts['exchange']['wall_s']:
                    w = pts['stall']['sum_s'] if pts['stall']['n'] else pts['exchange']['sum_s'] - pts['d']['sum_s']
                    waited.append(100 * w / pts['exchange']['wall_s'])
            rows.append(f'| {label} | {e} | {faults} | ' + ' | '.join(cells) + f' | {spread(waited)}% |')
    print('\n'.join(rows))


def main():
    if sys.argv[1:2] == ['--markdown']:
        markdown(sys.argv[2] if len(sys.argv) > 2 else 'dlm-breakdown')
        return
    out = sys.argv[1] if len(sys.argv) > 1 else 'dlm-breakdown'
    lines = []
    env = os.path.join(out, 'env.txt')
    if os.path.exists(env):
        lines += ['machine: ' + '; '.join(line.strip() for line in open(env) if line.strip()), '']
    lines += ['mean us per fault, median of the runs (min..max); the median and p99 of each run likewise; '
              'waited/wall: the thread\'s time in faults (stall; uffd: exchange - d) over the phase', '']
    micro = runs(out, 'micro')
    lines += point_table('microbenchmark, 1 thread (write a[i]=i, read one element per page)', micro, threads=1)
    stencil = runs(out, 'stencil')
    ratios = sorted({r['ratio'] for rs in stencil.values() for recs in rs for r in pick(recs, 'faults')})
    for x in ratios:
        lines += [''] + point_table(f'stencil, 1 thread, problem/capacity {x:g}', stencil, ratio=x)

    # The claims' times, without timing.
    plain = runs(out, 'micro-plain')
    t1 = {e: [pick(r, 'time', threads=1)[0]['value'] for r in rs if pick(r, 'time', threads=1)]
          for e, rs in plain.items()}
    lines += ['', 'microbenchmark time without timing, 1 thread (s): ' +
              '; '.join(f'{e} {spread(t1[e])}' for e in ENGINES if t1.get(e))]

    def ratio(a, b):
        n = min(len(t1.get(a, [])), len(t1.get(b, [])))
        return spread([t1[a][i] / t1[b][i] for i in range(n)]) if n else '-'
    lines += [f'  R3/R77 {ratio("r3", "r77")} (P004 1.25), R58/R3 {ratio("r58", "r3")} (P004 2.75), '
              f'R3/uffd {ratio("r3", "uffd")} (per run, same round)']
    splain = runs(out, 'stencil-plain')
    for e in ENGINES:
        rs = splain.get(e)
        if rs:
            cells = [f'{x:g}x {spread([m[0]["value"] for m in (pick(r, "mflops", ratio=x) for r in rs) if m])}'
                     for x in ratios]
            keep = spread([100 * m[0]['retention'] for m in (pick(r, 'mflops', ratio=ratios[-1]) for r in rs) if m])
            lines.append(f'stencil without timing {e}: MFLOPS ' + ', '.join(cells) + f'; kept at {ratios[-1]:g}x: {keep}%')

    # What timing costs: its operations alone, then paired runs (same round), each the
    # median of its arrays.
    lines += ['', 'instrumentation overhead:']
    cost = {}
    for path in sorted(glob.glob(os.path.join(out, 'timing-cost-*.jsonl'))):
        for r in records(path):
            cost.setdefault(r['metric'] + (':' + r['engines'] if 'engines' in r else ''), []).append(r)
    cost = {k: sorted(v, key=lambda r: r['value'])[len(v) // 2] for k, v in cost.items()}  # the median run
    for e in ENGINES:
        key = 'per_fault_ns:' + ('uffd' if e == 'uffd' else 'r3 r58 r77')
        rs = micro.get(e)
        if key in cost and rs:
            per_fault = [pick(r, 'fault_time', point='exchange', threads=1) for r in rs]
            exch = statistics.median(x[0]['value'] for x in per_fault if x and x[0]['n'])
            c = cost[key]
            lines.append(f'  {e}: stamps and recording {c["value"]:.0f} ns per fault ({c["on_thread_path_ns"]:.0f} ns '
                         f'before the thread resumes) = {100 * c["value"] * 1e-3 / exch:.2f}% of its '
                         f'{exch:.0f} us exchange (dlm-timing-cost; stamp {cost["tick_ns"]["value"]:.1f} ns)')
    lines.append('  paired runs (microbenchmark 4x the quick size, 5 arrays per run, with and without '
                 '--fault-timing back to back; run-to-run noise included):')
    on, off = runs(out, 'overhead-on'), runs(out, 'overhead-off')
    for e in ENGINES:
        if not on.get(e) or not off.get(e):
            continue
        rel, per_fault = [], []
        for a, b in zip(on[e], off[e]):
            ta = statistics.median(r['value'] for r in pick(a, 'time'))
            tb = statistics.median(r['value'] for r in pick(b, 'time'))
            faults = statistics.median(r['value'] for r in pick(a, 'faults'))
            rel.append(100 * (ta / tb - 1))
            per_fault.append((ta - tb) / faults * 1e6)
        lines.append(f'    {e}: time with / without - 1 = {spread(rel)}%, i.e. {spread(per_fault)} us per fault')

    # The host's own costs for the steps the points are made of.
    probe = {}
    for path in sorted(glob.glob(os.path.join(out, 'host-probe-*.jsonl'))):
        for r in records(path):
            if 'metric' in r:
                probe.setdefault(r['metric'], []).append(r)
            elif r.get('status') == 'unsupported':
                probe.setdefault(r['step'], []).append(r)
    if probe:
        page = next(iter(probe.values()))[0].get('params', {}).get('page_size', 0)
        lines += ['', f'host steps per {page // 1024} KiB page (dlm-host-probe on rank 0\'s machine; median of each '
                      'run\'s median, min..max of them; p99 likewise):']
        for step, rs in probe.items():
            if 'value' not in rs[0]:
                lines.append(f'  {step:18} not measured: {rs[0].get("reason")}')
                continue
            lines.append(f'  {step:18} {spread([r["value"] for r in rs]):>22} us   p99 '
                         f'{spread([r["p99_us"] for r in rs])}   ({rs[0]["what"]})')
    print('\n'.join(lines))


main()
