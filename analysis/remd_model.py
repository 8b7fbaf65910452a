#!/usr/bin/env python3
"""P003's parallel-efficiency model of REMD over n (remote) GPUs, eq. 3-6:

    R(n) = Tlocal(1) / (n T(n)),    T(n) = tGPU(n) + tCOM(n) + tCLT,
    tGPU(n) = tGPU0 Nrep / n,
    tCOM(n) = (SH/BH + 2n LH) + (SD/BD + n LD) + n LK,
    SH = Nrep * 2 * 4 B (temperatures + flags),  SD = Nrep * Mexch * 4 B (energies).

Inputs: tGPU0, tCLT and Tlocal(1) from local remd runs (src/remd JSON lines), BH, BD,
LH, LD, LK from vcuda-bench's fit lines, or P003's own values (`--p003`), with which
the model reproduces P003's table 2 (analysis/tests/test_remd_model.py).

    python3 analysis/remd_model.py --p003 --natom 2048
    python3 analysis/remd_model.py --remd local-n1.jsonl [more.jsonl] --vcuda fit.jsonl
"""
import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, replace

# P003 (TSUBAME2.5, K20X over DS-CUDA, sec. 4): fitted communication constants, the
# client time, and per atom count the measured tGPU(1) = tGPU0 Nrep and Tlocal(1) per
# Miter (s).  The paper rounds tGPU0 to 2.58 / 33.6 ms in the text; its table 2 uses
# the measured 37,034 / 482,367 ms, so these are what reproduce the table.
P003_NREP, P003_MEXCH = 14336, 100
P003_COMM = {'BH': 1960e6, 'BD': 850e6, 'LH': 9.23e-6, 'LD': 31.7e-6, 'LK': 5.96e-6}
P003_TCLT = 7.96e-3
P003_TGPU1 = {256: 37.034, 2048: 482.367}
P003_TLOCAL1 = {256: 37.059, 2048: 482.883}
# Table 2: n -> (T0 ms, R0 as printed, T1 ms measured, R1 measured); None: not measured.
P003_TABLE2 = {
    256: {1: (37049, '>0.99', 37064, 0.99), 64: (597, 0.96, 604, 0.95), 256: (174, 0.83, 175, 0.82),
          1024: (108, 0.33, 104, 0.35), 4096: (254, 0.03, None, None)},
    2048: {1: (482383, '>0.99', 482884, 0.99), 64: (7555, 0.99, 7589, 0.99), 256: (1913, 0.98, 1922, 0.98),
           1024: (543, 0.86, 540, 0.87), 4096: (362, 0.32, None, None)},
}
# vcuda-bench fit line fields -> (model name, factor to SI units)
VCUDA_FIELDS = {'BH_GBps': ('BH', 1e9), 'BD_GBps': ('BD', 1e9), 'LH_us': ('LH', 1e-6),
                'LD_us': ('LD', 1e-6), 'LK_us': ('LK', 1e-6)}


@dataclass(frozen=True)
class Params:
    """Everything eq. 3-6 needs, in SI units (B/s, s)."""
    BH: float
    BD: float
    LH: float
    LD: float
    LK: float
    tCLT: float
    tGPU0: float
    tlocal1: float
    nrep: int = P003_NREP
    mexch: int = P003_MEXCH

    @property
    def SH(self):
        return self.nrep * 2 * 4

    @property
    def SD(self):
        return self.nrep * self.mexch * 4


def p003(natom):
    """P003's own parameters for 256 or 2,048 atoms."""
    return Params(**P003_COMM, tCLT=P003_TCLT, tGPU0=P003_TGPU1[natom] / P003_NREP,
                  tlocal1=P003_TLOCAL1[natom])


def terms(p, n):
    """The columns of table 2 (s): tGPU, SH/BH, SD/BD, 2nLH, nLD, nLK, tCLT."""
    return {'tGPU': p.tGPU0 * p.nrep / n, 'SH/BH': p.SH / p.BH, 'SD/BD': p.SD / p.BD,
            '2nLH': 2 * n * p.LH, 'nLD': n * p.LD, 'nLK': n * p.LK, 'tCLT': p.tCLT}


def T(p, n):
    return sum(terms(p, n).values())


def R(p, n):
    return p.tlocal1 / (n * T(p, n))


def split(p, n):
    """(tGPU, tCOM:B, tCOM:L, tCLT) (s): eq. 7's split of the communication time."""
    t = terms(p, n)
    return t['tGPU'], t['SH/BH'] + t['SD/BD'], t['2nLH'] + t['nLD'] + t['nLK'], t['tCLT']


def latency_share(p, n):
    """Share of the communication time that is latency (P003: 89% at n = 1,024)."""
    _, b, lat, _ = split(p, n)
    return lat / (b + lat)


def truncate2(x):
    """Two decimals the way P003 prints R0 (cut, not rounded: 0.8680 -> 0.86)."""
    return math.floor(x * 100 + 1e-9) / 100


def predict(p, ns):
    return [dict(n=n, T=T(p, n), R=R(p, n), **dict(zip(('tGPU', 'tCOM_B', 'tCOM_L', 'tCLT'), split(p, n))))
            for n in ns]


