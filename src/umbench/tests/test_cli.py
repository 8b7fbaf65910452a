"""CLI contract of every umbench binary: --help, bad input -> exit 2 with a message and
no results, and a small run that either succeeds with JSON records of this bench or
(no GPU here) exits 77 with an `unsupported` line naming the reason.

    test_cli.py BINARY [MPIEXEC ARGS...]   (the halo programs run under MPIEXEC)
"""
import json
import os
import subprocess
import sys

exe, launcher = sys.argv[1], sys.argv[2:]
name = os.path.basename(exe)
kind = name.split('-')[1]          # umb-<kind>[-acc-<mode>]
failures = []
SMALL = {
    'modes': ['--size', '1M'],
    'fraction': ['--size', '1M', '--step', '25'],
    'stride': ['--size', '1M', '--min', '4K', '--max', '16K', '--step', '4K'],
    'halo': ['--n', '64', '--iterations', '2', '--verify'],
    'baseline': ['--size', '1M', '--reps', '3', '--trials', '2'],
    'patterns': ['--size', '1M', '--reps', '3', '--trials', '1', '--alloc', 'managed'],
    'migration': ['--size', '1M', '--reps', '2', '--trials', '1', '--alloc', 'managed'],
}
BAD = {
    'modes': [['--size', '0'], ['--size', '1Q'], ['--modes', 'telepathy'], ['--size', '1001']],
    'fraction': [['--step', '0'], ['--step', 'x']],
    'stride': [['--min', '12'], ['--min', '64K', '--max', '4K']],
    'halo': [['--n', '63'], ['--packs', 'fpga'], ['--modes', 'psychic'], ['--n', '4096', '--verify']],
    'baseline': [['--reps', '0'], ['--trials', '-3']],
    'patterns': [['--alloc', 'magic'], ['--reps', '0']],
    'migration': [['--alloc', 'magic'], ['--reps', 'x']],
}
COMMON_BAD = [['--bogus'], ['stray'], ['--device']]
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')


def run(*args):
    return subprocess.run([*launcher, exe, *args], capture_output=True, text=True, timeout=600, env=env)


def expect(cond, what):
    if not cond:
        failures.append(what)
        print('FAIL:', name, what)


r = run('--help')
expect(r.returncode == 0 and '--' in r.stdout, f'--help exits 0 and lists options (rc={r.returncode})')
for bad in BAD[kind] + COMMON_BAD:
    r = run(*bad)
    expect(r.returncode == 2 and 'error' in r.stderr.lower() and r.stdout.strip() == '',
           f'{bad} exits 2 with a message and no results (rc={r.returncode}, out={r.stdout[:200]!r})')

r = run(*SMALL[kind])
expect(r.returncode in (0, 77), f'a small run exits 0 or 77 (rc={r.returncode}: {r.stderr[-400:]})')
lines = []
for line in r.stdout.splitlines():
    try:
        lines.append(json.loads(line))
    except json.JSONDecodeError:
        expect(False, f'stdout line is not JSON: {line[:120]!r}')
expect(lines and all('bench' in l and l['bench'].startswith('umb-') for l in lines),
       'every stdout line is a umbench JSON record')
if r.returncode == 77:
    expect(any(l.get('status') == 'unsupported' and l.get('reason') for l in lines),
           'exit 77 comes with an unsupported line and its reason')
    print(f'{name}: no usable GPU here, checked the exit-77 path:',
          next((l['reason'] for l in lines if l.get('reason')), '?'))
else:
    expect(not any(l.get('status') in ('error', 'mismatch') for l in lines), 'no error or mismatch lines')
    expect(any('metric' in l and 'unit' in l for l in lines), 'at least one measurement with a unit')
sys.exit(1 if failures else 0)
