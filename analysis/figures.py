"""Figures of the report: the papers' figures redrawn from ReFrame run reports, one
PNG each, the paper's values marked (they come from analysis/claims.yaml, like the
verdicts).  Each figure function returns (file or None, note); figures() draws all the
umbench, coarray, vcuda and remd ones; cab_comm_table() is P002's table 3, remd_table()
P003's table 2, dlm_fault_table() P004's per-fault timing.  Used by report.py."""
import os
import re
import sys
import textwrap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'reframe', 'lib'))
from umstudy import data  # noqa: E402
from umstudy.verdicts import case_is  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import remd_balance_model  # noqa: E402
import remd_model  # noqa: E402

NO_MATPLOTLIB = 'matplotlib is not installed: figure not drawn'
MODES = ('explicit', 'managed', 'both', 'prefetch')
MODE_COLORS = {'explicit': '#1f77b4', 'managed': '#ff7f0e', 'both': '#9467bd', 'prefetch': '#2ca02c'}
PAPER_STYLE = {'color': 'black', 'linestyle': '--', 'linewidth': 1.3}
MEASURED_STYLE = {'color': '#d62728', 'linestyle': ':', 'linewidth': 1.8}
BASELINE_SERIES = ('cpu_copy', 'gpu_copy', 'h2d', 'd2h', 'd2d')
PHASE_DEVICE = {'phase1': 'GPU', 'phase2': 'CPU', 'phase3': 'GPU'}
# Panel order of parameter values (others sort by name; arrays by size).
PARAM_ORDER = {'alloc': ('system', 'managed'), 'problem': ('small', 'large')}


def _pyplot():
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _paper(claim_id):
    """(value, label) of a paper claim: the number(s) the figures mark."""
    c = data.claim(claim_id)
    return c['value'], f"paper ({(c.get('system') or 'paper').capitalize()})"


def _recs(case, metric, **match):
    return [r for r in case['records']
            if r.get('metric') == metric and all(r.get(k) == v for k, v in match.items())]


def _value(case, metric):
    recs = _recs(case, metric)
    return recs[0]['value'] if recs else None


def _bytes(text):
    """'4G' -> 4 * 2**30 (sort key of array sizes)."""
    m = re.fullmatch(r'([\d.]+)\s*([KMGT]?)i?B?', str(text or ''), re.I)
    return float(m.group(1)) * 1024 ** ' KMGT'.index(m.group(2).upper() or ' ') if m else 0.0


def _gib(case):
    n = case['record_params'].get('size_bytes')
    return f'{n / 2**30:g} GiB array' if n else ''


def _why_empty(case):
    """Why a case has nothing to plot ('' when it has)."""
    if 'members' in case:  # a panel of several cases (_panels): empty when all of them are
        whys = [_why_empty(m) for m in case['members']]
        return '' if not all(whys) else '; '.join(dict.fromkeys(whys))
    if case['result'] == 'skip':
        return 'skipped: ' + (case['reason'] or 'no reason recorded')
    if not case['records']:
        return 'ran but kept no records' + (f" ({case['result']}: {case['reason']})" if case['reason'] else '')
    return ''


def _describe(case):
    return ' '.join([case['check']] + [f'{k}={v}' for k, v in case['params'].items()]) + f" on {case['system']}"


def _size_label(cases):
    sizes = sorted({c['size'] for c in cases if not _why_empty(c)})
    return ' + '.join(sizes) + ' size' if sizes else ''


def _matching(cases, sources):
    """Cases of the (check, params) sources, in source order, then by system and params."""
    out = []
    for check, params in sources:
        out += sorted((c for c in cases if case_is(c, check, params)),
                      key=lambda c: (c['system'], _rank(c, 'alloc'), _bytes(c['params'].get('array')),
                                     _rank(c, 'problem'), sorted(c['params'].items())))
    return out


def _rank(case, param):
    order, value = PARAM_ORDER[param], case['params'].get(param)
    return order.index(value) if value in order else len(order)


def _grid(picked):
    """Layout: a row per system (x allocator), a column per check, size mode, array size and problem."""
    def row(c):
        return c['system'], _rank(c, 'alloc')

    def col(c):
        rest = sorted((k, str(v)) for k, v in c['params'].items() if k not in ('alloc', 'array', 'problem'))
        # paper-size runs first: quick and paper runs of one case sit side by side
        return (c.get('order', 0), c['check'], c['size'] != 'paper', _bytes(c['params'].get('array')),
                _rank(c, 'problem'), rest)
    rows = sorted({row(c) for c in picked})
    cols = sorted({repr(col(c)): col(c) for c in picked}.values())
    return [[next((c for c in picked if row(c) == r and col(c) == k), None) for k in cols] for r in rows]


def _write_in(ax, text, width):
    """A panel with nothing to plot says why."""
    ax.text(0.5, 0.45, textwrap.fill(text, int(width * 11)), ha='center', va='center', fontsize=8,
            color='#555555', transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _panel_title(case, with_check):
    params = ' '.join(f'{k}={v}' for k, v in case['params'].items())
    parts = [case['system']] + ([case['check']] if with_check else []) + ([params] if params else [])
    return ' · '.join(parts) + f" ({case['size']} size)" + (' [failed]' if case['result'] == 'fail' else '')


def _notes(picked):
    """'UmbX a=1 on s, UmbX a=2 on s: skipped: why' for the cases with nothing to plot."""
    by_reason = {}
    for c in picked:
        if _why_empty(c):
            by_reason.setdefault(_why_empty(c), []).append(_describe(c))
    return [f"{', '.join(who)}: {why}" for why, who in by_reason.items()]


def _panels(picked, specs):
    """Panels that draw several cases each: a pseudo-case per system, size and spec
    (label, checks, fields) holding the picked cases of those checks as its 'members'
    ('order' keeps the specs' column order; the fields tell the drawer what to draw)."""
    out = []
    for system, size in sorted({(c['system'], c['size']) for c in picked}):
        for order, (label, checks, fields) in enumerate(specs):
            members = [c for c in picked if (c['system'], c['size']) == (system, size) and c['check'] in checks]
            if members:
                out.append(dict(fields, check=label, params={}, system=system, size=size, result='pass',
                                reason='', records=[], record_params={}, members=members, order=order))
    return out


def _figure(cases, out_dir, name, title, sources, draw, panel=(7.0, 3.8), panels=None):
    """One PNG of one panel per case of the sources, or per pseudo-case of _panels(specs
    `panels`) (draw(ax, case) fills it; a case with nothing to plot gets its reason
    written in, its row kept short when the whole row has nothing) -> (file or None, note)."""
    picked = _matching(cases, sources)
    notes = _notes(picked)
    if all(_why_empty(c) for c in picked):
        what = ' / '.join(check + ''.join(f' {k}={v}' for k, v in params.items()) for check, params in sources)
        return None, '; '.join([f'no {what} data to plot'] + notes)
    plt = _pyplot()
    if plt is None:
        return None, NO_MATPLOTLIB
    if panels:
        picked = _panels(picked, panels)
    grid = _grid(picked)
    nrows, ncols = len(grid), max(len(row) for row in grid)
    heights = [1 if any(c and not _why_empty(c) for c in row) else 0.3 for row in grid]
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel[0] * ncols, panel[1] * sum(heights) + 0.5),
                             squeeze=False, gridspec_kw={'height_ratios': heights}, layout='constrained')
    with_check = len({c['check'] for c in picked}) > 1
    for i in range(nrows):
        for j in range(ncols):
            ax, case = axes[i][j], grid[i][j] if j < len(grid[i]) else None
            if case is None:
                ax.axis('off')
                continue
            ax.set_title(_panel_title(case, with_check), fontsize=9)
            why = _why_empty(case)
            if why or not draw(ax, case):
                _write_in(ax, why or 'no records of the kind this figure plots', panel[0])
    fig.suptitle(title, fontsize=11)
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name, '; '.join(notes)


