#!/usr/bin/env python3
"""P003 in the cluster in a box (.ci/cluster.sh): vcuda's communication constants across
the shaped link, and what the balance model (analysis/remd_balance_model.py) predicts
from them.  The box has no GPU: vcuda-server runs on the CPU stand-in driver
(src/vcuda/tests/fake_libcuda.c), which moves bytes as a GPU's memory would but cannot
load remd's (or vcuda-bench's) real kernels.  So what is measured is the transport, and
R(n) is a model, never a run of remd.

  client                  run by vcuda-launch (the libcudart stand-in on LD_LIBRARY_PATH,
                          VCUDA_SERVERS set): per server, LH / LD = an 8-byte cudaMemcpy
                          H2D / D2H (one round trip each, median of --reps), BH / BD = a
                          --large-byte copy each way (median of --large-reps); one JSON
                          line per server, then one line of their means
  predict FILE...         the client lines of several runs (each file: one run; its
                          "servers" count is taken from the lines): the constants per
                          server count, median of the runs (min..max), and R(n) of the
                          balance model at each n measured, with P003's serial host loop
                          and the ladder in contiguous blocks, for the reference machine's
                          one-GPU profile at 2,048 atoms (4x H200, ARTIFACT.md C.5: the
                          ladder's quarters 0.861, 0.873, 0.897, 0.927 s, one block per SM,
                          132 SMs, 14,336 replicas).  A kernel launch cannot be timed on
                          the stand-in, so R(n) is given for LK = 0 and for LK = LH (a
                          launch costing one more round trip), the range a launch spans.
                          n that does not divide 14,336 replicas is refused by name.

Results are "indicative": an emulated interconnect (veth, bridge, tbf) on a shared CPU.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', '..', 'analysis'))

H2D, D2H = 1, 2
# The reference machine's one-GPU profile at 2,048 atoms (ARTIFACT.md C.5; the same
# numbers analysis/tests/test_remd_balance_model.py checks the model against).
REF = {'natom': 2048, 'nrep': 14336, 'mexch': 100, 'sms': 132, 'occ': 1, 'waves': {1: 0.032},
       'quarters_s': (0.861, 0.873, 0.897, 0.927), 'ideal_n4_s': 0.866, 't_local_extra_s': 1.2e-3, 't_clt_s': 5e-4,
       'machine': '4x H200 (reference machine), remd 2,048 atoms, 14,336 replicas, fast kernel'}


def client(a):
    rt = ctypes.CDLL('libcudart.so.13')
    n = ctypes.c_int(-1)
    if rt.cudaGetDeviceCount(ctypes.byref(n)) != 0 or n.value < 1:
        print(json.dumps({'bench': 'box-vcuda', 'status': 'error', 'reason': 'no vcuda device'}))
        return 1
    small = (ctypes.c_ubyte * 8)()
    big = (ctypes.c_ubyte * a.large)()
    rows = []
    for d in range(n.value):
        p = ctypes.c_void_p()
        if rt.cudaSetDevice(d) or rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(a.large)):
            print(json.dumps({'bench': 'box-vcuda', 'status': 'error', 'reason': f'device {d}: cudaMalloc failed'}))
            return 1

        def timed(dst, src, size, kind, reps):
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                rc = rt.cudaMemcpy(dst, src, ctypes.c_size_t(size), kind)
                ts.append(time.perf_counter() - t0)
                if rc:
                    raise SystemExit(f'box-vcuda: cudaMemcpy kind {kind} of {size} B on device {d}: error {rc}')
            return statistics.median(ts)
        timed(p, small, 8, H2D, 5)  # warm the connection
        lh, ld = timed(p, small, 8, H2D, a.reps), timed(small, p, 8, D2H, a.reps)
        bh = a.large / timed(p, big, a.large, H2D, a.large_reps)
        bd = a.large / timed(big, p, a.large, D2H, a.large_reps)
        rt.cudaFree(p)
        rows.append({'device': d, 'LH_us': lh * 1e6, 'LD_us': ld * 1e6, 'BH_GBps': bh / 1e9, 'BD_GBps': bd / 1e9})
        print(json.dumps({'bench': 'box-vcuda', 'kind': 'device', 'servers': n.value, **rows[-1],
                          'params': {'reps': a.reps, 'large': a.large, 'large_reps': a.large_reps}}))
    mean = {k: sum(r[k] for r in rows) / len(rows) for k in ('LH_us', 'LD_us', 'BH_GBps', 'BD_GBps')}
    print(json.dumps({'bench': 'box-vcuda', 'kind': 'mean', 'servers': n.value, **mean}))
    return 0


def spread(vs, fmt):
    return f'{fmt(statistics.median(vs))} ({fmt(min(vs))}..{fmt(max(vs))})'


def predict(a):
    try:
        import remd_balance_model as bm
    except ImportError:
        raise SystemExit('box-vcuda predict: needs analysis/remd_balance_model.py (run it from a full checkout)')
    by_n = {}
    for path in a.files:
        with open(path) as f:
            for line in f:
                if line.startswith('{'):
                    rec = json.loads(line)
                    if rec.get('bench') == 'box-vcuda' and rec.get('kind') == 'mean':
                        by_n.setdefault(rec['servers'], []).append(rec)
    if not by_n:
        raise SystemExit('box-vcuda predict: no "mean" line in the files given')
    q = REF['quarters_s']
    rows = [(s * REF['nrep'] // 4, (s + 1) * REF['nrep'] // 4 - 1, t) for s, t in enumerate(q)]
    t_gpu1 = 4 * REF['ideal_n4_s']  # the one-GPU kernel time: 4x the ideal share at n = 4
    one = bm.OneGpu(natom=REF['natom'], nrep=REF['nrep'], mexch=REF['mexch'], sms=REF['sms'], occ=REF['occ'],
                    waves=REF['waves'], segments=rows, t_gpu1=t_gpu1,
                    t_local1=t_gpu1 + REF['t_local_extra_s'], t_clt=REF['t_clt_s'])
    out = []
    print(f'vcuda across the shaped link, servers on other nodes; median of {min(map(len, by_n.values()))}'
          f'..{max(map(len, by_n.values()))} runs (min..max)')
    print(f'{"servers":>7}  {"LH us":>18}  {"LD us":>18}  {"BH GB/s":>18}  {"BD GB/s":>18}  '
          f'{"R(n), LK=0":>11}  {"R(n), LK=LH":>11}')
    for n in sorted(by_n):
        recs = by_n[n]
        med = {k: statistics.median(r[k] for r in recs) for k in ('LH_us', 'LD_us', 'BH_GBps', 'BD_GBps')}
        comm = {'BH': med['BH_GBps'] * 1e9, 'BD': med['BD_GBps'] * 1e9, 'LH': med['LH_us'] * 1e-6,
                'LD': med['LD_us'] * 1e-6}
        row = {'servers': n, 'runs': len(recs), **{k: [r[k] for r in recs] for k in med}}
        if REF['nrep'] % n:
            r0 = r1 = None
            row['refused'] = f'{REF["nrep"]} replicas do not divide over {n} GPUs'
        else:
            r0 = bm.predict(one, dict(comm, LK=0.0), n, 'contiguous', 'serial')['R']
            r1 = bm.predict(one, dict(comm, LK=comm['LH']), n, 'contiguous', 'serial')['R']
            row.update(R_lk0=r0, R_lk_lh=r1)
        out.append(row)
        f1 = (lambda x: f'{x:.1f}')
        f3 = (lambda x: f'{x:.3f}')
        rs = ('refused' if r0 is None else f'{r0:.3f}', 'refused' if r1 is None else f'{r1:.3f}')
        print(f'{n:>7}  {spread(row["LH_us"], f1):>18}  {spread(row["LD_us"], f1):>18}  '
              f'{spread(row["BH_GBps"], f3):>18}  {spread(row["BD_GBps"], f3):>18}  {rs[0]:>11}  {rs[1]:>11}')
        if r0 is None:
            print(f'         R({n}): {row["refused"]}')
    print(f'model from constants measured across the shaped link (indicative), one-GPU profile: {REF["machine"]}')
    if a.json:
        with open(a.json, 'w') as f:
            json.dump({'reference_profile': {k: v for k, v in REF.items() if k != 'waves'}, 'rows': out}, f, indent=1)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    c = sub.add_parser('client')
    c.add_argument('--reps', type=int, default=200)
    c.add_argument('--large', type=int, default=64 << 20)
    c.add_argument('--large-reps', type=int, default=5)
    p = sub.add_parser('predict')
    p.add_argument('files', nargs='+')
    p.add_argument('--json')
    a = ap.parse_args()
    if a.cmd == 'client':
        if a.reps < 1 or a.large < 8 or a.large_reps < 1:
            ap.error('--reps, --large-reps >= 1 and --large >= 8')
        return client(a)
    return predict(a)


if __name__ == '__main__':
    sys.exit(main())
