"""P002 (XcalableMP coarrays over GASNet / ARMCI / MPI-3): ping-pong (figs. 2/3) and
NPB IS/CG per backend, one panel per quantity holding every backend's case, and
table 3 (communication share) beside what ran here."""
from .common import (MPI_STYLE, errline, figure, hollow, matching, median, note_hollow, notes, one,
                     plain_formatter, bytes_formatter, legend, series, why_empty)

BACKENDS = ('mpi3', 'armci', 'gasnet')
BACKEND_NAMES = {'mpi3': 'MPI-3', 'armci': 'ARMCI', 'gasnet': 'GASNet'}
BACKEND_COLORS = {'mpi3': '#1f77b4', 'armci': '#ff7f0e', 'gasnet': '#2ca02c'}


def backend(case):
    return case['params'].get('backend')


def backend_order(case):
    return BACKENDS.index(backend(case)) if backend(case) in BACKENDS else len(BACKENDS)


def _not_run(ax, members):
    """Legend entries for the backends with nothing here (the figure's note says why)."""
    ran = {backend(c) for c in members if not why_empty(c)}
    for b in dict.fromkeys(backend(c) for c in sorted(members, key=backend_order)):
        if b and b not in ran:
            ax.plot([], [], color=BACKEND_COLORS.get(b, 'grey'), alpha=0.35, linewidth=4,
                    label=f'{BACKEND_NAMES.get(b, b)}: not run (see note)')


def _draw_pingpong(ax, panel):
    metric, op = panel['metric'], panel['op']
    members = sorted(panel['members'], key=backend_order)
    drawn = any_hollow = False
    for c in members:
        pts = [(k[0], s) for k, s in series(c, metric, by=('bytes',), op=op).items()]
        if errline(ax, pts, BACKEND_NAMES.get(backend(c), backend(c)), hollow(c),
                   color=BACKEND_COLORS.get(backend(c), 'grey')):
            drawn, any_hollow = True, any_hollow or hollow(c)
    raw = next((c for c in members if series(c, metric, op='raw-' + op, by=('bytes',))), None)
    if raw:
        errline(ax, [(k[0], s) for k, s in series(raw, metric, by=('bytes',), op='raw-' + op).items()],
                f'raw MPI-3 RMA {op}\n(in the {backend(raw)} run)', hollow(raw), **MPI_STYLE)
    if not drawn and not raw:
        return False
    _not_run(ax, members)
    note_hollow(ax, any_hollow)
    from matplotlib.ticker import LogLocator
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(bytes_formatter())
    ax.yaxis.set_major_formatter(plain_formatter())
    ax.grid(True, which='major', alpha=0.3)
    ax.set_xlabel('message size (bytes)')
    ax.set_ylabel({'latency': 'half round trip (µs, log)'}.get(metric, f'{metric} (MB/s, log)'))
    ax.legend(fontsize=6.5, loc='upper left')  # inside: the lines rise from the lower left
    return True


def _draw_npb(ax, panel):
    lines = {}  # (backend order, variant, label, style) -> [(ranks, spread, hollow)]
    for c in panel['members']:
        b, variant = backend(c), c['params'].get('variant', '')
        label = (f'coarray {BACKEND_NAMES.get(b, b)}' + (f' {variant}' if variant else '')
                 if b else panel['baseline'])
        style = (dict(color=BACKEND_COLORS.get(b, 'grey'), linestyle='-.' if variant == 'putacc' else '-')
                 if b else MPI_STYLE)
        key = (backend_order(c), variant, label, tuple(sorted(style.items())))
        mops = one(c, 'mops')
        if mops:
            lines.setdefault(key, []).append((int(c['params']['ranks']), mops, hollow(c)))
    if not lines:
        return False
    any_hollow = False
    for (_, _, label, style), pts in sorted(lines.items()):
        style = dict(style)
        solid = [(x, s) for x, s, h in pts if not h]
        open_ = [(x, s) for x, s, h in pts if h]
        color = style.pop('color')
        errline(ax, solid or open_, label, not solid, color=color, **style)
        if solid and open_:   # the indicative points of a line: hollow, on the same line style
            errline(ax, open_, None, True, color=color, **dict(style, linestyle='none'))
        any_hollow = any_hollow or bool(open_)
    _not_run(ax, panel['members'])
    note_hollow(ax, any_hollow)
    ranks = sorted({x for pts in lines.values() for x, _, _ in pts})
    ax.set_xscale('log', base=2)
    ax.set_xticks(ranks)
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.set_xlim(ranks[0] / 1.3, ranks[-1] * 1.3)
    ax.set_ylim(bottom=0)
    ax.grid(True, which='major', alpha=0.3)
    ax.set_xlabel('ranks (images)')
    ax.set_ylabel('Mop/s')
    legend(ax)
    return True


