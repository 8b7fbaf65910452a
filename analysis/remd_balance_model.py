#!/usr/bin/env python3
"""This artifact's model of REMD's GPU time over n GPUs, beside P003's (remd_model.py,
which states the paper's model and is not changed by this one).

P003's eq. 5, tGPU(n) = tGPU0 Nrep / n, holds where every GPU's share of the replicas
costs the same and a GPU's time is proportional to its replicas.  On the reference
machines neither holds (4x H200, 14,336 replicas, fast kernel): with the ladder in
contiguous blocks the hot quarter's GPU took 0.927 s against 0.861 s for the cold one
(2,048 atoms: hot lattices melt and have more neighbours within the cutoff), and with
the GPUs balanced (256 atoms) each took 48.4 ms against an ideal 45.6 ms: 3,584 replicas
of one block each do not fill 132 multiprocessors evenly (waves).  Here

    tGPU(n)    = max_d tGPU_d(n)                                  the slowest GPU
    tGPU_d(n)  = t_wave * cbar_d * W(Nrep / n)
    W(b)       = floor(b / B) + g(ceil((b mod B) / SMs))          waves of b blocks, B = occ SMs
    g(m)       = wave_time(m) / wave_time(occ), g(0) = 0          a wave with m blocks per SM
    cbar_d     = mean of c(k) over the ladder indices k on GPU d   (placement: contiguous blocks
                                                                   or every n-th index)
    c(k)       = ladder_segment_time(segment of k) / mean          a replica's relative cost
    t_wave     = tGPU(1) / W(Nrep)                                 so that n = 1 is the run itself
    T(n)       = tGPU(n) + tCOM(n) + tCLT,   R(n) = Tlocal(1) / (n T(n))
    tCOM(n)    = SH/BH + SD/BD + k (h LH + LD + LK + E LH)
                 k = n for P003's serial host loop (every GPU's calls one after another),
                 k = 1 with one host thread per GPU (their round trips overlap);
                 h = 2 copies of temperatures and flags per GPU (serial) or 1 (threads);
                 E = 3: remd's event record x 2 and elapsed-time calls per GPU, round trips
                 through vcuda.

Every input is measured on one GPU by one remd run (src/remd: --profile-segments S on
--gpus 1): occ (cudaOccupancyMaxActiveBlocksPerMultiprocessor) and SMs (the record
blocks_per_sm), g(m) (records wave_time: m x SMs replicas spread over the ladder, one
wave each), c(k) (records ladder_segment_time), tGPU(1), Tlocal(1) and tCLT (the run's
summary); BH, BD, LH, LD, LK from vcuda-bench's fit (remd_model.load_vcuda_fit) of the
same path: its `local` transport for local GPUs, `vcuda` through vcuda.  The model takes
the first interval's assignment (replica r at ladder index r), which is what P003's one
interval at 2,048 atoms and the artifact's quick runs measure.

A wave with fewer blocks than fit is not proportionally shorter where the kernel is
latency-bound at low residency, which is why g(m) is measured, not assumed m / occ: with
g(m) = m / occ the 256-atom, 4-GPU run would be predicted 2.7% over ideal, not the 6.1%
measured.

    python3 analysis/remd_balance_model.py --one-gpu speed-256.jsonl --comm fit.jsonl \\
        --transport local --measured local-256-n2.jsonl local-256-n4.jsonl
    python3 analysis/remd_balance_model.py --one-gpu speed-2048.jsonl --curve --json curve.json
"""
import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import remd_model  # noqa: E402

EVENT_CALLS = 3  # remd's per-GPU event calls per interval: record e0, record e1, elapsed time
# Communication constants of networks for the curve to n = 1,024 (B/s, s).
#  p003:   P003's own fit on TSUBAME2.5 (K20X behind DS-CUDA over InfiniBand QDR, 32 Gbit/s
#          signalling, 3.2 GB/s of data per link), remd_model.P003_COMM;
#  ndr400: InfiniBand NDR, 400 Gbit/s (50 GB/s, 64b/66b: 48.5 GB/s of data each way) for BH
#          and BD, with the latencies of a measured vcuda fit where one is given (a remote
#          call's latency is mostly the software at both ends), else P003's.
NDR400_BPS = 400e9 / 8 * 64 / 66
NETWORKS = ('p003', 'ndr400')


