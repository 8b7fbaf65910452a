"""P004 (DLM remote paging, R3 / R58 / R77 and userfaultfd): the microbenchmark, the
stencil and STREAM, one panel per benchmark holding every engine's case; medians over
the repeats with min..max bars (the same medians the verdict tables print), the
paper's numbers marked; the per-fault timing table (figs. 2.4/3.2)."""
import re
from .common import (MEASURED_STYLE, PAPER_STYLE, V, data, errbars, errline, figure, hollow, legend, matching,
                     note_hollow, paper, paper_tick, plain_formatter, series, why_empty)

ENGINES = ('r3', 'r58', 'r77', 'uffd')
ENGINE_NAMES = {'r3': 'R3', 'r58': 'R58', 'r77': 'R77', 'uffd': 'uffd'}
ENGINE_COLORS = {'r3': '#1f77b4', 'r58': '#ff7f0e', 'r77': '#2ca02c', 'uffd': '#9467bd'}


def engine(case):
    return case['params'].get('engine')


def engines_of(members):
    """{engine: case} of the members with records, in the paper's order."""
    out = {engine(c): c for c in members if not why_empty(c)}
    return {e: out[e] for e in sorted(out, key=lambda e: ENGINES.index(e) if e in ENGINES else len(ENGINES))}


def _not_run_engines(ax, members):
    ran = engines_of(members)
    for e in ENGINES:
        if any(engine(c) == e for c in members) and e not in ran:
            ax.plot([], [], color=ENGINE_COLORS[e], alpha=0.35, linewidth=4,
                    label=f'{ENGINE_NAMES[e]}: not run (see note)')


def _draw_dlm_micro(ax, panel):
    """Fig. 2.3/3.1: time per engine, bars grouped by thread count; the paper's
    ratios drawn as R3's measured time x the paper's factor."""
    engines = engines_of(panel['members'])
    times = {e: {k[0]: s for k, s in series(c, 'time', by=('threads',)).items()} for e, c in engines.items()}
    threads = sorted({t for ts in times.values() for t in ts})
    if not threads:
        return False
    width = 0.8 / max(1, len(engines))
    any_hollow = False
    for i, (e, ts) in enumerate(times.items()):
        h = hollow(engines[e])
        any_hollow = any_hollow or h
        xs = [k + (i - (len(engines) - 1) / 2) * width for k, t in enumerate(threads) if t in ts]
        stats = [ts[t] for t in threads if t in ts]
        errbars(ax, xs, stats, width, ENGINE_COLORS.get(e, 'grey'),
                labels=[ENGINE_NAMES.get(e, e)] + [None] * (len(xs) - 1), hollows=[h] * len(xs))
    r58_over_r3, label = paper('P004-C1')
    r3_over_r77, _ = paper('P004-C2')
    r3 = times.get('r3', {})
    marks = [('r58', 1, r58_over_r3), ('r77', 1, 1 / r3_over_r77['t1']), ('r77', 12, 1 / r3_over_r77['t12'])]
    first = True
    for e, t, factor in marks:
        if e in times and t in threads and t in r3:
            i = list(times).index(e)
            x = threads.index(t) + (i - (len(engines) - 1) / 2) * width
            paper_tick(ax, x, r3[t]['median'] * factor, width * 1.3,
                       label=f'{label}: R3 here × the paper\'s ratio' if first else None)
            first = False
    _not_run_engines(ax, panel['members'])
    note_hollow(ax, any_hollow, bars=True)
    ax.set_xticks(range(len(threads)))
    ax.set_xticklabels([str(t) for t in threads])
    ax.set_xlabel('OpenMP threads of the compute rank')
    ax.set_ylabel('write + read time (s; median, min..max)')
    ax.set_ylim(bottom=0)
    legend(ax)
    return True