def powers_of_two(top=4096):
    n, out = 1, []
    while n <= top:
        out.append(n)
        n *= 2
    return out


# ---- inputs ---------------------------------------------------------------------------

def _json_lines(lines):
    """JSON objects of an iterable of lines; anything else (prose, broken lines) skipped."""
    for line in lines:
        line = line.strip()
        if line.startswith('{'):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                yield rec


UNIT_SI = {'GB/s': 1e9, 'MB/s': 1e6, 's': 1.0, 'ms': 1e-3, 'us': 1e-6}
FIT_UNITS = {'BH': ('GB/s', 'MB/s'), 'BD': ('GB/s', 'MB/s'), 'LH': ('s', 'ms', 'us'),
             'LD': ('s', 'ms', 'us'), 'LK': ('s', 'ms', 'us')}


def _positive(v):
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def load_vcuda_fit(lines, transport='vcuda'):
    """BH, BD (B/s), LH, LD, LK (s) from vcuda-bench output, in either form:
      one line per server count:  {"bench":"vcuda","kind":"fit","servers":n,"BH_GBps":..,"BD_GBps":..,
                                   "LH_us":..,"LD_us":..,"LK_us":..}
      one line per constant:      {"bench":"vcuda-bench","metric":"BH","value":..,"unit":"MB/s",
                                   "kind":"fit","servers":n,"transport":"vcuda"}  (src/vcuda's vcuda-bench)
    Other lines are ignored, and so are fits of another transport (vcuda-bench also fits
    the local runtime).  A server count whose constants are missing, non-numeric,
    non-finite, non-positive or in an unknown unit is rejected with the reason.  Like
    P003 (the mean of its 11 points, n = 1..1,024), the values are averaged over server
    counts.  Returns ({name: value}, [per-count dicts]); raises ValueError if none is usable."""
    groups, problems = {}, []
    for rec in _json_lines(lines):
        if rec.get('kind') != 'fit' or rec.get('bench') not in ('vcuda', 'vcuda-bench'):
            continue
        # vcuda-bench names the remote transport vcuda-tcp or vcuda-ucx: `vcuda` takes either
        got = rec.get('transport', transport)
        if got != transport and not (transport == 'vcuda' and str(got).startswith('vcuda-')):
            continue
        row = groups.setdefault(rec.get('servers'), {'servers': rec.get('servers'), 'bad': []})
        if 'metric' in rec:  # one constant per line
            name, v, unit = rec['metric'], rec.get('value'), rec.get('unit')
            if name not in FIT_UNITS:
                continue
            if unit not in FIT_UNITS[name] or not _positive(v):
                row['bad'].append(f'{name}={v!r} {unit}')
            else:
                row[name] = float(v) * UNIT_SI[unit]
            continue
        for field, (name, factor) in VCUDA_FIELDS.items():
            v = rec.get(field)
            if _positive(v):
                row[name] = float(v) * factor
            else:
                row['bad'].append(f'{field}={v!r}')
    fits = []
    for servers, row in groups.items():
        missing = [name for name, _ in VCUDA_FIELDS.values() if name not in row]
        if row['bad'] or missing:
            problems.append(f'servers={servers}: ' + ', '.join(row['bad'] + [f'{m} missing' for m in missing]))
        else:
            fits.append({k: v for k, v in row.items() if k != 'bad'})
    if not fits:
        raise ValueError('no usable vcuda fit' + (f' ({"; ".join(problems)})' if problems else ''))
    mean = {name: sum(f[name] for f in fits) / len(fits) for name, _ in VCUDA_FIELDS.values()}
    return mean, fits


def remd_runs(lines):
    """One dict per remd run in JSON lines: its params and summary metrics."""
    runs = {}
    for rec in _json_lines(lines):
        if rec.get('bench') != 'remd' or 'metric' not in rec or 'rep' in rec or 'bin' in rec:
            continue
        params = rec.get('params', {})
        key = json.dumps(params, sort_keys=True)
        runs.setdefault(key, {'params': params})[rec['metric']] = rec['value']
    return list(runs.values())


def fit_local(runs, natom):
    """tGPU0, tCLT and Tlocal(1) from remd runs of `natom` atoms: tGPU0 and Tlocal(1)
    from the one-GPU runs (P003: the local executable on one GPU), tCLT averaged over all
    runs (it does not depend on n)."""
    mine = [r for r in runs if r['params'].get('natom') == natom and r['params'].get('mode') == 'gpu'
            and r['params'].get('via', 'local') == 'local']
    one = [r for r in mine if r['params'].get('gpus') == 1]
    if not one:
        raise ValueError(f'no one-GPU remd run of {natom} atoms to fit tGPU0 and Tlocal(1) from')
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {'tGPU0': mean([r['t_gpu0'] for r in one]), 'tlocal1': mean([r['interval_time'] for r in one]),
            'tCLT': mean([r['t_clt'] for r in mine]), 'nrep': one[0]['params']['nrep'],
            'mexch': one[0]['params']['mexch']}