def network(name, fit=None):
    """{BH, BD, LH, LD, LK} of a named network (fit: a measured vcuda fit's latencies)."""
    if name == 'p003':
        return dict(remd_model.P003_COMM)
    if name == 'ndr400':
        lat = fit or remd_model.P003_COMM
        return {'BH': NDR400_BPS, 'BD': NDR400_BPS, 'LH': lat['LH'], 'LD': lat['LD'], 'LK': lat['LK']}
    raise ValueError(f'unknown network {name!r} (known: {", ".join(NETWORKS)})')


@dataclass
class OneGpu:
    """The one-GPU measurements of one atom count."""
    natom: int
    nrep: int
    mexch: int
    sms: int
    occ: int                       # blocks (replicas) resident per SM
    waves: dict                    # m -> seconds of one wave with m blocks per SM
    segments: list                 # [(k_lo, k_hi, seconds)] in ladder order, equal counts
    t_gpu1: float                  # the run's kernel time per interval (s)
    t_local1: float                # the run's interval time (s)
    t_clt: float
    params: dict = field(default_factory=dict)

    def g(self, m):
        if m <= 0:
            return 0.0
        return self.waves[m] / self.waves[self.occ]

    def W(self, b):
        """Waves of b blocks, in full-wave units."""
        B = self.occ * self.sms
        full, rest = divmod(b, B)
        return full + self.g(math.ceil(rest / self.sms))

    def t_wave(self):
        return self.t_gpu1 / self.W(self.nrep)

    def costs(self):
        """c(k), k = 0 .. Nrep-1, normalised to mean 1 (piecewise constant per segment)."""
        c = [0.0] * self.nrep
        for lo, hi, t in self.segments:
            per = t / (hi - lo + 1)
            for k in range(lo, hi + 1):
                c[k] = per
        mean = sum(c) / self.nrep
        return [x / mean for x in c]


def device_indices(nrep, n, placement):
    """Ladder indices on each of n GPUs at the first interval (replica r at index r)."""
    nloc = nrep // n
    if placement == 'contiguous':
        return [range(d * nloc, (d + 1) * nloc) for d in range(n)]
    if placement == 'interleaved':
        return [range(d, nrep, n) for d in range(n)]
    raise ValueError(f'placement {placement!r}: interleaved or contiguous')