def _draw_dlm_stencil(ax, panel):
    """Fig. 4.2: Effective MFLOPS vs problem/capacity; the paper's retention at 4x
    drawn as each engine's in-memory MFLOPS x the paper's percentage."""
    engines = engines_of(panel['members'])
    keep, label = paper('P004-C4')
    drawn = any_hollow = False
    for e, c in engines.items():
        pts = [(k[0], s) for k, s in series(c, 'mflops', by=('ratio',)).items()]
        if not pts:
            continue
        h = hollow(c)
        errline(ax, pts, ENGINE_NAMES.get(e, e), h, color=ENGINE_COLORS.get(e, 'grey'))
        drawn, any_hollow = True, any_hollow or h
        base = min(pts)[1]['median']
        level = keep.get(ENGINE_NAMES.get(e, e))
        if level is not None:
            ax.plot([4], [base * level / 100], marker='_', markersize=16, markeredgewidth=2,
                    color=ENGINE_COLORS.get(e, 'grey'), linestyle='none',
                    label=f'{label}: {ENGINE_NAMES[e]} keeps {level}% at 4x')
    if not drawn:
        return False
    _not_run_engines(ax, panel['members'])
    note_hollow(ax, any_hollow)
    ax.axvline(1, color='#888888', linewidth=0.8, linestyle=':')
    ax.set_xscale('log', base=2)
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.set_xlabel('problem (both grids) / compute capacity')
    ax.set_ylabel('Effective MFLOPS')
    ax.set_ylim(bottom=0)
    legend(ax)
    return True


def _draw_dlm_stream(ax, panel):
    """Figs. 4.4-4.7: triad MB/s vs arrays/capacity per engine, the MPI p2p bandwidth
    measured in the same runs, and the paper's levels beyond 3x memory."""
    engines = engines_of(panel['members'])
    levels, label = paper('P004-C5')
    mpi, drawn, any_hollow = [], False, False
    for e, c in engines.items():
        pts = [(k[0], s) for k, s in series(c, 'bandwidth', by=('ratio',), kernel='triad').items()]
        if pts:
            h = hollow(c)
            errline(ax, pts, ENGINE_NAMES.get(e, e) + ' triad', h, color=ENGINE_COLORS.get(e, 'grey'))
            drawn, any_hollow = True, any_hollow or h
        mpi += [v for reps in c.get('repeat_records') or [] for r in reps
                if r.get('metric') == 'mpi_p2p_bw' for v in [r.get('value')] if isinstance(v, (int, float))]
        level = levels.get(ENGINE_NAMES.get(e, e))
        if level is not None and pts:
            ax.hlines(level, 3, max(x for x, _ in pts), color=ENGINE_COLORS.get(e, 'grey'),
                      label=f'{label}: {ENGINE_NAMES[e]} {level} MB/s beyond 3x', **{
                          k: v for k, v in PAPER_STYLE.items() if k != 'color'})
    if not drawn:
        return False
    if mpi:
        bw = V.spread(mpi)['median']
        ax.axhline(bw, label=f'MPI p2p, same ranks (median {bw:.0f} MB/s)', **MEASURED_STYLE)
        for target in ('DLM-T1', 'DLM-T7'):  # R77's and uffd's floors, from the claims
            frac = data.claim(target)['bound']['lower']
            ax.axhline(bw * frac, label=f'{frac:.0%} of it ({target})', **dict(MEASURED_STYLE, linewidth=1.0))
    _not_run_engines(ax, panel['members'])
    note_hollow(ax, any_hollow)
    ax.axvline(1, color='#888888', linewidth=0.8, linestyle=':')
    ax.set_xscale('log', base=2)
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.set_yscale('log')
    ax.yaxis.set_major_formatter(plain_formatter())
    ax.set_xlabel('three arrays / compute capacity')
    ax.set_ylabel('MB/s (log)')
    legend(ax)
    return True


DLM_MICRO_SOURCES = [('DlmMicro', {})]
DLM_STENCIL_SOURCES = [('DlmStencil', {})]
DLM_STREAM_SOURCES = [('DlmStream', {})]


def dlm_engines_figure(cases, out_dir):
    """P004 figs. 2.3/3.1: microbenchmark time per engine and thread count."""
    return figure(cases, out_dir, 'dlm_engines.png', 'P004 fig. 2.2 microbenchmark: time per engine',
                  DLM_MICRO_SOURCES, _draw_dlm_micro, panel=(7.0, 3.8),
                  panel_specs=[('microbenchmark', ('DlmMicro',), {})])


def dlm_stencil_figure(cases, out_dir):
    """P004 fig. 4.2: stencil Effective MFLOPS vs problem size per engine."""
    return figure(cases, out_dir, 'dlm_stencil.png', 'P004 §4.1 7-point stencil: Effective MFLOPS vs size',
                  DLM_STENCIL_SOURCES, _draw_dlm_stencil, panel=(6.5, 3.8),
                  panel_specs=[('stencil', ('DlmStencil',), {})])


def dlm_stream_figure(cases, out_dir):
    """P004 figs. 4.4-4.7: STREAM triad vs size per engine beside the MPI bandwidth."""
    return figure(cases, out_dir, 'dlm_stream.png', 'P004 §4.2 STREAM on DLM arrays: triad vs size',
                  DLM_STREAM_SOURCES, _draw_dlm_stream, panel=(6.5, 3.8),
                  panel_specs=[('STREAM', ('DlmStream',), {})])