def _paper_level(ax, value, label, color='black'):
    """The paper's level (a number, or a [lo, hi] range) as a dashed line / band."""
    style = dict(PAPER_STYLE, color=color)
    if isinstance(value, (list, tuple)):
        ax.axhspan(value[0], value[1], color=color, alpha=0.12, label=label)
        for v in value:
            ax.axhline(v, **dict(style, linewidth=0.8))
    else:
        ax.axhline(value, label=label, **style)


def _paper_tick(ax, x, y, width, label=None):
    """The paper's value for one bar: a dashed segment across it."""
    ax.hlines(y, x - width / 2, x + width / 2, label=label, **PAPER_STYLE)


def _legend(ax, **kw):
    """Legend right of the panel, where it hides no data."""
    ax.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.01, 1.0), borderaxespad=0, **kw)


# P000 figures

def _draw_modes(ax, case):
    times = {r.get('mode'): r['value'] for r in _recs(case, 'time')}
    modes = [m for m in MODES if m in times] + sorted(m for m in times if m not in MODES)
    if not modes:
        return False
    base = times.get('explicit')
    ax.bar(range(len(modes)), [times[m] for m in modes], 0.6,
           color=[MODE_COLORS.get(m, 'grey') for m in modes])
    for i, m in enumerate(modes):  # at the foot of the bars: higher up are the paper's marks
        ax.text(i, max(times.values()) * 0.02, f'{times[m]:.0f} ms' + (f'\n{times[m] / base:.2f}× expl.'
                if base and m != 'explicit' else ''), ha='center', va='bottom', fontsize=7,
                bbox={'facecolor': 'white', 'alpha': 0.75, 'edgecolor': 'none', 'pad': 1})
    ratios, label = _paper('P000-C1')
    marks, text = [], []
    if 'both' in times:
        x = modes.index('both')
        for ref, key in (('explicit', 'both_over_manual'), ('managed', 'both_over_auto')):
            if times.get(ref):
                marks.append((times[ref] * ratios[key], f'{ratios[key]}× {ref}'))
                text.append(f'both/{ref} {times["both"] / times[ref]:.2f} ({ratios[key]})')
        for i, (y, what) in enumerate(sorted(marks)):  # the lower label below its line, the upper above
            _paper_tick(ax, x, y, 0.8, label=None if i else f'{label}:\nboth = ratio × ref')
            ax.text(x + 0.42, y, what, fontsize=6.5, va='bottom' if i else 'top')
        marks = [y for y, _ in marks]
    if marks:
        _legend(ax)
        ax.text(1.02, 0.0, 'measured (paper):\n' + '\n'.join(text), transform=ax.transAxes,
                va='bottom', fontsize=7)
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels(modes)
    ax.set_xlim(-0.6, len(modes) - 0.1)
    ax.set_ylim(0, max(list(times.values()) + marks) * 1.1)
    ax.set_ylabel('time, init to CPU sum (ms)')
    ax.set_xlabel(_gib(case))
    return True


def _sweep_drawer(xfield, xlabel, crossover, claim_id, logx=False, flat_claim=None):
    """Draws time vs xfield, one line per mode, the measured crossover and the paper's."""
    def draw(ax, case):
        lines = {}
        for r in _recs(case, 'time'):
            if xfield in r:
                lines.setdefault(r.get('mode'), []).append((r[xfield], r['value']))
        if not lines:
            return False
        for mode in sorted(lines, key=lambda m: MODES.index(m) if m in MODES else len(MODES)):
            xs, ys = zip(*sorted(lines[mode]))
            ax.plot(xs, ys, marker='o', markersize=2.5, linewidth=1.2,
                    color=MODE_COLORS.get(mode, 'grey'), label=mode)
        unit = xlabel.split('(')[-1].rstrip(')')
        measured = _value(case, crossover)
        if measured is not None:
            ax.axvline(measured, label=f'measured crossover {measured:.4g} {unit}', **MEASURED_STYLE)
        paper, label = _paper(claim_id)
        ax.axvline(paper, label=f'{label}: {paper} {unit}', **PAPER_STYLE)
        if flat_claim and case['size'] == data.claim(flat_claim).get('size'):
            flat, _ = _paper(flat_claim)  # a time on Cygnus: only comparable at the paper's size
            ax.hlines(flat, min(x for pts in lines.values() for x, _ in pts), paper * 0.94,
                      label=f'{label}: managed flat ≈ {flat} ms', **dict(PAPER_STYLE, linestyle='-.'))
        if logx:
            ax.set_xscale('log', base=2)
            ax.xaxis.set_major_formatter(_plain_formatter())
        ax.set_ylim(bottom=0)
        ax.set_xlabel(xlabel + (f', {_gib(case)}' if _gib(case) else ''))
        ax.set_ylabel('time, init to CPU sum (ms)')
        _legend(ax)
        return True
    return draw


def _plain_formatter():
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda v, _: f'{v:g}')


def _draw_halo(ax, case):
    times = {(r.get('pack'), r.get('mode')): r['value'] for r in _recs(case, 'time')}
    packs = [p for p in ('cpu', 'gpu') if any(k[0] == p for k in times)]
    if not packs:
        return False
    problem = case['params'].get('problem')
    (cpu_ratio, label), (gpu_ratio, _) = _paper('P000-C5'), _paper('P000-C6')
    paper = {'cpu': cpu_ratio.get(problem), 'gpu': gpu_ratio.get(problem)}
    width, ticks = 0.36, []
    for i, pack in enumerate(packs):
        expl, man = times.get((pack, 'explicit')), times.get((pack, 'managed'))
        for j, (mode, t) in enumerate((('explicit', expl), ('managed', man))):
            if t is not None:
                ax.bar(i + (j - 0.5) * width, t, width, color=MODE_COLORS[mode], label=mode if i == 0 else None)
        xm = i + 0.5 * width
        if expl and man:
            ax.text(xm, man * 1.08, f'{man / expl:.2f}×', ha='center', va='bottom', fontsize=8, weight='bold')
        if expl and paper[pack]:
            _paper_tick(ax, xm, expl * paper[pack], width * 1.1,
                        label=f'{label}:\nratio × explicit' if i == 0 else None)
        ticks.append(f'{pack.upper()} pack' + (f'\npaper {paper[pack]}×' if paper[pack] else ''))
    ax.set_xticks(range(len(packs)))
    ax.set_xticklabels(ticks)
    ax.set_yscale('log')
    ax.yaxis.set_major_formatter(_plain_formatter())
    top = max(times.values())
    ax.set_ylim(min(times.values()) / 3, top * 2.5)
    n = case['record_params'].get('n')
    ax.set_xlabel((f'{n}² grid; ' if n else '') + 'managed/explicit on the bars')
    ax.set_ylabel('time (ms, log)')
    _legend(ax)
    return True


# P001 figures: per-rep bandwidth traces

def _traces(case, key='series', trial=0):
    """{series: [GB/s in rep order]} of a case's per-rep bandwidth records of one trial."""
    out = {}
    for r in _recs(case, 'bandwidth'):
        if r.get('trial', 0) == trial:
            out.setdefault(r.get(key), []).append((r.get('rep', 0), r['value']))
    return {k: [v for _, v in sorted(pts)] for k, pts in out.items()}


def _trace_axes(ax, case, xlabel='rep (trial 0)'):
    ax.set_yscale('log')
    ax.yaxis.set_major_formatter(_plain_formatter())
    ax.set_xlabel(xlabel + (f', {case["params"]["array"]} array' if 'array' in case['params'] else ''))
    ax.set_ylabel('bandwidth (GB/s, log)')
    ax.grid(True, which='major', alpha=0.3)
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _draw_baseline(ax, case):
    traces = _traces(case)
    if not traces:
        return False
    paper = {}
    for claim_id in ('P001-C1', 'P001-C2', 'P001-C3'):
        c = data.claim(claim_id)
        series = c['measure'].get('var') if 'var' in c['measure'] else None
        paper.update({series: c['value']} if series else c['value'])
    label = _paper('P001-C1')[1]
    names = [s for s in BASELINE_SERIES if s in traces] + sorted(s for s in traces if s not in BASELINE_SERIES)
    for i, s in enumerate(names):
        ax.plot(traces[s], color=f'C{i}', linewidth=1.2, label=s)
        if s in paper:
            _paper_level(ax, paper[s], None, color=f'C{i}')
    if any(s in paper for s in names):
        ax.plot([], [], label=f'{label} (series colour)', **PAPER_STYLE)
    _trace_axes(ax, case)
    _legend(ax)
    return True