def npb_classes(cases):
    """'class S' or 'class S (quick size), C (paper size)': the NPB class(es) the cases ran."""
    found = sorted({(c['size'], c['record_params']['class']) for c in cases if c['record_params'].get('class')},
                   key=lambda sc: (sc[0] == 'paper', sc))
    if len({cls for _, cls in found}) == 1:
        return f'class {found[0][1]}'
    return ('class ' + ', '.join(f'{cls} ({size} size)' for size, cls in found)) if found else ''


PINGPONG_SOURCES = [('CabPingPong', {})]
NPB_SOURCES = [('CabIs', {}), ('CabIsMpi', {}), ('CabCg', {}), ('CabCgMpi', {})]
PINGPONG_PANELS = [(f'{op} {metric}', ('CabPingPong',), {'op': op, 'metric': metric})
                   for op in ('put', 'get') for metric in ('latency', 'bandwidth')]
NPB_PANELS = [('IS', ('CabIs', 'CabIsMpi'), {'baseline': 'MPI_Alltoallv (original)'}),
              ('CG', ('CabCg', 'CabCgMpi'), {'baseline': 'two-sided MPI'})]


def cab_pingpong_figure(cases, out_dir):
    """P002 figs. 2/3: coarray put/get ping-pong latency and bandwidth vs message size."""
    return figure(cases, out_dir, 'cab_pingpong.png',
                  'P002 figs. 2/3: coarray put/get ping-pong between 2 images, per backend',
                  PINGPONG_SOURCES, _draw_pingpong, panel=(4.6, 3.6), panel_specs=PINGPONG_PANELS)


def cab_npb_figure(cases, out_dir):
    """P002 NPB IS and CG: Mop/s vs ranks per backend beside the MPI originals."""
    classes = npb_classes(matching(cases, NPB_SOURCES))
    return figure(cases, out_dir, 'cab_npb.png',
                  'P002 NPB IS and CG' + (f', {classes}' if classes else '') + ': Mop/s vs ranks',
                  NPB_SOURCES, _draw_npb, panel=(6.2, 3.8), panel_specs=NPB_PANELS)


FIGURES = [
    (cab_pingpong_figure, PINGPONG_SOURCES,
     'P002 figs. 2/3: coarray put and get ping-pong, half round trip latency and bandwidth vs '
     'message size (log-log), one line per backend; dashed: the raw MPI-3 RMA ping-pong of the same run'),
    (cab_npb_figure, NPB_SOURCES,
     'P002 NPB: IS (key exchange by coarray puts) and CG (q reduced by coarray gets, dash-dot: '
     'put-accumulate) Mop/s vs ranks per backend; dashed: the MPI originals (MPI_Alltoallv, two-sided MPI)'),
]


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
    count, columns IS and CG (get) communication share per backend measured (the median
    over the repeats, as the figures draw it), then the paper's ->
    {title, caption, tables: [{heading, headers, rows}], note}."""
    picked = matching(cases, COMM_SOURCES)
    shares = {}  # (system, size) -> {(kernel, backend): {ranks: %}}
    for c in picked:
        share = median(one(c, 'comm_share'))
        if share is not None:
            shares.setdefault((c['system'], c['size']), {}).setdefault(
                (KERNELS[c['check']], backend(c)), {})[int(c['params']['ranks'])] = share
    tables = []
    for (system, size), measured in sorted(shares.items()):
        cols = []
        for kernel in ('IS', 'CG'):
            cols += [(f'{kernel} {b}' + (' (get)' if kernel == 'CG' else ''), measured[kernel, b])
                     for b in BACKENDS if (kernel, b) in measured]
            cols += [(f'{kernel} paper {BACKEND_NAMES[b]}', P002_TABLE3[kernel, b]) for b in ('gasnet', 'armci')]
        ranks = sorted({n for _, col in cols for n in col})
        classes = npb_classes([c for c in picked if (c['system'], c['size']) == (system, size)])
        tables.append({'heading': f'{system} ({size} size' + (f', {classes}' if classes else '') + ')',
                       'headers': ['ranks'] + [name for name, _ in cols],
                       'rows': [[str(n)] + [f'{col[n]:.2f}' if n in col else '-' for _, col in cols]
                                for n in ranks]})
    said = ([] if tables else ['no CabIs / CabCg variant=get comm_share data']) + notes(picked)
    return {'title': 'P002 table 3: communication share (%)',
            'caption': 'share of the total time spent communicating, per rank count: measured here '
                       '(IS: coarray puts; CG: get variant; median of the repeats) beside the paper\'s '
                       '(T2K Tsukuba, class C, one process per node)',
            'tables': tables, 'note': '; '.join(said)}
