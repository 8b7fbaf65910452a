"""CLI contract of every coarray-bench binary: --help exits 0 and lists options, bad
input exits 2 with a message on stderr and nothing on stdout, and a small run exits 0
with JSON records of this bench (and nothing but JSON on stdout).

    test_cli.py BINARY [LAUNCHER ARGS...]   (the program runs under the launcher)
"""
import json
import os
import subprocess
import sys

exe, launcher = sys.argv[1], sys.argv[2:]
name = os.path.basename(exe)       # cab-<kind>
kind = name.split('-', 1)[1]
failures = []
SMALL = {
    'pingpong': ['--min', '1', '--max', '1K', '--loop', '5'],
    'is': ['--class', 'S'],
    'cg': ['--class', 'S'],
}
BAD = {
    'pingpong': [['--loop', '0'], ['--min', '3'], ['--min', '64', '--max', '8'],
                 ['--ops', 'teleport'], ['--ops', ','], ['--max', 'x']],
    'is': [['--class', 'Z'], ['--variant', 'telepathy'], ['--class']],
    'cg': [['--class', 'D'], ['--variant', 'allreduce'], ['--variant']],
}
COMMON_BAD = [['--bogus'], ['stray']]
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
expect(r.returncode == 0, f'a small run exits 0 (rc={r.returncode}: {r.stderr[-400:]})')
lines = []
for line in r.stdout.splitlines():
    try:
        lines.append(json.loads(line))
    except json.JSONDecodeError:
        expect(False, f'stdout line is not JSON: {line[:120]!r}')
expect(lines and all(l.get('bench') == name for l in lines), 'every stdout line is a record of this bench')
expect(any('metric' in l and 'unit' in l for l in lines), 'at least one measurement with a unit')
expect(all(l.get('verified', True) is True for l in lines), 'every record is verified')
expect(all('backend' in l.get('params', {}) and 'images' in l.get('params', {}) for l in lines),
       'records carry the backend and image count')
sys.exit(1 if failures else 0)