def _draw_patterns(ax, case):
    traces = _traces(case)
    if not traces:
        return False
    desc = {int(r['value']): r for r in _recs(case, 'pattern')}

    def number(s):
        return int(s[1:]) if s and s[1:].isdigit() else 99
    for s in sorted(traces, key=number):
        d = desc.get(number(s), {})
        name = f"{s}: {d['src']}→{d['dst']} by {d['by']}" if all(k in d for k in ('src', 'dst', 'by')) else s
        gpu = d.get('by', 'GPU' if number(s) >= 5 else 'CPU').upper() == 'GPU'
        ax.plot(traces[s], color=f'C{(number(s) - 1) % 10}', linestyle='-' if gpu else '--',
                linewidth=1.1, label=name)
    levels, label = _paper('P001-C5')  # SAM (system allocator) only, 4 GB and 8 GB
    level = levels.get(f"p5_{case['params'].get('array', '')}B")
    if case['params'].get('alloc') == 'system' and level is not None:
        _paper_level(ax, level, f'{label}: p5–p7 settled')
    _trace_axes(ax, case)
    _legend(ax)
    return True


def _draw_migration(ax, case):
    traces = _traces(case, key='phase')
    if not traces:
        return False
    start = 0
    for i, phase in enumerate(sorted(traces)):
        vals = traces[phase]
        ax.plot(range(start, start + len(vals)), vals, color=f'C{i}', linewidth=1.2)
        if start:
            ax.axvline(start - 0.5, color='grey', linestyle=':', linewidth=1)
        ax.text(start + len(vals) / 2, 0.97, f'{phase}: {PHASE_DEVICE.get(phase, "?")}', color=f'C{i}',
                ha='center', va='top', fontsize=8, transform=ax.get_xaxis_transform())
        start += len(vals)
    _trace_axes(ax, case, 'rep, phases concatenated (trial 0)')
    ax.set_ylim(top=max(max(v) for v in traces.values()) * 6)  # room for the phase names
    ramp = _value(case, 'phase3_ramp')
    paper, label = _paper('P001-C7')
    if ramp is not None:
        ax.set_xlabel(ax.get_xlabel() + f'\nphase 3 settled/first = {ramp:.3g}× '
                      f"({label}, SAM: ≈ {paper['phase3_ramp']}×, no ramp)")
    return True


# P002 figures: coarray ping-pong and NPB over the runtime's backends, one panel per
# quantity (kernel) holding every backend's case (_panels)

BACKENDS = ('mpi3', 'armci', 'gasnet')
BACKEND_NAMES = {'mpi3': 'MPI-3', 'armci': 'ARMCI', 'gasnet': 'GASNet'}
BACKEND_COLORS = {'mpi3': '#1f77b4', 'armci': '#ff7f0e', 'gasnet': '#2ca02c'}
MPI_STYLE = {'color': '#444444', 'linestyle': '--', 'linewidth': 1.3}  # the MPI baselines


def _backend(case):
    return case['params'].get('backend')


def _backend_order(case):
    return BACKENDS.index(_backend(case)) if _backend(case) in BACKENDS else len(BACKENDS)


def _failed(case):
    return ' [check failed]' if case['result'] == 'fail' else ''


def _line(ax, pts, label, **style):
    xs, ys = zip(*sorted(pts))
    ax.plot(xs, ys, label=label, **dict({'marker': 'o', 'markersize': 2.5, 'linewidth': 1.2}, **style))


def _not_run(ax, members):
    """Legend entries for the backends with nothing here (the figure's note says why)."""
    ran = {_backend(c) for c in members if not _why_empty(c)}
    for b in dict.fromkeys(_backend(c) for c in sorted(members, key=_backend_order)):
        if b and b not in ran:
            ax.plot([], [], color=BACKEND_COLORS.get(b, 'grey'), alpha=0.35, linewidth=4,
                    label=f'{BACKEND_NAMES.get(b, b)}: not run (see note)')


def _bytes_formatter():
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda v, _: next(f'{v / 1024 ** k:g}{unit}' for k, unit in
                                           ((2, 'M'), (1, 'K'), (0, '')) if v >= 1024 ** k or not k))


def _draw_pingpong(ax, panel):
    metric, op = panel['metric'], panel['op']
    members = sorted(panel['members'], key=_backend_order)
    for c in members:
        pts = [(r['bytes'], r['value']) for r in _recs(c, metric, op=op)]
        if pts:
            _line(ax, pts, BACKEND_NAMES.get(_backend(c), _backend(c)) + _failed(c),
                  color=BACKEND_COLORS.get(_backend(c), 'grey'))
    raw = next((c for c in members if _recs(c, metric, op='raw-' + op)), None)
    if raw:
        _line(ax, [(r['bytes'], r['value']) for r in _recs(raw, metric, op='raw-' + op)],
              f'raw MPI-3 RMA {op}\n(in the {_backend(raw)} run)', **MPI_STYLE)
    if not ax.lines:
        return False
    _not_run(ax, members)
    from matplotlib.ticker import LogLocator
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(_bytes_formatter())
    ax.yaxis.set_major_formatter(_plain_formatter())
    ax.grid(True, which='major', alpha=0.3)
    ax.set_xlabel('message size (bytes)')
    ax.set_ylabel({'latency': 'half round trip (µs, log)'}.get(metric, f'{metric} (MB/s, log)'))
    ax.legend(fontsize=6.5, loc='upper left')  # inside: the lines rise from the lower left
    return True


def _draw_npb(ax, panel):
    lines = {}  # (backend order, variant, label, style) -> [(ranks, Mop/s)]
    for c in panel['members']:
        backend, variant = _backend(c), c['params'].get('variant', '')
        label = (f'coarray {BACKEND_NAMES.get(backend, backend)}' + (f' {variant}' if variant else '')
                 if backend else panel['baseline'])
        style = (dict(color=BACKEND_COLORS.get(backend, 'grey'), linestyle='-.' if variant == 'putacc' else '-')
                 if backend else MPI_STYLE)
        key = (_backend_order(c), variant, label + _failed(c), tuple(sorted(style.items())))
        lines.setdefault(key, []).extend((int(c['params']['ranks']), r['value']) for r in _recs(c, 'mops'))
    lines = {k: pts for k, pts in lines.items() if pts}
    if not lines:
        return False
    for (_, _, label, style), pts in sorted(lines.items()):
        _line(ax, pts, label, **dict(style))
    _not_run(ax, panel['members'])
    ranks = sorted({x for pts in lines.values() for x, _ in pts})
    ax.set_xscale('log', base=2)
    ax.set_xticks(ranks)
    ax.xaxis.set_major_formatter(_plain_formatter())
    ax.set_xlim(ranks[0] / 1.3, ranks[-1] * 1.3)
    ax.set_ylim(bottom=0)
    ax.grid(True, which='major', alpha=0.3)
    ax.set_xlabel('ranks (images)')
    ax.set_ylabel('Mop/s')
    _legend(ax)
    return True


def _npb_classes(cases):
    """'class S' or 'class S (quick size), C (paper size)': the NPB class(es) the cases ran."""
    found = sorted({(c['size'], c['record_params']['class']) for c in cases if c['record_params'].get('class')},
                   key=lambda sc: (sc[0] == 'paper', sc))
    if len({cls for _, cls in found}) == 1:
        return f'class {found[0][1]}'
    return ('class ' + ', '.join(f'{cls} ({size} size)' for size, cls in found)) if found else ''


