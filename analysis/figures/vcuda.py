"""P003's remoting measurements (DS-CUDA, here src/vcuda): copy time vs size with the
T = S/B + L fits (figs. 4-7) and D2H latency after idle gaps (figs. 8/9), medians over
the repeats with min..max bars."""
from .common import (PAPER_STYLE, errline, figure, hollow, legend, note_hollow, paper, paper_level,
                     plain_formatter, bytes_formatter, records, series)

VCUDA_COPY_SOURCES = [('VcudaBench', {})]
VCUDA_COPY_PANELS = [(f'{d} copy time', ('VcudaBench',), {'dir': d}) for d in ('H2D', 'D2H')]
VCUDA_IDLE_SOURCES = [('VcudaKeepalive', {}), ('VcudaBench', {'transport': 'local'})]
VCUDA_IDLE_PANELS = [('D2H after idle', ('VcudaKeepalive', 'VcudaBench'), {})]
TRANSPORT_COLORS = {'local': '#2ca02c', 'vcuda-tcp': '#1f77b4', 'vcuda-ucx': '#9467bd'}


def _draw_vcuda_copy(ax, panel):
    """T(S) per transport (one server), the fitted T = S/B + L, and P003's fit."""
    d = panel['dir']
    b_var, l_var = ('BH', 'LH') if d == 'H2D' else ('BD', 'LD')
    sizes, any_hollow = [], False
    for c in panel['members']:
        pts = [(k[0], s) for k, s in series(c, 'copy_time', by=('bytes',), dir=d, servers=1).items()]
        if not pts:
            continue
        first = records(c, 'copy_time', dir=d)
        transport = (first[0] if first else {}).get('transport', c['params'].get('transport'))
        color = TRANSPORT_COLORS.get(transport, 'grey')
        errline(ax, pts, f'{transport} (measured)', hollow(c), color=color)
        any_hollow = any_hollow or hollow(c)
        b, lat = c['perf'].get(b_var), c['perf'].get(l_var)
        sizes = sorted(x for x, _ in pts)
        if b and lat is not None:  # MB/s is bytes per microsecond: T[us] = S/B + L
            ax.plot(sizes, [s / b + lat for s in sizes], color=color, linewidth=0.8, linestyle='-.',
                    label=f'{transport} fit: {b:.0f} MB/s, {lat:.1f} us')
    if not ax.lines and not ax.containers:
        return False
    value, label = paper('P003-C1')
    ax.plot(sizes, [s / value[b_var] + value[l_var] for s in sizes],
            label=f"{label} fit: {value[b_var]} MB/s, {value[l_var]} us", **PAPER_STYLE)
    note_hollow(ax, any_hollow)
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.xaxis.set_major_formatter(bytes_formatter())
    ax.set_xlabel('bytes per cudaMemcpy')
    ax.set_ylabel('time per call (us)')
    legend(ax)
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
    drawn = any_hollow = False
    for i, c in enumerate(sorted(panel['members'], key=_idle_label)):
        pts = [(k[0], s) for k, s in series(c, 'd2h_after_idle', by=('interval_ms',)).items()]
        if pts:
            local = c['params'].get('transport') == 'local'
            style, color = ('-', TRANSPORT_COLORS['local']) if local else styles[i % len(styles)]
            errline(ax, pts, _idle_label(c), hollow(c), color=color, linestyle=style)
            drawn, any_hollow = True, any_hollow or hollow(c)
    if not drawn:
        return False
    value, label = paper('P003-C6')
    paper_level(ax, value['fast_us'], label + ': calls close together')
    paper_level(ax, value['slow_us'], label + f": > {value['gap_ms']} ms apart", color='#d62728')
    note_hollow(ax, any_hollow)
    ax.set_xscale('symlog', linthresh=1)
    ax.set_xlim(left=0)
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.set_xlabel('idle time before the call (ms)')
    ax.set_ylabel('D2H latency (us)')
    ax.set_ylim(bottom=0)
    legend(ax)
    return True


def vcuda_copy_figure(cases, out_dir):
    """P003 figs. 4-7: copy time vs size, local and through vcuda, with the fits."""
    return figure(cases, out_dir, 'vcuda_copy.png', 'P003 figs. 4-7: T = S/B + L, local and through vcuda',
                  VCUDA_COPY_SOURCES, _draw_vcuda_copy, panel=(6.0, 3.8), panel_specs=VCUDA_COPY_PANELS)


def vcuda_idle_figure(cases, out_dir):
    """P003 figs. 8/9: D2H latency after idle gaps, keep-alive and server spin variants."""
    return figure(cases, out_dir, 'vcuda_idle.png', 'P003 figs. 8/9: D2H latency vs idle time between calls',
                  VCUDA_IDLE_SOURCES, _draw_vcuda_idle, panel=(7.0, 4.0), panel_specs=VCUDA_IDLE_PANELS)


FIGURES = [
    (vcuda_copy_figure, VCUDA_COPY_SOURCES,
     'P003 figs. 4-7: time per cudaMemcpy vs size with one server, on the local runtime and through '
     'vcuda (log-log); dash-dot: the least-squares T = S/B + L of each; dashed: P003\'s fit on TSUBAME2.5 (IB)'),
    (vcuda_idle_figure, VCUDA_IDLE_SOURCES,
     'P003 figs. 8/9: median D2H latency vs the idle time before the call, without and with the 2 ms '
     'keep-alive (a dummy 4-byte copy) and with a server that keeps polling (server_spin_us), beside the '
     'local runtime; bands: the paper\'s 20-30 us and 200-300 us'),
]
