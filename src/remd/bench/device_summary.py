#!/usr/bin/env python3
"""The device run's repeats (src/remd/bench/device-run.sh) as one JSON document.

    device_summary.py WORK OUT.json [--median-copies]

WORK holds one file per repeat, <name>.r<k>.jsonl (stdout) and <name>.r<k>.err, and for
runs through vcuda-run the servers' logs in <name>.r<k>.logs/.  Per run name:
  - remd: its parameters and, per summary metric (interval_time, t_gpu, t_com, t_clt,
    gpu_seconds, t_gpu_imbalance, ...), the median, min and max over the repeats; each
    device's kernel time; the threads per block the sweep chose; R(n) = T(1) / (n T(n))
    against the one-GPU local run of the same atom count (prof-<atoms>), median and the
    extremes the repeats allow; vcuda's round trips per device (VCUDA_STATS lines);
  - vcuda-bench: the fit, D2H latency after each idle gap and the jump (medians);
  - the servers' CPU time (their supervisors' 'used X s of CPU' lines), per cent of wall.
Round trips per device per interval: (rt-<loop>-i5 - rt-<loop>-i2) / 3.  same_physics:
whether each verify-256-n2-* run's swaps and mean energy per interval equal those of
verify-256-n1 (the same run on one GPU).  With
--median-copies, WORK/<name>.median.jsonl is the repeat whose interval time is the
median (what the balance model reads: one run's profile).
"""
import glob
import json
import os
import re
import shutil
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'analysis'))
import remd_model  # noqa: E402  (one JSON-lines reader)

REMD_SUMMARY = ('interval_time', 't_gpu', 't_com', 't_clt', 'gpu_seconds', 't_gpu_imbalance', 'pair_evals_per_s',
                't_gpu0', 'acceptance_mean')
CPU_LINE = re.compile(r'used ([0-9.]+) s of CPU .* in ([0-9.]+) s: ([0-9.]+)%')


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {'median': statistics.median(values), 'min': min(values), 'max': max(values), 'n': len(values)}


def json_lines(path):
    """The JSON objects of a file's lines (none where the file is absent)."""
    if not os.path.exists(path):
        return []
    with open(path, errors='replace') as f:
        return list(remd_model._json_lines(f))


def repeats(work):
    """{name: [(k, stdout records, stderr records, log dir)]} in repeat order."""
    runs = {}
    for path in glob.glob(os.path.join(work, '*.r*.jsonl')):
        base = os.path.basename(path)[:-len('.jsonl')]
        name, _, k = base.rpartition('.r')
        if not k.isdigit():
            continue
        runs.setdefault(name, []).append((int(k), json_lines(path), json_lines(os.path.join(work, base + '.err')),
                                          os.path.join(work, base + '.logs')))
    return {n: sorted(r, key=lambda x: x[0]) for n, r in sorted(runs.items())}


def server_cpu(logdir):
    """[(cpu s, wall s, per cent)] of the servers whose logs are in logdir."""
    out = []
    for path in sorted(glob.glob(os.path.join(logdir, '*.log'))):
        with open(path, errors='replace') as f:
            for line in f:
                m = CPU_LINE.search(line)
                if m:
                    out.append(tuple(float(x) for x in m.groups()))
    return out


def summarise_remd(reps):
    first = next((recs for _, recs, _, _ in reps if recs), [])
    params = next((r.get('params', {}) for r in first), {})
    out = {'kind': 'remd', 'params': params, 'repeats': len(reps), 'metrics': {}, 'status': []}
    per_metric = {}
    devices, tuned, trips = {}, [], {}
    for _, recs, errs, _ in reps:
        for r in recs:
            if r.get('status'):
                out['status'].append(r['status'])
            m = r.get('metric')
            if m in REMD_SUMMARY and 'rep' not in r and 'device' not in r:
                per_metric.setdefault(m, []).append(r['value'])
            elif m == 'device_kernel_time':
                devices.setdefault(r['device'], []).append(r['value'])
            elif m == 'tune_time' and r.get('chosen'):
                tuned.append(r['threads'])
        for r in errs:
            if r.get('bench') == 'vcuda-client' and r.get('metric') == 'round_trips':
                trips.setdefault(r['device'], []).append({k: r.get(k) for k in ('value', 'posts', 'keepalives')})
    out['metrics'] = {m: spread(v) for m, v in per_metric.items()}
    if devices:
        out['device_kernel_time'] = {str(d): spread(v) for d, v in sorted(devices.items())}
    if tuned:
        out['tuned_threads'] = tuned
    if trips:
        out['round_trips'] = {str(d): v for d, v in sorted(trips.items())}
    out['status'] = sorted(set(out['status']))
    return out