MODES_SOURCES = [('UmbModes', {}), ('UmbAcc', {'program_name': 'modes'})]
FRACTION_SOURCES = [('UmbFraction', {}), ('UmbAcc', {'program_name': 'fraction'})]
STRIDE_SOURCES = [('UmbStride', {}), ('UmbAcc', {'program_name': 'stride'})]
HALO_SOURCES = [('UmbHalo', {})]
BASELINE_SOURCES = [('UmbBaseline', {})]
PATTERNS_SOURCES = [('UmbPatterns', {})]
MIGRATION_SOURCES = [('UmbMigration', {})]
PINGPONG_SOURCES = [('CabPingPong', {})]
NPB_SOURCES = [('CabIs', {}), ('CabIsMpi', {}), ('CabCg', {}), ('CabCgMpi', {})]
PINGPONG_PANELS = [(f'{op} {metric}', ('CabPingPong',), {'op': op, 'metric': metric})
                   for op in ('put', 'get') for metric in ('latency', 'bandwidth')]
NPB_PANELS = [('IS', ('CabIs', 'CabIsMpi'), {'baseline': 'MPI_Alltoallv (original)'}),
              ('CG', ('CabCg', 'CabCgMpi'), {'baseline': 'two-sided MPI'})]


def umb_modes_figure(cases, out_dir):
    """P000 fig. 2-3: time per compile/allocation mode, the paper's ratios marked."""
    return _figure(cases, out_dir, 'umb_modes.png', 'P000 exp. 1: time per mode (init, GPU +1, CPU sum)',
                   MODES_SOURCES, _draw_modes)


def umb_fraction_figure(cases, out_dir):
    """P000 fig. 4: time vs the fraction of the array the GPU touches."""
    return _figure(cases, out_dir, 'umb_fraction.png', 'P000 exp. 2: time vs touched fraction',
                   FRACTION_SOURCES,
                   _sweep_drawer('fraction_pct', 'touched fraction (%)', 'crossover_pct', 'P000-C2'))


def umb_stride_figure(cases, out_dir):
    """P000 fig. 5: time vs access stride."""
    return _figure(cases, out_dir, 'umb_stride.png', 'P000 exp. 3: time vs stride',
                   STRIDE_SOURCES, _sweep_drawer('stride_kib', 'stride (KiB)', 'crossover_kib', 'P000-C3',
                                                 logx=True, flat_claim='P000-C4'))


def umb_halo_figure(cases, out_dir):
    """P000 fig. 6: halo-exchange stencil, explicit vs managed per problem and pack."""
    return _figure(cases, out_dir, 'umb_halo.png', 'P000 exp. 4: 2-rank halo stencil, explicit vs managed',
                   HALO_SOURCES, _draw_halo, panel=(5.8, 3.9))


def umb_baseline_figure(cases, out_dir):
    """P001 figs 5.1-5.3: per-rep bandwidth of the baseline copies."""
    return _figure(cases, out_dir, 'umb_baseline.png', 'P001 baselines: per-rep bandwidth',
                   BASELINE_SOURCES, _draw_baseline)


def umb_patterns_figure(cases, out_dir):
    """P001 figs 5.4-5.6: per-rep bandwidth of the 8 first-touch placement patterns."""
    return _figure(cases, out_dir, 'umb_patterns.png',
                   'P001 8 patterns: per-rep bandwidth',
                   PATTERNS_SOURCES, _draw_patterns, panel=(7.5, 4.2))


def umb_migration_figure(cases, out_dir):
    """P001 fig. 5.7: per-rep bandwidth over the GPU -> CPU -> GPU phases."""
    return _figure(cases, out_dir, 'umb_migration.png', 'P001 migration: GPU → CPU → GPU phases',
                   MIGRATION_SOURCES, _draw_migration, panel=(5.4, 3.8))


def cab_pingpong_figure(cases, out_dir):
    """P002 figs. 2/3: coarray put/get ping-pong latency and bandwidth vs message size."""
    return _figure(cases, out_dir, 'cab_pingpong.png',
                   'P002 figs. 2/3: coarray put/get ping-pong between 2 images, per backend',
                   PINGPONG_SOURCES, _draw_pingpong, panel=(4.6, 3.6), panels=PINGPONG_PANELS)


def cab_npb_figure(cases, out_dir):
    """P002 NPB IS and CG: Mop/s vs ranks per backend beside the MPI originals."""
    classes = _npb_classes(_matching(cases, NPB_SOURCES))
    return _figure(cases, out_dir, 'cab_npb.png',
                   'P002 NPB IS and CG' + (f', {classes}' if classes else '') + ': Mop/s vs ranks',
                   NPB_SOURCES, _draw_npb, panel=(6.2, 3.8), panels=NPB_PANELS)


# (function, the checks it draws, caption)
UMB_FIGURES = [
    (umb_modes_figure, MODES_SOURCES,
     'P000 fig. 2-3: end-to-end time per mode (explicit copies, managed, directives + managed, '
     'managed + prefetch); dashed: the paper\'s both/explicit 1.44× and both/managed 0.99×'),
    (umb_fraction_figure, FRACTION_SOURCES,
     'P000 fig. 4: time vs the fraction of the array the GPU touches; dotted: measured '
     'crossover, dashed: the paper\'s 60%'),
    (umb_stride_figure, STRIDE_SOURCES,
     'P000 fig. 5: time vs the GPU\'s access stride (log x); dotted: measured crossover, '
     'dashed: the paper\'s 128 KiB'),
    (umb_halo_figure, HALO_SOURCES,
     'P000 fig. 6: halo stencil time, explicit vs managed per problem and pack (log y), '
     'managed/explicit on the bars; dashed: the paper\'s ratio'),
    (umb_baseline_figure, BASELINE_SOURCES,
     'P001 figs 5.1-5.3: per-rep bandwidth of CPU copy, GPU copy, HtoD, DtoH, DtoD (trial 0, log y); '
     'dashed: the paper\'s Miyabi levels'),
    (umb_patterns_figure, PATTERNS_SOURCES,
     'P001 figs 5.4-5.6: per-rep bandwidth of the 8 placement patterns per allocator and array '
     '(HM/DM: Src/Dst first-touched in host/device memory; trial 0, log y; dashed lines: copies by the CPU)'),
    (umb_migration_figure, MIGRATION_SOURCES,
     'P001 fig. 5.7: per-rep bandwidth over the GPU → CPU → GPU phases (trial 0, log y)'),
]


CAB_FIGURES = [
    (cab_pingpong_figure, PINGPONG_SOURCES,
     'P002 figs. 2/3: coarray put and get ping-pong, half round trip latency and bandwidth vs '
     'message size (log-log), one line per backend; dashed: the raw MPI-3 RMA ping-pong of the same run'),
    (cab_npb_figure, NPB_SOURCES,
     'P002 NPB: IS (key exchange by coarray puts) and CG (q reduced by coarray gets, dash-dot: '
     'put-accumulate) Mop/s vs ranks per backend; dashed: the MPI originals (MPI_Alltoallv, two-sided MPI)'),
]


# P003 (vcuda) figures

VCUDA_COPY_SOURCES = [('VcudaBench', {})]
VCUDA_COPY_PANELS = [(f'{d} copy time', ('VcudaBench',), {'dir': d}) for d in ('H2D', 'D2H')]
VCUDA_IDLE_SOURCES = [('VcudaKeepalive', {}), ('VcudaBench', {'transport': 'local'})]
VCUDA_IDLE_PANELS = [('D2H after idle', ('VcudaKeepalive', 'VcudaBench'), {})]
TRANSPORT_COLORS = {'local': '#2ca02c', 'vcuda-tcp': '#1f77b4', 'vcuda-ucx': '#9467bd'}


