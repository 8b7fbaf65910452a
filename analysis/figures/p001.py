"""P001 (Unified Memory on GH200, Miyabi): per-rep bandwidth traces (figs. 5.1-5.7) as
the median over repeats with a min..max band, and Himeno per variant (fig. 5.8)."""
import os

from .common import (NO_MATPLOTLIB, PAPER_STYLE, V, data, errbars, errband, figure, hollow, legend, median,
                     note_hollow, one, paper, paper_level, plain_formatter, pyplot, records, save, series)

BASELINE_SERIES = ('cpu_copy', 'gpu_copy', 'h2d', 'd2h', 'd2d')
PHASE_DEVICE = {'phase1': 'GPU', 'phase2': 'CPU', 'phase3': 'GPU'}


def traces(case, key='series', trial=0):
    """{series: [(rep, spread over repeats)]} of a case's per-rep bandwidth records of one trial."""
    out = {}
    for (name, rep), s in series(case, 'bandwidth', by=(key, 'rep'), trial=trial).items():
        out.setdefault(name, []).append((rep, s))
    return {k: sorted(v) for k, v in out.items()}


def _trace_axes(ax, case, xlabel='rep (trial 0)'):
    ax.set_yscale('log')
    ax.yaxis.set_major_formatter(plain_formatter())
    ax.set_xlabel(xlabel + (f', {case["params"]["array"]} array' if 'array' in case['params'] else '')
                  + ('; median of the repeats, band: min..max' if case.get('measured_repeats', 0) > 1 else '')
                  + (f'\nindicative: {V.indicative_case(case)}' if hollow(case) else ''))
    ax.set_ylabel('bandwidth (GB/s, log)')
    ax.grid(True, which='major', alpha=0.3)
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _draw_baseline(ax, case):
    found = traces(case)
    if not found:
        return False
    levels = {}
    for claim_id in ('P001-C1', 'P001-C2', 'P001-C3'):
        c = data.claim(claim_id)
        name = c['measure'].get('var') if 'var' in c['measure'] else None
        levels.update({name: c['value']} if name else c['value'])
    label = paper('P001-C1')[1]
    names = [s for s in BASELINE_SERIES if s in found] + sorted(s for s in found if s not in BASELINE_SERIES)
    for i, s in enumerate(names):
        errband(ax, found[s], s, f'C{i}')
        if s in levels:
            paper_level(ax, levels[s], None, color=f'C{i}')
    if any(s in levels for s in names):
        ax.plot([], [], label=f'{label} (series colour)', **PAPER_STYLE)
    _trace_axes(ax, case)
    legend(ax)
    return True


def _draw_patterns(ax, case):
    found = traces(case)
    if not found:
        return False
    desc = {int(r['value']): r for r in records(case, 'pattern')}

    def number(s):
        return int(s[1:]) if s and s[1:].isdigit() else 99
    for s in sorted(found, key=number):
        d = desc.get(number(s), {})
        name = f"{s}: {d['src']}→{d['dst']} by {d['by']}" if all(k in d for k in ('src', 'dst', 'by')) else s
        gpu = d.get('by', 'GPU' if number(s) >= 5 else 'CPU').upper() == 'GPU'
        errband(ax, found[s], name, f'C{(number(s) - 1) % 10}', linestyle='-' if gpu else '--', linewidth=1.1)
    levels, label = paper('P001-C5')  # SAM (system allocator) only, 4 GB and 8 GB
    level = levels.get(f"p5_{case['params'].get('array', '')}B")
    if case['params'].get('alloc') == 'system' and level is not None:
        paper_level(ax, level, f'{label}: p5–p7 settled')
    _trace_axes(ax, case)
    legend(ax)
    return True


def _draw_migration(ax, case):
    found = traces(case, key='phase')
    if not found:
        return False
    start = 0
    for i, phase in enumerate(sorted(found)):
        pts = found[phase]
        errband(ax, [(start + j, s) for j, (_, s) in enumerate(pts)], None, f'C{i}')
        if start:
            ax.axvline(start - 0.5, color='grey', linestyle=':', linewidth=1)
        ax.text(start + len(pts) / 2, 0.97, f'{phase}: {PHASE_DEVICE.get(phase, "?")}', color=f'C{i}',
                ha='center', va='top', fontsize=8, transform=ax.get_xaxis_transform())
        start += len(pts)
    _trace_axes(ax, case, 'rep, phases concatenated (trial 0)')
    ax.set_ylim(top=max(s['max'] for pts in found.values() for _, s in pts) * 6)  # room for the phase names
    ramp = median(one(case, 'phase3_ramp'))
    value, label = paper('P001-C7')
    if ramp is not None:
        ax.set_xlabel(ax.get_xlabel() + f'\nphase 3 settled/first = {ramp:.3g}× '
                      f"({label}, SAM: ≈ {value['phase3_ramp']}×, no ramp)")
    return True