def summarise_bench(reps):
    first = next((recs for _, recs, _, _ in reps if recs), [])
    params = next((r.get('params', {}) for r in first), {})
    out = {'kind': 'vcuda-bench', 'params': params, 'repeats': len(reps)}
    idle, jump, fit = {}, [], {}
    for _, recs, _, _ in reps:
        for r in recs:
            if r.get('metric') == 'd2h_after_idle':
                idle.setdefault(r['interval_ms'], []).append(r['value'])
            elif r.get('metric') == 'd2h_idle_jump':
                jump.append(r['value'])
            elif r.get('kind') == 'fit' and r.get('servers') == 1 and r.get('metric') in ('BH', 'BD', 'LH', 'LD', 'LK'):
                fit.setdefault(r['metric'], []).append(r['value'])
    if idle:
        med = {str(g): spread(v) for g, v in sorted(idle.items())}
        out['d2h_after_idle_us'] = med
        lo, hi = min(idle), max(idle)
        out['jump_of_medians'] = statistics.median(idle[hi]) / statistics.median(idle[lo])
    if jump:
        out['d2h_idle_jump'] = spread(jump)
    if fit:
        out['fit'] = {k: spread(v) for k, v in fit.items()}
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    work, dest, copies = argv[0], argv[1], '--median-copies' in argv[2:]
    runs = repeats(work)
    doc = {}
    for name, reps in runs.items():
        benches = {r.get('bench') for _, recs, _, _ in reps for r in recs}
        entry = summarise_bench(reps) if 'vcuda-bench' in benches else summarise_remd(reps)
        cpu = [c for _, _, _, logs in reps for c in server_cpu(logs)]
        if cpu:
            entry['server_cpu_percent'] = spread([c[2] for c in cpu])
        doc[name] = entry
        if copies and entry['kind'] == 'remd' and reps:
            times = [(next((r['value'] for r in recs if r.get('metric') == 'interval_time' and 'rep' not in r),
                           None), k) for k, recs, _, _ in reps]
            times = sorted(t for t in times if t[0] is not None)
            if times:
                k = times[len(times) // 2][1]
                shutil.copyfile(os.path.join(work, f'{name}.r{k}.jsonl'), os.path.join(work, f'{name}.median.jsonl'))
    # R(n) against the one-GPU local run of the same atom count
    for name, e in doc.items():
        if e['kind'] != 'remd' or not e['metrics'].get('gpu_seconds'):
            continue
        natom = e['params'].get('natom')
        ref = doc.get(f'prof-{natom}')
        if not ref or not ref['metrics'].get('interval_time'):
            continue
        t1, gs = ref['metrics']['interval_time'], e['metrics']['gpu_seconds']
        e['R'] = {'median': t1['median'] / gs['median'], 'min': t1['min'] / gs['max'], 'max': t1['max'] / gs['min']}
    # the same run on 1 GPU and on 2 in every arrangement (verify-256-n*): the same physics?
    same = {}
    for name, reps in runs.items():
        if name.startswith('verify-256-n') and reps:
            same[name] = [(r.get('rep'), r.get('accepted'), r.get('u_mean')) for r in reps[0][1]
                          if r.get('metric') == 'interval_time' and 'rep' in r]
    if len(same) > 1 and 'verify-256-n1' in same:
        ref = same['verify-256-n1']
        doc['same_physics'] = {name: bool(ref) and v == ref for name, v in same.items() if name != 'verify-256-n1'}
    # round trips per device per interval, by host loop
    per = {}
    for loop in ('threads', 'serial'):
        a, b = doc.get(f'rt-{loop}-i2', {}).get('round_trips'), doc.get(f'rt-{loop}-i5', {}).get('round_trips')
        if a and b:
            per[loop] = {d: (b[d][0]['value'] - a[d][0]['value']) / 3 for d in a if d in b}
    if per:
        doc['round_trips_per_device_per_interval'] = per
    with open(dest, 'w') as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    for name, e in doc.items():
        if not isinstance(e, dict) or 'kind' not in e:
            continue
        if e['kind'] == 'remd' and e['metrics'].get('interval_time'):
            t = e['metrics']['interval_time']
            r = e.get('R')
            print(f"{name:36s} T {t['median'] * 1e3:10.2f} ms ({t['min'] * 1e3:.2f}-{t['max'] * 1e3:.2f}, n={t['n']})"
                  + (f"  R {r['median']:.4f} ({r['min']:.4f}-{r['max']:.4f})" if r else '')
                  + (f"  threads {e['tuned_threads']}" if e.get('tuned_threads') else ''))
        elif e['kind'] == 'vcuda-bench' and e.get('d2h_after_idle_us'):
            d = e['d2h_after_idle_us']
            print(f"{name:36s} D2H after idle: " + ', '.join(f"{g} ms {v['median']:.1f} us" for g, v in d.items())
                  + f"; jump {e['jump_of_medians']:.2f}x"
                  + (f"; servers {e['server_cpu_percent']['median']:.1f}% CPU" if e.get('server_cpu_percent') else ''))
    if per:
        print('round trips per device per interval:', json.dumps(per))
    if 'same_physics' in doc:
        print('same swaps and energies as on one GPU:', json.dumps(doc['same_physics']))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