def _draw_vcuda_copy(ax, panel):
    """T(S) per transport (one server), the fitted T = S/B + L, and P003's fit."""
    d = panel['dir']
    b_var, l_var = ('BH', 'LH') if d == 'H2D' else ('BD', 'LD')
    sizes = []
    for c in panel['members']:
        pts = [(r['bytes'], r['value']) for r in _recs(c, 'copy_time', dir=d, servers=1)]
        if not pts:
            continue
        transport = _recs(c, 'copy_time', dir=d)[0].get('transport', c['params'].get('transport'))
        color = TRANSPORT_COLORS.get(transport, 'grey')
        _line(ax, pts, f'{transport} (measured){_failed(c)}', color=color)
        b, lat = c['perf'].get(b_var), c['perf'].get(l_var)
        sizes = sorted(x for x, _ in pts)
        if b and lat is not None:  # MB/s is bytes per microsecond: T[us] = S/B + L
            ax.plot(sizes, [s / b + lat for s in sizes], color=color, linewidth=0.8, linestyle='-.',
                    label=f'{transport} fit: {b:.0f} MB/s, {lat:.1f} us')
    if not ax.lines:
        return False
    paper, label = _paper('P003-C1')
    ax.plot(sizes, [s / paper[b_var] + paper[l_var] for s in sizes],
            label=f"{label} fit: {paper[b_var]} MB/s, {paper[l_var]} us", **PAPER_STYLE)
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.xaxis.set_major_formatter(_bytes_formatter())
    ax.set_xlabel('bytes per cudaMemcpy')
    ax.set_ylabel('time per call (us)')
    _legend(ax)
    return True


def _idle_label(case):
    p = case['params']
    if p.get('transport') == 'local':
        return 'local runtime'
    ka = f"keep-alive {p.get('keepalive_ms')} ms" if str(p.get('keepalive_ms')) != '0' else 'no keep-alive'
    return f"vcuda, {ka}, server spin {int(p.get('server_spin_us', 0)) / 1000:g} ms"


def _draw_vcuda_idle(ax, panel):
    """D2H latency vs the idle time before the call, a line per configuration; P003's
    fast and slow ranges."""
    styles = [('-', '#1f77b4'), ('--', '#ff7f0e'), ('-.', '#d62728'), (':', '#9467bd')]
    for i, c in enumerate(sorted(panel['members'], key=_idle_label)):
        pts = [(r['interval_ms'], r['value']) for r in _recs(c, 'd2h_after_idle')]
        if pts:
            local = c['params'].get('transport') == 'local'
            style, color = ('-', TRANSPORT_COLORS['local']) if local else styles[i % len(styles)]
            _line(ax, pts, _idle_label(c) + _failed(c), linestyle=style, color=color)
    if not ax.lines:
        return False
    paper, label = _paper('P003-C6')
    _paper_level(ax, paper['fast_us'], label + ': calls close together')
    _paper_level(ax, paper['slow_us'], label + f": > {paper['gap_ms']} ms apart", color='#d62728')
    ax.set_xscale('symlog', linthresh=1)
    ax.set_xlim(left=0)
    ax.xaxis.set_major_formatter(_plain_formatter())
    ax.set_xlabel('idle time before the call (ms)')
    ax.set_ylabel('D2H latency (us)')
    ax.set_ylim(bottom=0)
    _legend(ax)
    return True


def vcuda_copy_figure(cases, out_dir):
    """P003 figs. 4-7: copy time vs size, local and through vcuda, with the fits."""
    return _figure(cases, out_dir, 'vcuda_copy.png', 'P003 figs. 4-7: T = S/B + L, local and through vcuda',
                   VCUDA_COPY_SOURCES, _draw_vcuda_copy, panel=(6.0, 3.8), panels=VCUDA_COPY_PANELS)


def vcuda_idle_figure(cases, out_dir):
    """P003 figs. 8/9: D2H latency after idle gaps, keep-alive and server spin variants."""
    return _figure(cases, out_dir, 'vcuda_idle.png', 'P003 figs. 8/9: D2H latency vs idle time between calls',
                   VCUDA_IDLE_SOURCES, _draw_vcuda_idle, panel=(7.0, 4.0), panels=VCUDA_IDLE_PANELS)


VCUDA_FIGURES = [
    (vcuda_copy_figure, VCUDA_COPY_SOURCES,
     'P003 figs. 4-7: time per cudaMemcpy vs size with one server, on the local runtime and through '
     'vcuda (log-log); dash-dot: the least-squares T = S/B + L of each; dashed: P003\'s fit on TSUBAME2.5 (IB)'),
    (vcuda_idle_figure, VCUDA_IDLE_SOURCES,
     'P003 figs. 8/9: median D2H latency vs the idle time before the call, without and with the 2 ms '
     'keep-alive (a dummy 4-byte copy) and with a server that keeps polling (server_spin_us), beside the '
     'local runtime; bands: the paper\'s 20-30 us and 200-300 us'),
]


def figures(cases, out_dir):
    """Draws every figure -> [{file, caption, note}] (file None: not drawn)."""
    out = []
    for fn, sources, caption in UMB_FIGURES + CAB_FIGURES + VCUDA_FIGURES + REMD_FIGURES + DLM_FIGURES:
        name, note = fn(cases, out_dir)
        size = _size_label(_matching(cases, sources))
        out.append({'file': name, 'name': fn.__name__.replace('_figure', '.png'),
                    'caption': caption + (f' [{size}]' if size else ''), 'note': note,
                    'checks': sorted({check for check, _ in sources})})
    return out


# P002 table 3 (T2K Tsukuba, NPB class C, one process per node): communication share of
# the total time (%) per node count.  The paper's numbers, as in claim P002-C5's text.
P002_TABLE3 = {
    ('IS', 'gasnet'): {2: 12.17, 4: 19.43, 8: 21.08, 16: 31.01, 32: 49.01},
    ('IS', 'armci'): {2: 12.76, 4: 21.15, 8: 32.95, 16: 42.87, 32: 55.55},
    ('CG', 'gasnet'): {2: 0.91, 4: 2.19, 8: 5.11, 16: 9.94, 32: 20.34},
    ('CG', 'armci'): {2: 1.00, 4: 2.60, 8: 5.76, 16: 10.98, 32: 21.46},
}
COMM_SOURCES = [('CabIs', {}), ('CabCg', {'variant': 'get'})]
KERNELS = {'CabIs': 'IS', 'CabCg': 'CG'}


def cab_comm_table(cases):
    """P002 table 3 beside what ran here: a table per system and size, a row per rank
    count, columns IS and CG (get) communication share per backend measured, then the
    paper's -> {title, caption, tables: [{heading, headers, rows}], note}."""
    picked = _matching(cases, COMM_SOURCES)
    shares = {}  # (system, size) -> {(kernel, backend): {ranks: %}}
    for c in picked:
        if _value(c, 'comm_share') is not None:
            shares.setdefault((c['system'], c['size']), {}).setdefault(
                (KERNELS[c['check']], _backend(c)), {})[int(c['params']['ranks'])] = _value(c, 'comm_share')
    tables = []
    for (system, size), measured in sorted(shares.items()):
        cols = []
        for kernel in ('IS', 'CG'):
            cols += [(f'{kernel} {b}' + (' (get)' if kernel == 'CG' else ''), measured[kernel, b])
                     for b in BACKENDS if (kernel, b) in measured]
            cols += [(f'{kernel} paper {BACKEND_NAMES[b]}', P002_TABLE3[kernel, b]) for b in ('gasnet', 'armci')]
        ranks = sorted({n for _, col in cols for n in col})
        classes = _npb_classes([c for c in picked if (c['system'], c['size']) == (system, size)])
        tables.append({'heading': f'{system} ({size} size' + (f', {classes}' if classes else '') + ')',
                       'headers': ['ranks'] + [name for name, _ in cols],
                       'rows': [[str(n)] + [f'{col[n]:.2f}' if n in col else '-' for _, col in cols]
                                for n in ranks]})
    notes = ([] if tables else ['no CabIs / CabCg variant=get comm_share data']) + _notes(picked)
    return {'title': 'P002 table 3: communication share (%)',
            'caption': 'share of the total time spent communicating, per rank count: measured here '
                       '(IS: coarray puts; CG: get variant) beside the paper\'s (T2K Tsukuba, class C, '
                       'one process per node)',
            'tables': tables, 'note': '; '.join(notes)}