def tgpu(one, n, placement):
    """(slowest GPU's time, every GPU's) at n GPUs (s)."""
    if one.nrep % n:
        raise ValueError(f'{one.nrep} replicas do not divide over {n} GPUs')
    c = one.costs()
    w = one.t_wave() * one.W(one.nrep // n)
    per = [w * sum(c[k] for k in ks) / len(ks) for ks in device_indices(one.nrep, n, placement)]
    return max(per), per


def tcom(comm, n, nrep, mexch, host_loop):
    """Communication per interval (s) for BH, BD, LH, LD, LK in comm."""
    sh, sd = nrep * 2 * 4, nrep * mexch * 4
    if host_loop not in ('serial', 'threads'):
        raise ValueError(f'host loop {host_loop!r}: serial or threads')
    k, h = (n, 2) if host_loop == 'serial' else (1, 1)
    return sh / comm['BH'] + sd / comm['BD'] + k * (h * comm['LH'] + comm['LD'] + comm['LK'] + EVENT_CALLS * comm['LH'])


def predict(one, comm, n, placement='interleaved', host_loop='threads'):
    slow, per = tgpu(one, n, placement)
    com = tcom(comm, n, one.nrep, one.mexch, host_loop)
    T = slow + com + one.t_clt
    return {'n': n, 'T': T, 'R': one.t_local1 / (n * T), 'tGPU': slow, 'tGPU_devices': per, 'tCOM': com,
            'tCLT': one.t_clt, 'imbalance': slow / (sum(per) / len(per)),
            'waves': one.W(one.nrep // n), 'ideal_waves': one.W(one.nrep) / n}


# ---- inputs ---------------------------------------------------------------------------

def from_records(records, summary, params):
    """OneGpu from a remd run's records (dicts with metric, value and fields) and its
    summary metrics {name: value}; ValueError naming what is missing."""
    occ = [r for r in records if r.get('metric') == 'blocks_per_sm']
    waves = {int(r['resident']): float(r['value']) for r in records if r.get('metric') == 'wave_time'}
    segs = sorted((int(r['k_lo']), int(r['k_hi']), float(r['value'])) for r in records
                  if r.get('metric') == 'ladder_segment_time')
    missing = [what for what, ok in (('the kernel occupancy (blocks_per_sm)', occ),
                                     ('ladder segment times (remd --profile-segments)', segs),
                                     ('wave times (remd --profile-segments on a GPU)', waves)) if not ok]
    missing += [m for m in ('t_gpu', 'interval_time', 't_clt') if m not in summary]
    if missing:
        raise ValueError('the one-GPU run lacks ' + ', '.join(missing))
    k = occ[-1]
    o = int(k['value'])
    absent = [m for m in range(1, o + 1) if m not in waves]
    if absent:
        raise ValueError(f'wave times for {absent} blocks per SM missing (occupancy {o})')
    nrep = int(params['nrep'])
    if segs[0][0] != 0 or segs[-1][1] != nrep - 1 or any(a[1] + 1 != b[0] for a, b in zip(segs, segs[1:])):
        raise ValueError('the ladder segments do not cover the ladder once, in order')
    return OneGpu(natom=int(params['natom']), nrep=nrep, mexch=int(params['mexch']), sms=int(k['sms']), occ=o,
                  waves=waves, segments=segs, t_gpu1=float(summary['t_gpu']),
                  t_local1=float(summary['interval_time']), t_clt=float(summary['t_clt']), params=dict(params))


SUMMARY = ('interval_time', 't_gpu', 't_clt', 't_com', 'gpu_seconds', 't_gpu_imbalance')


def runs_of(lines):
    """[(params, records, summary)] of the remd runs in JSON lines (per distinct params)."""
    out = {}
    for rec in remd_model._json_lines(lines):
        if rec.get('bench') != 'remd' or 'metric' not in rec:
            continue
        params = rec.get('params', {})
        key = json.dumps(params, sort_keys=True)
        p, recs, summ = out.setdefault(key, (params, [], {}))
        recs.append(rec)
        if rec['metric'] in SUMMARY and 'rep' not in rec and 'device' not in rec:
            summ[rec['metric']] = rec['value']
    return list(out.values())


def load_one_gpu(lines, natom=None):
    """OneGpu of the one-GPU local run (with its profile) in remd JSON lines."""
    for params, recs, summ in runs_of(lines):
        if params.get('gpus') == 1 and params.get('via', 'local') == 'local' and \
                (natom is None or params.get('natom') == natom) and \
                any(r['metric'] == 'ladder_segment_time' for r in recs):
            return from_records(recs, summ, params)
    raise ValueError(f'no one-GPU local remd run{f" of {natom} atoms" if natom else ""} with a ladder profile')


def measured(lines, natom, t_local1):
    """[(n, via, placement, host_loop, R)] of multi-GPU remd runs in JSON lines."""
    out = []
    for params, recs, summ in runs_of(lines):
        if params.get('natom') == natom and params.get('mode') == 'gpu' and 'gpu_seconds' in summ:
            n = int(params['gpus'])
            if n > 1 or params.get('via') == 'vcuda':
                out.append((n, params.get('via', 'local'), params.get('placement', 'contiguous'),
                            params.get('host_loop', 'serial'), t_local1 / summ['gpu_seconds']))
    return sorted(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--one-gpu', nargs='+', required=True,
                    help='remd JSON lines holding the one-GPU run with --profile-segments (per atom count)')
    ap.add_argument('--comm', help='vcuda-bench output with fit lines (its --transport fit): the communication '
                                   'constants compared runs are predicted with, and the curve\'s NDR latencies')
    ap.add_argument('--transport', default='local', choices=('local', 'vcuda'), help='which fit of --comm to use')
    ap.add_argument('--network', choices=NETWORKS, help='a named network instead of --comm (the curve uses both)')
    ap.add_argument('--measured', nargs='*', default=[], help='remd JSON lines of runs on n GPUs to compare with')
    ap.add_argument('--curve', action='store_true',
                    help="R(n), n = 1 .. 1,024, for P003's network and NDR 400 Gbit/s, interleaved with a thread "
                         "per GPU and contiguous with P003's serial loop, beside P003's model fed this GPU's "
                         "tGPU0 (fig. 10)")
    ap.add_argument('--json', help='write the predictions here')
    args = ap.parse_args(argv)
    fit = None
    if args.comm:
        with open(args.comm) as f:
            fit, _ = remd_model.load_vcuda_fit(f, transport=args.transport)
    comm = network(args.network, fit if args.transport == 'vcuda' else None) if args.network else fit
    lines = []
    for path in args.one_gpu + args.measured:
        with open(path) as f:
            lines += f.readlines()
    out = []
    for params, recs, summ in runs_of(lines):
        if params.get('gpus') != 1 or not any(r['metric'] == 'ladder_segment_time' for r in recs):
            continue
        one = from_records(recs, summ, params)
        entry = {'natom': one.natom, 'nrep': one.nrep, 'sms': one.sms, 'blocks_per_sm': one.occ,
                 'g': {m: one.g(m) for m in sorted(one.waves)},
                 'segment_costs': [round(t / (hi - lo + 1) / (sum(s[2] for s in one.segments) / one.nrep), 6)
                                   for lo, hi, t in one.segments],
                 't_wave': one.t_wave(), 'tGPU1': one.t_gpu1, 'Tlocal1': one.t_local1}
        print(f'# {one.natom} atoms: {one.sms} SMs x {one.occ} blocks, t_wave {one.t_wave() * 1e3:.3f} ms, '
              f'g = {", ".join(f"{one.g(m):.3f}" for m in sorted(one.waves))}')
        if comm:
            rows = []
            for n, via, placement, host_loop, r1 in measured(lines, one.natom, one.t_local1):
                row = predict(one, comm, n, placement, host_loop)
                row.update(via=via, placement=placement, host_loop=host_loop, R_measured=r1,
                           error_pts=abs(row['R'] - r1) * 100)
                rows.append(row)
                print(f'  n={n} {via} {placement} {host_loop}: tGPU {row["tGPU"] * 1e3:.1f} ms '
                      f'(imbalance {row["imbalance"]:.3f}), R model {row["R"]:.3f}, measured {r1:.3f}, '
                      f'|diff| {row["error_pts"]:.1f} pt')
            entry['compared'] = rows
        if args.curve:
            ns = remd_model.powers_of_two(1024)
            p003 = remd_model.Params(**remd_model.P003_COMM, tCLT=one.t_clt, tGPU0=one.t_gpu1 / one.nrep,
                                     tlocal1=one.t_local1, nrep=one.nrep, mexch=one.mexch)
            curves = {'p003_model': {'network': 'p003', 'R': [remd_model.R(p003, n) for n in ns]}}
            for net in NETWORKS:
                c = network(net, fit if args.transport == 'vcuda' else None)
                # the artifact's arrangement, and P003's (ladder blocks, one host thread)
                for placement, host_loop in (('interleaved', 'threads'), ('contiguous', 'serial')):
                    rows = [predict(one, c, n, placement, host_loop) for n in ns]
                    curves[f'{net}_{placement}_{host_loop}'] = {
                        'network': net, 'placement': placement, 'host_loop': host_loop, 'R': [r['R'] for r in rows],
                        'tGPU': [r['tGPU'] for r in rows], 'tCOM': [r['tCOM'] for r in rows]}
            entry['curve'] = {'n': ns, 'networks': {n: network(n, fit if args.transport == 'vcuda' else None)
                                                    for n in NETWORKS}, 'lines': curves}
            for name, cv in curves.items():
                print(f'  {name:>24}: ' + ' '.join(f'{n}:{r:.3f}' for n, r in zip(ns, cv['R']) if n in (1, 4, 64, 256, 1024)))
        out.append(entry)
    if not out:
        print('remd_balance_model: no one-GPU remd run with --profile-segments in the inputs', file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
