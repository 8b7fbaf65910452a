"""CLI contract of a himeno binary: JSON lines, --verify, bad input -> exit 2."""
import json
import subprocess
import sys

exe = sys.argv[1]
failures = []


def run(*args):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300)


def expect(cond, what):
    if not cond:
        failures.append(what)
        print('FAIL:', what)


r = run('--help')
expect(r.returncode == 0 and '--iterations' in r.stdout, '--help exits 0 and lists options')

for bad in (['--iterations', '0'], ['--iterations', 'ten'], ['--size', 'XXL'],
            ['--dims', '2x8x8'], ['--dims', '8x8'], ['--dims', '8x8x8x8'], ['--bogus'],
            ['--iterations'], ['--repeat', '-1'], ['stray']):
    r = run(*bad)
    expect(r.returncode == 2 and 'error' in r.stderr and r.stdout == '',
           f'{bad} exits 2 with a message and no results (rc={r.returncode})')

r = run('--dims', '16x12x20', '--iterations', '4', '--repeat', '3', '--verify')
expect(r.returncode in (0, 77), f'verified run exits 0 or 77 (rc={r.returncode}, {r.stderr})')
lines = [json.loads(l) for l in r.stdout.splitlines()]
expect(all(l['bench'] == 'himeno' and 'params' in l for l in lines), 'every line is a himeno JSON record')
if r.returncode == 0:
    metrics = {l['metric']: l for l in lines if 'metric' in l and 'rep' not in l}
    for m in ('gflops', 'gflops_loop', 'time', 'gosa', 'p_checksum', 'copy_bandwidth', 'pct_roofline'):
        expect(m in metrics, f'metric {m} reported')
    expect(metrics['gflops']['unit'] == 'GFLOPS', 'gflops has its unit')
    expect(sum(1 for l in lines if l.get('metric') == 'time' and 'rep' in l) == 3, 'one time per repeat')
    ver = [l for l in lines if l.get('status') in ('verified', 'mismatch')]
    expect(len(ver) == 1 and ver[0]['pass'] is True and ver[0]['p_max_abs_diff'] == 0,
           'verification passes with bit-identical p')
    p = metrics['gosa']['params']
    expect((p['imax'], p['jmax'], p['kmax'], p['iterations']) == (16, 12, 20, 4), 'params echo the grid')
else:
    expect(any(l.get('status') == 'unsupported' and l.get('reason') for l in lines),
           'exit 77 comes with an unsupported line and a reason')

# XS by name is the static version's 33x33x65 arrays, i.e. a 32x32x64 grid.
r = run('--size', 'XS', '--iterations', '1')
if r.returncode == 0:
    p = json.loads(r.stdout.splitlines()[-1])['params']
    expect((p['imax'], p['jmax'], p['kmax']) == (32, 32, 64), 'XS is 32x32x64 points')

sys.exit(1 if failures else 0)