BASELINE_SOURCES = [('UmbBaseline', {})]
PATTERNS_SOURCES = [('UmbPatterns', {})]
MIGRATION_SOURCES = [('UmbMigration', {})]


def umb_baseline_figure(cases, out_dir):
    """P001 figs 5.1-5.3: per-rep bandwidth of the baseline copies."""
    return figure(cases, out_dir, 'umb_baseline.png', 'P001 baselines: per-rep bandwidth',
                  BASELINE_SOURCES, _draw_baseline)


def umb_patterns_figure(cases, out_dir):
    """P001 figs 5.4-5.6: per-rep bandwidth of the 8 first-touch placement patterns."""
    return figure(cases, out_dir, 'umb_patterns.png', 'P001 8 patterns: per-rep bandwidth',
                  PATTERNS_SOURCES, _draw_patterns, panel=(7.5, 4.2))


def umb_migration_figure(cases, out_dir):
    """P001 fig. 5.7: per-rep bandwidth over the GPU -> CPU -> GPU phases."""
    return figure(cases, out_dir, 'umb_migration.png', 'P001 migration: GPU → CPU → GPU phases',
                  MIGRATION_SOURCES, _draw_migration, panel=(5.4, 3.8))


FIGURES = [
    (umb_baseline_figure, BASELINE_SOURCES,
     'P001 figs 5.1-5.3: per-rep bandwidth of CPU copy, GPU copy, HtoD, DtoH, DtoD (trial 0, log y); '
     'dashed: the paper\'s Miyabi levels'),
    (umb_patterns_figure, PATTERNS_SOURCES,
     'P001 figs 5.4-5.6: per-rep bandwidth of the 8 placement patterns per allocator and array '
     '(HM/DM: Src/Dst first-touched in host/device memory; trial 0, log y; dashed lines: copies by the CPU)'),
    (umb_migration_figure, MIGRATION_SOURCES,
     'P001 fig. 5.7: per-rep bandwidth over the GPU → CPU → GPU phases (trial 0, log y)'),
]

# The claims the Himeno figure (P001 fig. 5.8) shows.
HIMENO_CLAIMS = ('P001-C8', 'HIM-T1', 'HIM-T2')
HIMENO_VARIANTS = ('cpu', 'explicit', 'managed', 'system')
HIMENO_COLORS = {'cpu': '#888888', 'explicit': '#1f77b4', 'managed': '#ff7f0e', 'system': '#2ca02c'}


def himeno_bars(cases):
    """({system: {variant: (spread of gflops, case)}}, {system: [skipped variants]})."""
    bars, skipped = {}, {}
    for c in cases:
        variant = 'cpu' if c['check'] == 'HimenoCpuPerf' else c['params'].get('alloc')
        if c['check'] not in ('HimenoCudaPerf', 'HimenoCpuPerf'):
            continue
        if c['status'] == V.SKIPPED:
            skipped.setdefault(c['system'], []).append(variant)
        elif c['status'] == V.MEASURED and c['samples'].get('gflops'):
            bars.setdefault(c['system'], {})[variant] = (V.spread(c['samples']['gflops']), c)
    return bars, skipped


def himeno_figure(cases, out_dir):
    """Fig. 5.8-style bars: Himeno GFLOPS per variant (median, min..max), one group per system."""
    bars, skipped = himeno_bars(cases)
    if not bars:
        return None, 'no HimenoCpuPerf / HimenoCudaPerf measurements to plot'
    plt = pyplot()
    if plt is None:
        return None, NO_MATPLOTLIB
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(HIMENO_VARIANTS)
    any_hollow = False
    for s_i, system in enumerate(sorted(bars)):
        for v_i, v in enumerate(HIMENO_VARIANTS):
            x = s_i + (v_i - (len(HIMENO_VARIANTS) - 1) / 2) * width
            if v not in bars[system]:
                if v in skipped.get(system, []):
                    ax.text(x, 0, f'{v}: skipped', rotation=90, ha='center', va='bottom', fontsize=8)
                continue
            stat, case = bars[system][v]
            h = hollow(case)
            any_hollow |= h
            errbars(ax, [x], [stat], width, HIMENO_COLORS[v], labels=[v if s_i == 0 else None], hollows=[h])
            m = stat['median']
            ax.text(x, stat['max'], f'{m:.0f}' if m >= 100 else f'{m:.3g}', ha='center', va='bottom', fontsize=8)
    note_hollow(ax, any_hollow, bars=True)
    ax.set_xlim(-0.5, len(bars) - 0.5)
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels(sorted(bars))
    ax.set_ylabel('GFLOPS (median, min..max)')
    ax.set_title('Himeno (cf. P001 fig. 5.8): explicit vs UM vs SAM')
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, os.path.join(out_dir, 'himeno.png'))
    plt.close(fig)
    return 'himeno.png', ''
