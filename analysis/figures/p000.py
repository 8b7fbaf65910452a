"""P000 (OpenACC data directives vs Unified Memory on Cygnus): figs. 2-6 redrawn from
umbench's records, medians over the repeats with min..max bars, the paper's marks."""
from .common import (PAPER_STYLE, MEASURED_STYLE, data, errbars, errline, figure, gib, hollow, legend,
                     note_hollow, one, paper, paper_tick, plain_formatter, series)

MODES = ('explicit', 'managed', 'both', 'prefetch')
MODE_COLORS = {'explicit': '#1f77b4', 'managed': '#ff7f0e', 'both': '#9467bd', 'prefetch': '#2ca02c'}


def _draw_modes(ax, case):
    times = {k[0]: s for k, s in series(case, 'time', by=('mode',)).items()}
    modes = [m for m in MODES if m in times] + sorted(m for m in times if m not in MODES)
    if not modes:
        return False
    med = {m: times[m]['median'] for m in modes}
    h = hollow(case)
    errbars(ax, range(len(modes)), [times[m] for m in modes], 0.6,
            [MODE_COLORS.get(m, 'grey') for m in modes], hollows=[h] * len(modes))
    base = med.get('explicit')
    for i, m in enumerate(modes):  # at the foot of the bars: higher up are the paper's marks
        ax.text(i, max(med.values()) * 0.02, f'{med[m]:.0f} ms' + (f'\n{med[m] / base:.2f}× expl.'
                if base and m != 'explicit' else ''), ha='center', va='bottom', fontsize=7,
                bbox={'facecolor': 'white', 'alpha': 0.75, 'edgecolor': 'none', 'pad': 1})
    ratios, label = paper('P000-C1')
    marks, text = [], []
    if 'both' in med:
        x = modes.index('both')
        for ref, key in (('explicit', 'both_over_manual'), ('managed', 'both_over_auto')):
            if med.get(ref):
                marks.append((med[ref] * ratios[key], f'{ratios[key]}× {ref}'))
                text.append(f'both/{ref} {med["both"] / med[ref]:.2f} ({ratios[key]})')
        for i, (y, what) in enumerate(sorted(marks)):  # the lower label below its line, the upper above
            paper_tick(ax, x, y, 0.8, label=None if i else f'{label}:\nboth = ratio × ref')
            ax.text(x + 0.42, y, what, fontsize=6.5, va='bottom' if i else 'top')
        marks = [y for y, _ in marks]
    note_hollow(ax, h, bars=True)
    if marks or h:
        legend(ax)
    if marks:
        ax.text(1.02, 0.0, 'measured (paper):\n' + '\n'.join(text), transform=ax.transAxes,
                va='bottom', fontsize=7)
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels(modes)
    ax.set_xlim(-0.6, len(modes) - 0.1)
    ax.set_ylim(0, max([times[m]['max'] for m in modes] + marks) * 1.1)
    ax.set_ylabel('time, init to CPU sum (ms)')
    ax.set_xlabel(gib(case))
    return True


def sweep_drawer(xfield, xlabel, crossover, claim_id, logx=False, flat_claim=None):
    """Draws time vs xfield, one line per mode, the measured crossover and the paper's."""
    def draw(ax, case):
        lines = {}
        for (mode, x), s in series(case, 'time', by=('mode', xfield)).items():
            lines.setdefault(mode, []).append((x, s))
        if not lines:
            return False
        h = hollow(case)
        for mode in sorted(lines, key=lambda m: MODES.index(m) if m in MODES else len(MODES)):
            errline(ax, lines[mode], mode, h, color=MODE_COLORS.get(mode, 'grey'))
        unit = xlabel.split('(')[-1].rstrip(')')
        measured = one(case, crossover)
        if measured is not None:
            ax.axvline(measured['median'], label=f"measured crossover {measured['median']:.4g} {unit}"
                       + (f" ({measured['min']:.4g}..{measured['max']:.4g})" if measured['n'] > 1 else ''),
                       **MEASURED_STYLE)
        value, label = paper(claim_id)
        ax.axvline(value, label=f'{label}: {value} {unit}', **PAPER_STYLE)
        if flat_claim and case['size'] == data.claim(flat_claim).get('size'):
            flat, _ = paper(flat_claim)  # a time on Cygnus: only comparable at the paper's size
            ax.hlines(flat, min(x for pts in lines.values() for x, _ in pts), value * 0.94,
                      label=f'{label}: managed flat ≈ {flat} ms', **dict(PAPER_STYLE, linestyle='-.'))
        note_hollow(ax, h)
        if logx:
            ax.set_xscale('log', base=2)
            ax.xaxis.set_major_formatter(plain_formatter())
        ax.set_ylim(bottom=0)
        ax.set_xlabel(xlabel + (f', {gib(case)}' if gib(case) else ''))
        ax.set_ylabel('time, init to CPU sum (ms)')
        legend(ax)
        return True
    return draw