FIGURES = [
    (dlm_engines_figure, DLM_MICRO_SOURCES,
     'P004 figs. 2.3/3.1: microbenchmark (write a[i]=i, read one element per page) time per engine '
     'and thread count; dashed: R3\'s time here x the paper\'s ratios (R58 2.75x at 1 thread, '
     'R77 1/1.25 at 1 and 1/1.3 at 12 threads)'),
    (dlm_stencil_figure, DLM_STENCIL_SOURCES,
     'P004 fig. 4.2: stencil Effective MFLOPS vs problem/compute capacity (log x), one line per engine; '
     'bars at 4x: each engine\'s in-memory MFLOPS x the paper\'s retention (R77 78%, R3 57%, R58 54%)'),
    (dlm_stream_figure, DLM_STREAM_SOURCES,
     'P004 figs. 4.4-4.7: STREAM triad vs arrays/compute capacity (log-log), one line per engine; '
     'dotted: the MPI point-to-point bandwidth of the same runs and half of it; dashed: the paper\'s '
     'levels beyond 3x memory (IB FDR)'),
]


# P004 figs. 2.4 (R58) and 3.2 (R77) are graphs; the text states one number of them:
# R58's external-queue wait (its point C, q here) is 7% of a page exchange at 1 thread
# and about 80% at 12 (P004 §2.3).
DLM_TIMING_POINTS = ('a', 'b', 'q', 'c', 'd', 'wake', 'stall')
DLM_PAPER_Q_SHARE = {'t1': 7, 't12': 80}
_DLM_TIMING_VAR = re.compile(r'fault_(\w+?)_(us|share)_(t\d+|[\d.]+x)$')


def dlm_fault_table(cases):
    """P004 figs. 2.4/3.2 beside what ran here: per system and size, a row per engine
    and phase (microbenchmark at a thread count, stencil at a ratio) with the mean of
    each per-fault timing point (checks run with -S fault_timing=1; the median over the
    repeats, as every table here), then P004's R58 rows ->
    {title, caption, tables: [{heading, headers, rows}], note}."""
    picked = matching(cases, DLM_MICRO_SOURCES + DLM_STENCIL_SOURCES)
    by = {}  # (system, size) -> {(bench, engine, where): {point: value}}
    for c in picked:
        for var, v in c['perf'].items():
            m = _DLM_TIMING_VAR.fullmatch(var)
            if m and v is not None:
                bench = 'micro' if c['check'] == 'DlmMicro' else 'stencil'
                point = m.group(1) + ('_share' if m.group(2) == 'share' else '')
                by.setdefault((c['system'], c['size']), {}).setdefault(
                    (bench, c['params'].get('engine', '?'), m.group(3)), {})[point] = v
    headers = ['run', 'engine', 'at'] + [f'{p} us' for p in DLM_TIMING_POINTS] + ['q share %']
    tables = []
    for (system, size), rows in sorted(by.items()):
        body = [[bench, engine, where] + [f'{vals[p]:.1f}' if p in vals else '-' for p in DLM_TIMING_POINTS]
                + [f"{vals['q_share']:.1f}" if 'q_share' in vals else '-']
                for (bench, engine, where), vals in sorted(rows.items(), key=lambda kv: (
                    kv[0][0], kv[0][1], int(kv[0][2][1:]) if kv[0][2].startswith('t') else 0))]
        body += [['P004 micro', 'r58', where] + ['-'] * len(DLM_TIMING_POINTS) + [f'~{share}']
                 for where, share in DLM_PAPER_Q_SHARE.items()]
        tables.append({'heading': f'{system} ({size} size)', 'headers': headers, 'rows': body})
    said = [] if tables else ['no DlmMicro / DlmStencil run with -S fault_timing=1']
    return {'title': 'P004 figs. 2.4/3.2: per-fault timing points (mean us)',
            'caption': 'a fault -> request dequeued, b -> page received, q -> install begins (R58: the external '
                       'queue), c install + swap-out with the threads stopped, d resume -> exchange over (victim '
                       'written back), wake resume -> faulting thread runs, stall fault -> thread runs; uffd '
                       'cannot see a, wake, stall. P004 draws these as graphs; its text gives R58\'s q share '
                       '(7% at 1 thread, ~80% at 12)',
            'tables': tables, 'note': '; '.join(said)}