def measured_efficiency(runs, natom, tlocal1, via='local'):
    """{n: (T(n), R(n))} of the remd runs of `natom` atoms on local GPUs or through vcuda."""
    out = {}
    for r in runs:
        p = r['params']
        if p.get('natom') == natom and p.get('mode') == 'gpu' and p.get('via', 'local') == via:
            n = p['gpus']
            out[n] = (r['interval_time'], tlocal1 / (n * r['interval_time']))
    return dict(sorted(out.items()))


def summary(args):
    """The model's claim figures as umstudy JSON lines (the ReFrame check RemdModelFit):
    R at n = 64 and 1,024, the latency share of tCOM at 1,024 (P003-C5) and, on P003's
    table, the largest |R0 - R1| in points (P003-C4); communication constants from
    --vcuda when given, else P003's."""
    comm = dict(P003_COMM)
    if args.vcuda:
        with open(args.vcuda) as f:
            comm, _ = load_vcuda_fit(f)
    params = {'communication': args.vcuda or 'P003', 'compute': 'P003'}

    def line(metric, value, unit):
        print(json.dumps({'bench': 'remd-model', 'metric': metric, 'value': value, 'unit': unit, 'params': params}))

    for natom in (256, 2048):
        p = replace(p003(natom), **comm)
        for n in (64, 1024):
            line(f'R_{natom}_{n}', R(p, n), '1')
        line(f'T0_{natom}_1024_ms', T(p, 1024) * 1e3, 'ms')
    line('latency_share_1024', latency_share(replace(p003(256), **comm), 1024) * 100, '%')
    # The communication constants used, in vcuda-bench's units (the report's model curves
    # take them from here when they come from this system's fit).
    for field, (name, factor) in VCUDA_FIELDS.items():
        line(field, comm[name] / factor, field.rsplit('_', 1)[1].replace('GBps', 'GB/s'))
    line('vcuda_fit', 1 if args.vcuda else 0, '1')
    errs = [abs(R(p003(natom), n) - r1) * 100 for natom, rows in P003_TABLE2.items()
            for n, (_, _, _, r1) in rows.items() if r1 is not None and n > 1]
    line('p003_max_r_err_pts', max(errs), '%')  # percentage points of R
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--p003', action='store_true', help="P003's own parameters (table 2)")
    ap.add_argument('--remd', nargs='*', default=[],
                    help='remd JSON-lines outputs, local and through vcuda (params.via tells them apart); '
                         'tGPU0, tCLT and Tlocal(1) come from the local one-GPU runs')
    ap.add_argument('--vcuda', help='vcuda-bench output with fit lines (default with --remd: P003\'s constants)')
    ap.add_argument('--natom', type=int, nargs='*', default=[256, 2048])
    ap.add_argument('--json', help='write the predictions here')
    ap.add_argument('--summary', action='store_true',
                    help='only JSON lines (bench remd-model) of the figures claims are judged on')
    args = ap.parse_args(argv)
    if args.summary:
        return summary(args)
    comm, comm_src = dict(P003_COMM), 'P003'
    if args.vcuda:
        with open(args.vcuda) as f:
            comm, _ = load_vcuda_fit(f)
        comm_src = args.vcuda
    runs = []
    for path in args.remd:
        with open(path) as f:
            runs += remd_runs(f)
    out = []
    for natom in args.natom:
        if args.p003 or not runs:
            p = replace(p003(natom), **comm)
            src = 'P003 tGPU0/tCLT/Tlocal(1)'
        else:
            try:
                p = Params(**comm, **fit_local(runs, natom))
            except ValueError as e:
                print(f'remd_model: {e}', file=sys.stderr)
                continue
            src = 'local runs'
        measured = {via: measured_efficiency(runs, natom, p.tlocal1, via) for via in ('local', 'vcuda')
                    } if runs and not args.p003 else {}
        measured = {via: m for via, m in measured.items() if m}
        print(f'# {natom} atoms: {src}, communication from {comm_src}; tGPU0 {p.tGPU0 * 1e3:.3f} ms, '
              f'tCLT {p.tCLT * 1e3:.3f} ms, Tlocal(1) {p.tlocal1:.3f} s')
        print(f"{'n':>6} {'T0 ms':>12} {'R0':>6}" +
              ''.join(f" {via + ' T1 ms':>14} {'R1':>6} {'|R0-R1|':>8}" for via in measured))
        rows = predict(p, powers_of_two())
        for row in rows:
            line = f"{row['n']:>6} {row['T'] * 1e3:>12.1f} {row['R']:>6.3f}"
            for via, by_n in measured.items():
                t1, r1 = by_n.get(row['n'], (None, None))
                row[f'T1_{via}'], row[f'R1_{via}'] = t1, r1
                line += (f" {t1 * 1e3:>14.1f} {r1:>6.3f} {abs(row['R'] - r1) * 100:>6.1f}pt" if t1 else
                         f" {'-':>14} {'-':>6} {'-':>8}")
            print(line)
        out.append({'natom': natom, 'params': asdict(p), 'source': src, 'rows': rows})
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(out, f, indent=1)
    return 0 if out else 1


if __name__ == '__main__':
    sys.exit(main())