def _draw_halo(ax, case):
    times = {k: s for k, s in series(case, 'time', by=('pack', 'mode')).items()}
    packs = [p for p in ('cpu', 'gpu') if any(k[0] == p for k in times)]
    if not packs:
        return False
    problem = case['params'].get('problem')
    (cpu_ratio, label), (gpu_ratio, _) = paper('P000-C5'), paper('P000-C6')
    ratio = {'cpu': cpu_ratio.get(problem), 'gpu': gpu_ratio.get(problem)}
    width, ticks, h = 0.36, [], hollow(case)
    for i, pack in enumerate(packs):
        expl, man = times.get((pack, 'explicit')), times.get((pack, 'managed'))
        for j, (mode, t) in enumerate((('explicit', expl), ('managed', man))):
            errbars(ax, [i + (j - 0.5) * width], [t], width, MODE_COLORS[mode],
                    labels=[mode if i == 0 else None], hollows=[h])
        xm = i + 0.5 * width
        if expl and man:
            ax.text(xm, man['max'] * 1.08, f"{man['median'] / expl['median']:.2f}×", ha='center', va='bottom',
                    fontsize=8, weight='bold')
        if expl and ratio[pack]:
            paper_tick(ax, xm, expl['median'] * ratio[pack], width * 1.1,
                       label=f'{label}:\nratio × explicit' if i == 0 else None)
        ticks.append(f'{pack.upper()} pack' + (f'\npaper {ratio[pack]}×' if ratio[pack] else ''))
    note_hollow(ax, h, bars=True)
    ax.set_xticks(range(len(packs)))
    ax.set_xticklabels(ticks)
    ax.set_yscale('log')
    ax.yaxis.set_major_formatter(plain_formatter())
    ax.set_ylim(min(s['min'] for s in times.values()) / 3, max(s['max'] for s in times.values()) * 2.5)
    n = case['record_params'].get('n')
    ax.set_xlabel((f'{n}² grid; ' if n else '') + 'managed/explicit on the bars')
    ax.set_ylabel('time (ms, log)')
    legend(ax)
    return True


MODES_SOURCES = [('UmbModes', {}), ('UmbAcc', {'program_name': 'modes'})]
FRACTION_SOURCES = [('UmbFraction', {}), ('UmbAcc', {'program_name': 'fraction'})]
STRIDE_SOURCES = [('UmbStride', {}), ('UmbAcc', {'program_name': 'stride'})]
HALO_SOURCES = [('UmbHalo', {})]


def umb_modes_figure(cases, out_dir):
    """P000 fig. 2-3: time per compile/allocation mode, the paper's ratios marked."""
    return figure(cases, out_dir, 'umb_modes.png', 'P000 exp. 1: time per mode (init, GPU +1, CPU sum)',
                  MODES_SOURCES, _draw_modes)


def umb_fraction_figure(cases, out_dir):
    """P000 fig. 4: time vs the fraction of the array the GPU touches."""
    return figure(cases, out_dir, 'umb_fraction.png', 'P000 exp. 2: time vs touched fraction',
                  FRACTION_SOURCES, sweep_drawer('fraction_pct', 'touched fraction (%)', 'crossover_pct', 'P000-C2'))


def umb_stride_figure(cases, out_dir):
    """P000 fig. 5: time vs access stride."""
    return figure(cases, out_dir, 'umb_stride.png', 'P000 exp. 3: time vs stride',
                  STRIDE_SOURCES, sweep_drawer('stride_kib', 'stride (KiB)', 'crossover_kib', 'P000-C3',
                                               logx=True, flat_claim='P000-C4'))


def umb_halo_figure(cases, out_dir):
    """P000 fig. 6: halo-exchange stencil, explicit vs managed per problem and pack."""
    return figure(cases, out_dir, 'umb_halo.png', 'P000 exp. 4: 2-rank halo stencil, explicit vs managed',
                  HALO_SOURCES, _draw_halo, panel=(5.8, 3.9))


# (function, the checks it draws, caption)
FIGURES = [
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
]