def himeno_figure(cases, out_dir):
    """Fig. 5.8-style bars: Himeno GFLOPS per variant, one group per system."""
    bars, skipped = {}, {}
    for c in cases:
        if c['check'] == 'HimenoCudaPerf' and c['result'] == 'skip':
            skipped.setdefault(c['system'], []).append(c['params'].get('alloc'))
        if c['check'] == 'HimenoCudaPerf' and c['result'] == 'pass':
            bars.setdefault(c['system'], {})[c['params'].get('alloc')] = c['perf'].get('gflops')
        if c['check'] == 'HimenoCpuPerf' and c['result'] == 'pass':
            bars.setdefault(c['system'], {})['cpu'] = c['perf'].get('gflops')
    if not bars:
        return None, 'no Himeno results to plot'
    plt = _pyplot()
    if plt is None:
        return None, NO_MATPLOTLIB
    variants = ['cpu', 'explicit', 'managed', 'system']
    colors = {'cpu': '#888888', 'explicit': '#1f77b4', 'managed': '#ff7f0e', 'system': '#2ca02c'}
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(variants)
    for s_i, system in enumerate(sorted(bars)):
        for v_i, v in enumerate(variants):
            val = bars[system].get(v)
            x = s_i + (v_i - (len(variants) - 1) / 2) * width
            if val is None:
                if v in skipped.get(system, []):
                    ax.text(x, 0, f'{v}: skipped', rotation=90, ha='center', va='bottom', fontsize=8)
                continue
            ax.bar(x, val, width, color=colors[v], label=v if s_i == 0 else None)
            ax.text(x, val, f'{val:.0f}', ha='center', va='bottom', fontsize=8)
    ax.set_xlim(-0.5, len(bars) - 0.5)
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels(sorted(bars))
    ax.set_ylabel('GFLOPS')
    ax.set_title('Himeno (cf. P001 fig. 5.8): explicit vs UM vs SAM')
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels)
    fig.tight_layout()
    path = os.path.join(out_dir, 'himeno.png')
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return 'himeno.png', ''


# ---- P003 (remd): fig. 10 efficiency vs n, fig. 11 time split, table 2 ------------------

REMD_SOURCES = [('RemdLocal', {'kernel': 'fast'}), ('RemdVcuda', {})]
REMD_ATOMS = (256, 2048)
REMD_SPLIT_N = (64, 256, 1024, 4096)
REMD_SPLIT_COLORS = {'tGPU': '#444444', 'tCOM:B': '#8fb8de', 'tCOM:L': '#f4a261', 'tCLT': '#2a9d8f',
                     'tCOM': '#c9a0dc'}


REMD_HOWS = (('local', 'o'), ('vcuda', 's'), ('vcuda, no keep-alive', 'x'))  # (how, marker)


def _remd_runs(cases, natom):
    """{(system, how): {n: case}} of passed remd runs: how is 'local' (fast kernel),
    'vcuda' (P003's 2 ms keep-alive) or 'vcuda, no keep-alive'."""
    out = {}
    for c in _matching(cases, REMD_SOURCES):
        if str(c['params'].get('atoms')) != str(natom) or c['result'] != 'pass' or 'interval_time' not in c['perf']:
            continue
        if c['check'] == 'RemdLocal':
            how, n = 'local', c['params'].get('gpus')
        else:
            how = 'vcuda' if str(c['params'].get('keepalive_ms', '2')) != '0' else 'vcuda, no keep-alive'
            n = c['params'].get('servers')
        out.setdefault((c['system'], how), {})[int(n)] = c
    return out


def _remd_notes(cases):
    """Why remd cases are missing from the figures (they draw perf values, not records)."""
    by_reason = {}
    for c in _matching(cases, REMD_SOURCES):
        if c['result'] != 'pass':
            why = ('skipped: ' if c['result'] == 'skip' else f"{c['result']}: ") + (c['reason'] or 'no reason recorded')
            by_reason.setdefault(why, []).append(_describe(c))
    return [f"{', '.join(who)}: {why}" for why, who in by_reason.items()]


def _remd_comm(cases, system):
    """(BH, BD, LH, LD, LK in SI units, source): the system's vcuda-bench fit where its
    RemdModelFit ran with one (UMSTUDY_VCUDA_FIT), else P003's."""
    for c in cases:
        perf = c['perf']
        if c['check'] == 'RemdModelFit' and c['system'] == system and perf.get('vcuda_fit') == 1:
            return {name: perf[field] * factor for field, (name, factor) in remd_model.VCUDA_FIELDS.items()}, 'vcuda fit'
    return dict(remd_model.P003_COMM), 'P003 network'


def _remd_fit(runs, system, natom, cases=()):
    """Model parameters of a system: tGPU0, tCLT, Tlocal(1) of its one-GPU local run and
    the communication constants of _remd_comm."""
    one = runs.get((system, 'local'), {}).get(1)
    if one is None:
        return None
    p = one['perf']
    return remd_model.Params(**_remd_comm(cases, system)[0], tCLT=p['t_clt'], tGPU0=p['t_gpu0'],
                             tlocal1=p['interval_time'])


def _remd_balance(runs, system):
    """The balance model's one-GPU inputs (remd_balance_model.OneGpu) of a system's one-GPU
    fast run where it was profiled (remd --profile-segments), else None."""
    one = runs.get((system, 'local'), {}).get(1)
    if one is None:
        return None
    summary = {k: one['perf'][k] for k in ('interval_time', 't_gpu', 't_clt') if k in one['perf']}
    try:
        return remd_balance_model.from_records(one.get('records') or [], summary, one.get('record_params') or {})
    except (ValueError, KeyError):
        return None


def _remd_efficiency(runs, system, how):
    """[(n, R(n))] measured: T(1) local over n T(n) (gpu_seconds)."""
    one = runs.get((system, 'local'), {}).get(1)
    if one is None:
        return []
    t1 = one['perf']['interval_time']
    return [(n, t1 / c['perf']['gpu_seconds']) for n, c in sorted(runs.get((system, how), {}).items())
            if c['perf'].get('gpu_seconds')]


def remd_efficiency_figure(cases, out_dir):
    """P003 fig. 10: R(n) for 256 and 2,048 atoms, P003's model and measurements beside
    this system's model (its tGPU0/tCLT) and measured local and vcuda points."""
    plt = _pyplot()
    if plt is None:
        return None, NO_MATPLOTLIB
    ns = remd_model.powers_of_two()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout='constrained')
    notes = []
    for ax, natom in zip(axes, REMD_ATOMS):
        ax.plot(ns, [remd_model.R(remd_model.p003(natom), n) for n in ns], label='P003 model (TSUBAME2.5)', **PAPER_STYLE)
        paper = [(n, row[3]) for n, row in remd_model.P003_TABLE2[natom].items() if row[3] is not None]
        ax.plot(*zip(*paper), 'k^', label='P003 measured (table 2)')
        runs = _remd_runs(cases, natom)
        for i, system in enumerate(sorted({s for s, _ in runs})):
            color = f'C{i}'
            p = _remd_fit(runs, system, natom, cases)
            if p is not None:
                ax.plot(ns, [remd_model.R(p, n) for n in ns], color=color, linewidth=1.2,
                        label=f'{system} model (its tGPU0, tCLT; {_remd_comm(cases, system)[1]})')
            one = _remd_balance(runs, system)
            if one is not None:  # the artifact's model: its ladder, waves, occupancy (one GPU)
                bn = [n for n in ns if one.nrep % n == 0]
                comm, source = _remd_comm(cases, system)
                for net, style, what in ((comm, '--', source), (remd_balance_model.network('ndr400'), ':',
                                                                'NDR 400 Gbit/s')):
                    ax.plot(bn, [remd_balance_model.predict(one, net, n)['R'] for n in bn], style, color=color,
                            linewidth=1.2, label=f'{system} balance model (interleaved, thread per GPU; {what})')
            for how, marker in REMD_HOWS:
                pts = _remd_efficiency(runs, system, how)
                if pts:
                    ax.plot(*zip(*pts), marker, color=color, linestyle='none', label=f'{system} measured, {how}')
        if not runs:
            notes.append(f'{natom} atoms: no passed RemdLocal/RemdVcuda runs, P003 only')
        ax.set_xscale('log', base=2)
        ax.set_xlabel('GPUs n')
        ax.set_ylabel('efficiency R = T(1) / (n T(n))')
        ax.set_ylim(0, 1.05)
        ax.set_title(f'{natom} atoms, Nrep = 14,336', fontsize=9)
        ax.grid(alpha=0.3)
        _legend(ax)
    fig.suptitle('P003 fig. 10: parallel efficiency vs GPUs, model (lines) and measured (points)', fontsize=11)
    fig.savefig(os.path.join(out_dir, 'remd_efficiency.png'), dpi=110)
    plt.close(fig)
    return 'remd_efficiency.png', '; '.join(notes + _remd_notes(cases))


