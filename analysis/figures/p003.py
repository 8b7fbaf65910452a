"""P003 (replica-exchange MD over 1,024 GPUs, src/remd): parallel efficiency R(n)
(fig. 10), where the time goes (fig. 11) and table 2, P003's model and measurements
beside this artifact's.  Everything here reads the cases' performance medians (the
numbers the verdict tables print); measured R(n) points carry the min..max of their
repeats."""
import os

from .common import (NO_MATPLOTLIB, PAPER_STYLE, V, describe, hollow, legend, marker_style, matching,
                     note_hollow, pyplot, save)
import remd_balance_model  # noqa: E402 (analysis/, on the path common sets)
import remd_model  # noqa: E402

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
    for c in matching(cases, REMD_SOURCES):
        if str(c['params'].get('atoms')) != str(natom) or c['status'] != V.MEASURED or 'interval_time' not in c['perf']:
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
    for c in matching(cases, REMD_SOURCES):
        if c['status'] != V.MEASURED:
            why = f"{c['status']}: {c['reason']}"
            by_reason.setdefault(why, []).append(describe(c))
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
    fast run where it was profiled (remd --profile-segments; the records of its last
    measured repeat), else None."""
    one = runs.get((system, 'local'), {}).get(1)
    if one is None:
        return None
    summary = {k: one['perf'][k] for k in ('interval_time', 't_gpu', 't_clt') if k in one['perf']}
    records = (one.get('repeat_records') or [[]])[-1]
    try:
        return remd_balance_model.from_records(records, summary, one.get('record_params') or {})
    except (ValueError, KeyError):
        return None


def _remd_efficiency(runs, system, how):
    """[(n, R(n))] measured: T(1) local over n T(n) (gpu_seconds), from the medians."""
    return [(n, r) for n, r, _, _ in _remd_efficiency_spread(runs, system, how)]


def _remd_efficiency_spread(runs, system, how):
    """[(n, R(n), R low, R high)]: the median R and the range the repeats of n T(n) give."""
    one = runs.get((system, 'local'), {}).get(1)
    if one is None:
        return []
    t1 = one['perf']['interval_time']
    out = []
    for n, c in sorted(runs.get((system, how), {}).items()):
        gs = c['samples'].get('gpu_seconds') or []
        if c['perf'].get('gpu_seconds'):
            out.append((n, t1 / c['perf']['gpu_seconds'], t1 / max(gs) if gs else None,
                        t1 / min(gs) if gs and min(gs) > 0 else None))
    return out


def remd_efficiency_figure(cases, out_dir):
    """P003 fig. 10: R(n) for 256 and 2,048 atoms, P003's model and measurements beside
    this system's model (its tGPU0/tCLT) and measured local and vcuda points."""
    plt = pyplot()
    if plt is None:
        return None, NO_MATPLOTLIB
    ns = remd_model.powers_of_two()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout='constrained')
    notes, any_hollow = [], False
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
                pts = _remd_efficiency_spread(runs, system, how)
                if not pts:
                    continue
                h = any(hollow(runs[system, how][n]) for n, *_ in pts)
                any_hollow = any_hollow or h
                ax.errorbar([n for n, *_ in pts], [r for _, r, _, _ in pts],
                            yerr=[[r - (lo if lo is not None else r) for _, r, lo, _ in pts],
                                  [(hi if hi is not None else r) - r for _, r, _, hi in pts]],
                            linestyle='none', capsize=2, label=f'{system} measured, {how}',
                            **marker_style(color, h, marker, 5))
        if not runs:
            notes.append(f'{natom} atoms: no passed RemdLocal/RemdVcuda runs, P003 only')
        ax.set_xscale('log', base=2)
        ax.set_xlabel('GPUs n')
        ax.set_ylabel('efficiency R = T(1) / (n T(n))')
        ax.set_ylim(0, 1.05)
        ax.set_title(f'{natom} atoms, Nrep = 14,336', fontsize=9)
        ax.grid(alpha=0.3)
        note_hollow(ax, any_hollow)
        legend(ax)
    fig.suptitle('P003 fig. 10: parallel efficiency vs GPUs, model (lines) and measured (points)', fontsize=11)
    save(fig, os.path.join(out_dir, 'remd_efficiency.png'))
    plt.close(fig)
    return 'remd_efficiency.png', '; '.join(notes + _remd_notes(cases))


def remd_split_figure(cases, out_dir):
    """P003 fig. 11: share of T(n) in tGPU, tCOM:B, tCOM:L, tCLT from P003's model at
    n = 64..4,096, then this system's measured split (tGPU, tCOM, tCLT) per run."""
    plt = pyplot()
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
        legend(ax)
    fig.suptitle('P003 fig. 11: where the time goes (P003 model; measured runs: tCOM not split)', fontsize=11)
    save(fig, os.path.join(out_dir, 'remd_split.png'))
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


FIGURES = [
    (remd_efficiency_figure, REMD_SOURCES,
     'P003 fig. 10: parallel efficiency R(n) for 256 and 2,048 atoms (log2 n); dashed: P003\'s model, '
     'triangles: its measurements; coloured lines: the model with this system\'s tGPU0/tCLT (and its vcuda '
     'fit, else P003\'s network), points: measured '
     'locally (circles) and through vcuda with P003\'s 2 ms keep-alive (squares) and without (crosses)'),
    (remd_split_figure, REMD_SOURCES,
     'P003 fig. 11: share of T(n) spent in GPU computation, communication (bandwidth / latency) and the '
     'client, P003\'s model at n = 64..4,096 beside the measured split of each run'),
]
