"""The numbers ARTIFACT.md C.6 quotes, from device-run.sh's JSON lines:
microbenchmark time per engine and thread count (with the P004 ratios), stencil
retention at 4x, STREAM vs the MPI bandwidth of the same run, and the targets.

    python3 summarize.py OUT_DIR        (reads OUT_DIR/{micro,stencil,stream}.jsonl)
"""
import json
import os
import sys


def records(path):
    out = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line.startswith('{'):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


def engine_key(rec):
    p = rec.get('params', {})
    workers = p.get('uffd_workers')
    return p.get('engine', '?') + (f' ({workers} workers)' if workers else '')


def micro(recs):
    times, rates = {}, {}
    for r in recs:
        if r.get('metric') == 'time':
            times.setdefault(engine_key(r), {})[r['threads']] = r['value']
        if r.get('metric') == 'faults':
            rates.setdefault(engine_key(r), {})[r['threads']] = r.get('fault_rate')
    threads = sorted({t for ts in times.values() for t in ts})
    lines = ['microbenchmark (2^28 unsigned longs over 800 MiB, 1 MiB pages): write+read seconds',
             'engine'.ljust(22) + ''.join(f'{t:>9}' for t in threads)]
    for e, ts in sorted(times.items()):
        lines.append(e.ljust(22) + ''.join(f'{ts[t]:9.3f}' if t in ts else ' ' * 9 for t in threads))
    lines.append('fault rate (faults/s)')
    for e, rs in sorted(rates.items()):
        lines.append(e.ljust(22) + ''.join(f'{rs[t]:9.0f}' if rs.get(t) else ' ' * 9 for t in threads))
    t = {e.split()[0]: ts for e, ts in times.items() if '(12 workers)' not in e}
    ratio = lambda a, b, n: t[a][n] / t[b][n] if n in t.get(a, {}) and n in t.get(b, {}) else None  # noqa: E731
    for what, val, paper in (('R58/R3 time, 1 thread (P004-C1)', ratio('r58', 'r3', 1), 2.75),
                             ('R3/R77 time, 1 thread (P004-C2)', ratio('r3', 'r77', 1), 1.25),
                             ('R3/R77 time, 12 threads (P004-C2)', ratio('r3', 'r77', 12), 1.3)):
        lines.append(f'{what}: ' + (f'{val:.2f}' if val else 'n/a') + f'  (paper {paper})')
    for e, rs in sorted(rates.items()):
        if e.startswith('uffd') and rs.get(1) and rs.get(12):
            lines.append(f'{e}: fault rate 12 threads / 1 thread = {rs[12] / rs[1]:.2f}  (DLM-T5: >= 4)')
    return lines


def stencil(recs):
    lines = ['stencil (Effective MFLOPS vs problem/capacity; retention vs the first ratio)']
    by = {}
    for r in recs:
        if r.get('metric') == 'mflops':
            by.setdefault(engine_key(r), []).append((r['ratio'], r['value'], r.get('retention')))
    for e, pts in sorted(by.items()):
        pts.sort()
        lines.append(e.ljust(18) + '  '.join(f'{x:g}x: {v:8.0f} ({100 * k:5.1f}%)' for x, v, k in pts))
    lines.append('paper at 4x: R77 78%, R3 57%, R58 54% (P004-C4); DLM-T4/T6: >= 78%')
    return lines


def stream(recs):
    lines = ['STREAM (MB/s) vs arrays/capacity, and the MPI p2p bandwidth of the same run']
    mpi, by = {}, {}
    for r in recs:
        e = engine_key(r)
        if r.get('metric') == 'mpi_p2p_bw':
            mpi[e] = r['value']
        if r.get('metric') == 'bandwidth':
            by.setdefault(e, {}).setdefault(r['ratio'], {})[r['kernel']] = r['value']
    for e, ratios in sorted(by.items()):
        lines.append(f'{e}: MPI p2p {mpi.get(e, 0):.0f} MB/s')
        for x in sorted(ratios):
            k = ratios[x]
            over = k.get('triad', 0) / mpi[e] if mpi.get(e) else 0
            lines.append(f'   {x:g}x: ' + ' '.join(f'{n} {k[n]:8.0f}' for n in ('copy', 'scale', 'add', 'triad') if n in k)
                         + f'   triad/MPI {over:.2f}')
    lines.append('paper beyond 3x: R77 >= 1500, R3 ~1000, R58 ~600 MB/s over IB FDR (P004-C5); DLM-T1/T7: triad/MPI >= 0.5')
    return lines


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else 'dlm-out'
    lines = (micro(records(os.path.join(out, 'micro.jsonl'))) + [''] +
             stencil(records(os.path.join(out, 'stencil.jsonl'))) + [''] +
             stream(records(os.path.join(out, 'stream.jsonl'))))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