def remd_split_figure(cases, out_dir):
    """P003 fig. 11: share of T(n) in tGPU, tCOM:B, tCOM:L, tCLT from P003's model at
    n = 64..4,096, then this system's measured split (tGPU, tCOM, tCLT) per run."""
    plt = _pyplot()
    if plt is None:
        return None, NO_MATPLOTLIB
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), layout='constrained')
    for ax, natom in zip(axes, REMD_ATOMS):
        bars = []
        for n in REMD_SPLIT_N:
            parts = remd_model.split(remd_model.p003(natom), n)
            bars.append((f'P003\nn={n}', dict(zip(('tGPU', 'tCOM:B', 'tCOM:L', 'tCLT'), parts))))
        runs = _remd_runs(cases, natom)
        for (system, how), by_n in sorted(runs.items()):
            for n, c in sorted(by_n.items()):
                p = c['perf']
                bars.append((f'{system}\n{how} n={n}', {'tGPU': p['t_gpu'], 'tCOM': max(p['t_com'], 0.0),
                                                         'tCLT': p['t_clt']}))
        used = set()
        for x, (label, parts) in enumerate(bars):
            total, bottom = sum(parts.values()), 0.0
            for key, value in parts.items():
                share = 100 * value / total if total else 0
                ax.bar(x, share, bottom=bottom, color=REMD_SPLIT_COLORS[key], label=None if key in used else key)
                used.add(key)
                bottom += share
        ax.set_xticks(range(len(bars)))
        ax.set_xticklabels([b[0] for b in bars], fontsize=7)
        ax.set_ylabel('% of T(n)')
        ax.set_title(f'{natom} atoms', fontsize=9)
        _legend(ax)
    fig.suptitle('P003 fig. 11: where the time goes (P003 model; measured runs: tCOM not split)', fontsize=11)
    fig.savefig(os.path.join(out_dir, 'remd_split.png'), dpi=110)
    plt.close(fig)
    return 'remd_split.png', '; '.join(_remd_notes(cases))


def remd_table(cases):
    """P003 table 2 (model T0/R0, measured T1/R1) beside each system's: its model (its
    tGPU0/tCLT with P003's network constants) and its measured local and vcuda runs."""
    tables = []
    for natom in REMD_ATOMS:
        runs = _remd_runs(cases, natom)
        systems = sorted({s for s, _ in runs})
        headers = ['n', 'P003 T0 ms', 'P003 R0', 'P003 T1 ms', 'P003 R1']
        hows = {s: [h for h, _ in REMD_HOWS if h == 'local' or (s, h) in runs] for s in systems}
        for s in systems:
            headers += [f'{s} model T0 ms', f'{s} model R0']
            headers += [f'{s} {how} {col}' for how in hows[s] for col in ('T1 ms', 'R1')]
        ns = sorted(set(remd_model.P003_TABLE2[natom]) | {n for by_n in runs.values() for n in by_n})
        rows = []
        for n in ns:
            t0, r0, t1, r1 = remd_model.P003_TABLE2[natom].get(n, (None,) * 4)
            row = [str(n), f'{t0:,}' if t0 else '-', str(r0) if r0 is not None else '-',
                   f'{t1:,}' if t1 else '-', f'{r1:.2f}' if r1 is not None else '-']
            for s in systems:
                p = _remd_fit(runs, s, natom, cases)
                row += [f'{remd_model.T(p, n) * 1e3:,.1f}', f'{remd_model.R(p, n):.3f}'] if p else ['-', '-']
                for how in hows[s]:
                    c = runs.get((s, how), {}).get(n)
                    eff = dict(_remd_efficiency(runs, s, how))
                    row += [f"{c['perf']['interval_time'] * 1e3:,.1f}", f'{eff[n]:.3f}' if n in eff else '-'] if c else ['-', '-']
            rows.append(row)
        tables.append({'heading': f'{natom} atoms', 'headers': headers, 'rows': rows})
    notes = _remd_notes(cases)
    return {'title': 'P003 table 2: T(n) and efficiency R(n), the paper beside this artifact',
            'caption': 'P003: model T0/R0 (R0 cut to two decimals as printed) and measured T1/R1 on TSUBAME2.5 '
                       '(K20X over DS-CUDA, InfiniBand); per system: the model with its own tGPU0, tCLT and '
                       "Tlocal(1) and its vcuda-bench fit (else P003's network constants), and measured "
                       'interval times and R = T(1) / (n T(n)) '
                       '(fast kernel) locally and through vcuda',
            'tables': tables, 'note': '; '.join(notes)}


REMD_FIGURES = [
    (remd_efficiency_figure, REMD_SOURCES,
     'P003 fig. 10: parallel efficiency R(n) for 256 and 2,048 atoms (log2 n); dashed: P003\'s model, '
     'triangles: its measurements; coloured lines: the model with this system\'s tGPU0/tCLT (and its vcuda '
     'fit, else P003\'s network), points: measured '
     'locally (circles) and through vcuda with P003\'s 2 ms keep-alive (squares) and without (crosses)'),
    (remd_split_figure, REMD_SOURCES,
     'P003 fig. 11: share of T(n) spent in GPU computation, communication (bandwidth / latency) and the '
     'client, P003\'s model at n = 64..4,096 beside the measured split of each run'),
]


# P004 figures: DLM engines on the microbenchmark, the stencil and STREAM, one panel per
# benchmark holding every engine's case (_panels); the paper's numbers marked

ENGINES = ('r3', 'r58', 'r77', 'uffd')
ENGINE_NAMES = {'r3': 'R3', 'r58': 'R58', 'r77': 'R77', 'uffd': 'uffd'}
ENGINE_COLORS = {'r3': '#1f77b4', 'r58': '#ff7f0e', 'r77': '#2ca02c', 'uffd': '#9467bd'}


def _engine(case):
    return case['params'].get('engine')


def _engines_of(members):
    """{engine: case} of the members with records, in the paper's order."""
    out = {_engine(c): c for c in members if not _why_empty(c)}
    return {e: out[e] for e in sorted(out, key=lambda e: ENGINES.index(e) if e in ENGINES else len(ENGINES))}


def _not_run_engines(ax, members):
    ran = _engines_of(members)
    for e in ENGINES:
        if any(_engine(c) == e for c in members) and e not in ran:
            ax.plot([], [], color=ENGINE_COLORS[e], alpha=0.35, linewidth=4,
                    label=f'{ENGINE_NAMES[e]}: not run (see note)')


