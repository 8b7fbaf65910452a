"""Per-fault timing (--fault-timing) of one engine through the three benchmarks.

    test_fault_timing.py BIN_DIR ENGINE LAUNCHER ARGS...

For every `faults` line a timed run writes, its `fault_time` lines must describe the
same faults:
  - one line per point (a b q c d wake exchange stall), none with a stamp missing or
    out of order, none still in flight;
  - every point the engine observes counted once per fault; uffd's a, wake and stall
    marked unobservable with a reason and counted zero times;
  - the stamps chain: sum(a+b+q+c+d) = sum(exchange) and (SIGSEGV engines)
    sum(a+b+q+c+wake) = sum(stall), to 1e-6;
  - median <= p99 <= max (within the histogram's 1/128) and mean <= max;
  - one thread (microbenchmark): a thread waits for one fault at a time, so the time
    it waits in faults (stall; uffd: exchange - d) lies within the phase's wall time,
    and the paging-bound microbenchmark spends at least half of it there.
Without the option a run writes no fault_time line and says fault_timing 0."""
import json
import os
import subprocess
import sys

bin_dir, engine, launcher = sys.argv[1], sys.argv[2], sys.argv[3:]
SIGSEGV = engine != 'uffd'
POINTS = ['a', 'b', 'q', 'c', 'd', 'wake', 'exchange', 'stall']
UNOBSERVABLE = set() if SIGSEGV else {'a', 'wake', 'stall'}
DLM = ['--engine', engine, '--page-size', '16K', '--uffd-workers', '2']
RUNS = {
    'micro': ['--elements', '262144', '--capacity', '256K', '--mem-capacity', '8M', '--threads', '1,4'],
    'stencil': ['--nx', '16', '--ny', '16', '--ratios', '0.5,2', '--check', '--capacity', '1M',
                '--mem-capacity', '16M', '--threads', '2'],
    'stream': ['--ratios', '2', '--ntimes', '2', '--bw-reps', '2', '--capacity', '1M', '--mem-capacity', '16M',
               '--threads', '2'],
}
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print('FAIL:', what)


def run(kind, extra):
    cmd = launcher + [os.path.join(bin_dir, f'dlm-{kind}')] + DLM + RUNS[kind] + extra
    env = {k: v for k, v in os.environ.items() if k != 'DLM_FAULT_TIMING'}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    sys.stderr.write(r.stderr[-3000:])
    if r.returncode == 77:
        print(f'skipped: {engine} is unsupported here: {r.stderr.strip()[-300:]}')
        sys.exit(77)
    expect(r.returncode == 0, f'{kind}: exit status {r.returncode}')
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith('{')]


def key(rec):
    return rec.get('phase'), rec.get('threads'), rec.get('ratio')


def close(x, y):
    return abs(x - y) <= 1e-6 * max(abs(x), abs(y)) + 1e-8


def check_phase(kind, faults_rec, lines):
    where = f'{kind} {key(faults_rec)}'
    faults = faults_rec['value']
    by = {}
    for r in lines:
        expect(r['point'] not in by, f'{where}: point {r["point"]} twice')
        by[r['point']] = r
    expect(sorted(by) == sorted(POINTS), f'{where}: points {sorted(by)}, expected {sorted(POINTS)}')
    if sorted(by) != sorted(POINTS):
        return
    for p, r in by.items():
        expect(r['backwards'] == 0, f'{where}: {r["backwards"]} intervals with a stamp missing or out of order')
        expect(r['in_flight'] == 0, f'{where}: {r["in_flight"]} exchanges still in flight when read')
        expect(r['faults'] == faults, f'{where}: point {p} speaks of {r["faults"]} faults, the phase had {faults}')
        if p in UNOBSERVABLE:
            expect(r['n'] == 0 and r['observable'] is False and r.get('reason'),
                   f'{where}: {p} should be unobservable with a reason, got n={r["n"]}')
            continue
        expect(r['observable'] is True and r['n'] == faults, f'{where}: point {p} counted {r["n"]} of {faults} faults')
        if r['n']:
            mean, p50, p99, mx = r['value'], r['p50_us'], r['p99_us'], r['max_us']
            slack = 1 + 1 / 128 + 1e-9
            expect(p50 <= p99 * slack and p99 <= mx * slack and mean <= mx * (1 + 1e-9),
                   f'{where}: point {p}: median {p50}, p99 {p99}, mean {mean}, max {mx} out of order')
            expect(close(r['sum_s'], mean * 1e-6 * r['n']), f'{where}: point {p}: sum {r["sum_s"]} != mean x n')
    s = {p: by[p]['sum_s'] for p in POINTS}
    parts = s['a'] + s['b'] + s['q'] + s['c'] + s['d']
    expect(close(parts, s['exchange']), f'{where}: a+b+q+c+d = {parts} s, exchange = {s["exchange"]} s')
    if SIGSEGV:
        waited = s['a'] + s['b'] + s['q'] + s['c'] + s['wake']
        expect(close(waited, s['stall']), f'{where}: a+b+q+c+wake = {waited} s, stall = {s["stall"]} s')
    if kind == 'micro' and faults_rec['threads'] == 1:
        wall = by['exchange']['wall_s']
        waited = s['stall'] if SIGSEGV else s['exchange'] - s['d']
        expect(waited <= wall, f'{where}: one thread waited {waited} s in faults, more than the phase ({wall} s)')
        expect(waited >= 0.5 * wall, f'{where}: one thread waited {waited} s in faults, under half the '
                                     f'paging-bound phase ({wall} s): faults go untimed')
    return faults


paging = 0
for kind in RUNS:
    recs = run(kind, ['--fault-timing'])
    timed = [r for r in recs if r.get('metric') == 'fault_time']
    phases = [r for r in recs if r.get('metric') == 'faults']
    expect(phases and all(r['params'].get('fault_timing') == 1 for r in recs if 'params' in r),
           f'{kind}: records with fault_timing 1')
    expect(len(timed) == len(POINTS) * len(phases), f'{kind}: {len(timed)} fault_time lines for {len(phases)} phases')
    for f in phases:
        paging += (check_phase(kind, f, [r for r in timed if key(r) == key(f)]) or 0) > 0

# The timing must have been exercised: every run pages in at least one phase.
expect(paging >= 3, f'only {paging} phases paged: the sizes no longer page')

recs = run('micro', [])
expect(not any(r.get('metric') == 'fault_time' for r in recs), 'fault_time lines without --fault-timing')
expect(all(r['params'].get('fault_timing') == 0 for r in recs if 'params' in r),
       'records without --fault-timing say fault_timing 0')

print(f'test_fault_timing {engine}: ' + ('FAIL' if failures else 'ok'))
sys.exit(1 if failures else 0)
