"""remd: the CLI contract (src/support/tests/cli_contract.py) on the CPU reference,
the records a run prints, and reproducibility: a fixed seed repeats a run exactly (every
number but the timings), another seed does not, and neither the placement of replicas on
devices nor the host loop changes a number (the CPU reference standing in for 2
devices); the one-device ladder profile covers the ladder."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'support', 'tests'))
from cli_contract import Contract  # noqa: E402

c = Contract(sys.argv[1])
SMALL = ['--cpu', '--cells', '4', '--replicas', '8', '--exchange-steps', '20', '--iterations', '3',
         '--bins', '4', '--verify-replicas', '2']
BAD = [['--cells', '3'],                      # box too small for the 3-sigma cutoff
       ['--cells', '0'], ['--replicas', '1'], ['--replicas', 'many'],
       ['--tmin', '300', '--tmax', '250'], ['--threads', '100'],
       ['--kernel', 'magic'], ['--ladder', 'random'], ['--gpus', '3', '--replicas', '8'],
       ['--verify-replicas', '9', '--replicas', '8'], ['--exchange-steps'],
       ['--placement', 'random'], ['--host-loop', 'magic'], ['--cpu', '--tune'], ['--tune', '--threads', '64'],
       ['--profile-segments', '9', '--replicas', '8'],
       ['--cpu', '--gpus', '2', '--replicas', '8', '--profile-segments', '2']]
rc, recs = c.check(BAD, SMALL)


def summary(name):
    return next((r for r in recs if r.get('metric') == name and 'rep' not in r), None)


def physics(records):
    """Everything a run computes except how long it took."""
    keep = []
    for r in records:
        if r.get('metric') in ('mean_potential', 'acceptance', 'acceptance_mean', 'in_cutoff_fraction'):
            keep.append((r['metric'], r.get('bin'), r['value']))
        elif r.get('metric') == 'interval_time':
            keep.append(('accepted', r.get('rep'), r.get('accepted'), r.get('u_mean')))
    return keep


if rc == 0:
    per_iter = [r for r in recs if r.get('metric') == 'interval_time' and 'rep' in r]
    c.expect(len(per_iter) == 3 and all({'t_gpu', 't_com', 't_clt'} <= set(r) for r in per_iter),
             'one interval_time record per iteration with the tGPU/tCOM/tCLT split')
    for m in ('interval_time', 't_gpu', 't_com', 't_clt', 't_gpu0', 'gpu_seconds', 'pair_evals_per_s',
              'acceptance_mean', 'in_cutoff_fraction'):
        c.expect(summary(m) is not None, f'summary metric {m}')
    pot = sorted((r for r in recs if r.get('metric') == 'mean_potential'), key=lambda r: r['bin'])
    c.expect(len(pot) == 4 and all(r['unit'] == 'kJ/mol/atom' for r in pot), 'a mean potential per bin')
    # Solid argon at 1.65 g/cm^3 binds at roughly -7 to -8 kJ/mol per atom (about -8 eps).
    c.expect(all(-9.0 < r['value'] < -5.0 for r in pot), f'potential energies of solid argon: {[r["value"] for r in pot]}')
    c.expect(all(a['value'] < b['value'] for a, b in zip(pot, pot[1:])), 'mean potential rises with temperature')
    acc = [r for r in recs if r.get('metric') == 'acceptance']
    c.expect(acc and all(0.0 <= r['value'] <= 1.0 and r['t_lo'] <= r['t_hi'] for r in acc), 'acceptance per bin in [0, 1]')
    ver = [r for r in recs if r.get('status') in ('verified', 'mismatch')]
    c.expect(len(ver) == 1 and ver[0]['pass'] and ver[0]['max_dx_nm'] == 0.0,
             'the CPU path matches its own reference exactly')
    pairs = 8 * 256 * 255 * 20
    c.expect(abs(summary('pair_evals_per_s')['value'] * summary('interval_time')['value'] - pairs) < 1e-6 * pairs,
             'pair evaluations counted as Nrep N (N-1) Mexch')
    p = recs[0]['params']
    c.expect((p['natom'], p['nrep'], p['mexch'], p['miter'], p['mode']) == (256, 8, 20, 3, 'cpu'),
             'params echo the run')

    again = c.run(*SMALL)
    import json
    recs2 = [json.loads(line) for line in again.stdout.splitlines()]
    c.expect(again.returncode == 0 and physics(recs2) == physics(recs),
             'the same seed reproduces every energy, acceptance and swap count')
    other = c.run(*SMALL, '--seed', '4242')
    recs3 = [json.loads(line) for line in other.stdout.splitlines()]
    c.expect(other.returncode == 0 and physics(recs3) != physics(recs), 'another seed gives another run')

    # Placement and host loop: the same numbers (close temperatures, so replicas swap).
    CLOSE = ['--cpu', '--cells', '4', '--replicas', '8', '--exchange-steps', '10', '--iterations', '3',
             '--bins', '4', '--tmin', '100', '--tmax', '104']
    runs = {}
    for extra in (['--gpus', '1'], ['--gpus', '2', '--placement', 'contiguous', '--host-loop', 'serial'],
                  ['--gpus', '2', '--placement', 'interleaved', '--host-loop', 'threads'],
                  ['--gpus', '4', '--placement', 'interleaved', '--host-loop', 'serial']):
        p = c.run(*CLOSE, *extra)
        rs = [json.loads(line) for line in p.stdout.splitlines()]
        c.expect(p.returncode == 0, f'{extra} runs (rc={p.returncode})')
        runs[' '.join(extra)] = rs
    ref = physics(runs['--gpus 1'])
    c.expect(sum(a[2] for a in ref if a[0] == 'accepted' and a[1] is not None) > 0, 'replicas swap in the placement runs')
    for name, rs in runs.items():
        c.expect(physics(rs) == ref, f'{name}: the same energies, acceptances and swaps as one device')
        p = rs[0]['params']
        c.expect(p['devices'] == int(name.split()[1]) and p['placement'] in ('interleaved', 'contiguous')
                 and p['host_loop'] in ('threads', 'serial'), f'{name}: params name devices, placement, host loop')

    prof = c.run(*CLOSE, '--profile-segments', '4', '--profile-steps', '3')
    rs = [json.loads(line) for line in prof.stdout.splitlines()]
    seg = sorted((r for r in rs if r.get('metric') == 'ladder_segment_time'), key=lambda r: r['segment'])
    c.expect(prof.returncode == 0 and len(seg) == 4 and all(r['value'] > 0 and r['steps'] == 3 for r in seg),
             'four ladder segments timed over 3 steps each')
    c.expect([(r['k_lo'], r['k_hi']) for r in seg] == [(0, 1), (2, 3), (4, 5), (6, 7)] and
             all(a['t_hi'] < b['t_lo'] for a, b in zip(seg, seg[1:])), 'the segments cut the ladder in order')
    c.expect(physics(rs) == ref, 'profiling (copies) changes nothing the run computes')
c.exit()