def _draw_dlm_micro(ax, panel):
    """Fig. 2.3/3.1: time per engine, bars grouped by thread count; the paper's
    ratios drawn as R3's measured time x the paper's factor."""
    engines = _engines_of(panel['members'])
    times = {e: {r['threads']: r['value'] for r in _recs(c, 'time') if 'threads' in r} for e, c in engines.items()}
    threads = sorted({t for ts in times.values() for t in ts})
    if not threads:
        return False
    width = 0.8 / max(1, len(engines))
    for i, (e, ts) in enumerate(times.items()):
        xs = [k + (i - (len(engines) - 1) / 2) * width for k, t in enumerate(threads) if t in ts]
        ax.bar(xs, [ts[t] for t in threads if t in ts], width, color=ENGINE_COLORS.get(e, 'grey'),
               label=ENGINE_NAMES.get(e, e) + _failed(engines[e]))
    r58_over_r3, label = _paper('P004-C1')
    r3_over_r77, _ = _paper('P004-C2')
    r3 = times.get('r3', {})
    marks = [('r58', 1, r58_over_r3), ('r77', 1, 1 / r3_over_r77['t1']), ('r77', 12, 1 / r3_over_r77['t12'])]
    first = True
    for e, t, factor in marks:
        if e in times and t in threads and t in r3:
            i = list(times).index(e)
            x = threads.index(t) + (i - (len(engines) - 1) / 2) * width
            _paper_tick(ax, x, r3[t] * factor, width * 1.3,
                        label=f'{label}: R3 here × the paper\'s ratio' if first else None)
            first = False
    _not_run_engines(ax, panel['members'])
    ax.set_xticks(range(len(threads)))
    ax.set_xticklabels([str(t) for t in threads])
    ax.set_xlabel('OpenMP threads of the compute rank')
    ax.set_ylabel('write + read time (s)')
    ax.set_ylim(bottom=0)
    _legend(ax)
    return True


def _draw_dlm_stencil(ax, panel):
    """Fig. 4.2: Effective MFLOPS vs problem/capacity; the paper's retention at 4x
    drawn as each engine's in-memory MFLOPS x the paper's percentage."""
    engines = _engines_of(panel['members'])
    keep, label = _paper('P004-C4')
    drawn = False
    for e, c in engines.items():
        pts = [(r['ratio'], r['value']) for r in _recs(c, 'mflops') if 'ratio' in r]
        if not pts:
            continue
        _line(ax, pts, ENGINE_NAMES.get(e, e) + _failed(c), color=ENGINE_COLORS.get(e, 'grey'))
        drawn = True
        base = min(pts)[1]
        paper = keep.get(ENGINE_NAMES.get(e, e))
        if paper is not None:
            ax.plot([4], [base * paper / 100], marker='_', markersize=16, markeredgewidth=2,
                    color=ENGINE_COLORS.get(e, 'grey'), linestyle='none',
                    label=f'{label}: {ENGINE_NAMES[e]} keeps {paper}% at 4x')
    if not drawn:
        return False
    _not_run_engines(ax, panel['members'])
    ax.axvline(1, color='#888888', linewidth=0.8, linestyle=':')
    ax.set_xscale('log', base=2)
    ax.xaxis.set_major_formatter(_plain_formatter())
    ax.set_xlabel('problem (both grids) / compute capacity')
    ax.set_ylabel('Effective MFLOPS')
    ax.set_ylim(bottom=0)
    _legend(ax)
    return True


def _draw_dlm_stream(ax, panel):
    """Figs. 4.4-4.7: triad MB/s vs arrays/capacity per engine, the MPI p2p bandwidth
    measured in the same runs, and the paper's levels beyond 3x memory."""
    engines = _engines_of(panel['members'])
    levels, label = _paper('P004-C5')
    mpi = []
    for e, c in engines.items():
        pts = [(r['ratio'], r['value']) for r in _recs(c, 'bandwidth', kernel='triad') if 'ratio' in r]
        if pts:
            _line(ax, pts, ENGINE_NAMES.get(e, e) + ' triad' + _failed(c), color=ENGINE_COLORS.get(e, 'grey'))
        mpi += [r['value'] for r in _recs(c, 'mpi_p2p_bw')]
        paper = levels.get(ENGINE_NAMES.get(e, e))
        if paper is not None and pts:
            ax.hlines(paper, 3, max(x for x, _ in pts), color=ENGINE_COLORS.get(e, 'grey'),
                      label=f'{label}: {ENGINE_NAMES[e]} {paper} MB/s beyond 3x', **{
                          k: v for k, v in PAPER_STYLE.items() if k != 'color'})
    if not ax.lines and not ax.collections:
        return False
    if mpi:
        bw = sorted(mpi)[len(mpi) // 2]
        ax.axhline(bw, label=f'MPI p2p, same ranks (median {bw:.0f} MB/s)', **MEASURED_STYLE)
        for target in ('DLM-T1', 'DLM-T7'):  # R77's and uffd's floors, from the claims
            frac = data.claim(target)['bound']['lower']
            ax.axhline(bw * frac, label=f'{frac:.0%} of it ({target})', **dict(MEASURED_STYLE, linewidth=1.0))
    _not_run_engines(ax, panel['members'])
    ax.axvline(1, color='#888888', linewidth=0.8, linestyle=':')
    ax.set_xscale('log', base=2)
    ax.xaxis.set_major_formatter(_plain_formatter())
    ax.set_yscale('log')
    ax.yaxis.set_major_formatter(_plain_formatter())
    ax.set_xlabel('three arrays / compute capacity')
    ax.set_ylabel('MB/s (log)')
    _legend(ax)
    return True


DLM_MICRO_SOURCES = [('DlmMicro', {})]
DLM_STENCIL_SOURCES = [('DlmStencil', {})]
DLM_STREAM_SOURCES = [('DlmStream', {})]


def dlm_engines_figure(cases, out_dir):
    """P004 figs. 2.3/3.1: microbenchmark time per engine and thread count."""
    return _figure(cases, out_dir, 'dlm_engines.png', 'P004 fig. 2.2 microbenchmark: time per engine',
                   DLM_MICRO_SOURCES, _draw_dlm_micro, panel=(7.0, 3.8),
                   panels=[('microbenchmark', ('DlmMicro',), {})])


def dlm_stencil_figure(cases, out_dir):
    """P004 fig. 4.2: stencil Effective MFLOPS vs problem size per engine."""
    return _figure(cases, out_dir, 'dlm_stencil.png', 'P004 §4.1 7-point stencil: Effective MFLOPS vs size',
                   DLM_STENCIL_SOURCES, _draw_dlm_stencil, panel=(6.5, 3.8),
                   panels=[('stencil', ('DlmStencil',), {})])


def dlm_stream_figure(cases, out_dir):
    """P004 figs. 4.4-4.7: STREAM triad vs size per engine beside the MPI bandwidth."""
    return _figure(cases, out_dir, 'dlm_stream.png', 'P004 §4.2 STREAM on DLM arrays: triad vs size',
                   DLM_STREAM_SOURCES, _draw_dlm_stream, panel=(6.5, 3.8),
                   panels=[('STREAM', ('DlmStream',), {})])


# P004 figs. 2.4 (R58) and 3.2 (R77) are graphs; the text states one number of them:
# R58's external-queue wait (its point C, q here) is 7% of a page exchange at 1 thread
# and about 80% at 12 (P004 §2.3).
DLM_TIMING_POINTS = ('a', 'b', 'q', 'c', 'd', 'wake', 'stall')
DLM_PAPER_Q_SHARE = {'t1': 7, 't12': 80}
_DLM_TIMING_VAR = re.compile(r'fault_(\w+?)_(us|share)_(t\d+|[\d.]+x)$')


def dlm_fault_table(cases):
    """P004 figs. 2.4/3.2 beside what ran here: per system and size, a row per engine
    and phase (microbenchmark at a thread count, stencil at a ratio) with the mean of
    each per-fault timing point (checks run with -S fault_timing=1), then P004's R58
    rows -> {title, caption, tables: [{heading, headers, rows}], note}."""
    picked = _matching(cases, DLM_MICRO_SOURCES + DLM_STENCIL_SOURCES)
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
    notes = [] if tables else ['no DlmMicro / DlmStencil run with -S fault_timing=1']
    return {'title': 'P004 figs. 2.4/3.2: per-fault timing points (mean us)',
            'caption': 'a fault -> request dequeued, b -> page received, q -> install begins (R58: the external '
                       'queue), c install + swap-out with the threads stopped, d resume -> exchange over (victim '
                       'written back), wake resume -> faulting thread runs, stall fault -> thread runs; uffd '
                       'cannot see a, wake, stall. P004 draws these as graphs; its text gives R58\'s q share '
                       '(7% at 1 thread, ~80% at 12)',
            'tables': tables, 'note': '; '.join(notes)}


DLM_FIGURES = [
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

