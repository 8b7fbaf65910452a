"""The device run's summariser (bench/device_summary.py) on real remd output (the CPU
reference standing in for the GPUs: same lines) and on lines in the formats vcuda-bench,
the vcuda client (VCUDA_STATS) and vcuda-server's supervisor print: medians over the
repeats, R(n) against the one-device run, round trips per device per interval, idle
latencies and the jump, the servers' CPU, whether runs on one device and on two gave the
same swaps and energies, and the median repeat copied for the model.

    test_device_summary.py REMD_BINARY"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
remd = sys.argv[1]
failures = []


def expect(cond, what):
    print(('ok   ' if cond else 'FAIL ') + what)
    if not cond:
        failures.append(what)


work = tempfile.mkdtemp(prefix='remd-summary-')
SMALL = ['--cpu', '--cells', '4', '--replicas', '8', '--exchange-steps', '5', '--iterations', '2', '--tmin', '100',
         '--tmax', '104']
env = dict(os.environ, OMP_NUM_THREADS='1')
for k in (1, 2, 3):
    for name, extra in (('prof-256', ['--gpus', '1', '--profile-segments', '2', '--profile-steps', '2']),
                        ('local-256-n2-interleaved-threads', ['--gpus', '2'])):
        with open(f'{work}/{name}.r{k}.jsonl', 'w') as out, open(f'{work}/{name}.r{k}.err', 'w') as err:
            subprocess.run([remd, *SMALL, *extra], stdout=out, stderr=err, env=env, check=True)
# the same run on one device and on two (same physics), and one with another seed (not)
SAME = ['--cpu', '--cells', '4', '--replicas', '8', '--exchange-steps', '5', '--iterations', '3', '--tmin', '100',
        '--tmax', '104']
for name, extra in (('verify-256-n1', ['--gpus', '1']),
                    ('verify-256-n2-contiguous-serial', ['--gpus', '2', '--placement', 'contiguous',
                                                         '--host-loop', 'serial']),
                    ('verify-256-n2-interleaved-threads', ['--gpus', '2', '--seed', '5'])):
    with open(f'{work}/{name}.r1.jsonl', 'w') as out, open(f'{work}/{name}.r1.err', 'w') as err:
        subprocess.run([remd, *SAME, *extra], stdout=out, stderr=err, env=env, check=True)
# the client's VCUDA_STATS lines on a run's stderr: 2 and 5 intervals
for it, trips in ((2, (20, 21)), (5, (35, 36))):
    with open(f'{work}/rt-threads-i{it}.r1.jsonl', 'w') as f:
        f.write(json.dumps({'bench': 'remd', 'metric': 'interval_time', 'value': 0.1, 'unit': 's',
                            'params': {'natom': 256, 'gpus': 2, 'mode': 'gpu'}}) + '\n')
    with open(f'{work}/rt-threads-i{it}.r1.err', 'w') as f:
        for d, n in enumerate(trips):
            f.write(json.dumps({'bench': 'vcuda-client', 'metric': 'round_trips', 'value': n, 'unit': '1',
                                'device': d, 'server': '127.0.0.1:1', 'posts': it, 'keepalives': 3,
                                'bytes_to_server': 1, 'bytes_from_server': 1}) + '\n')
# vcuda-bench's idle sweep, and the servers' CPU lines in the run's log directory
for k, (fast, slow) in enumerate(((20.0, 120.0), (22.0, 100.0), (21.0, 110.0)), 1):
    with open(f'{work}/idle-vcuda-ka2.r{k}.jsonl', 'w') as f:
        for gap, v in ((0, fast), (50, slow)):
            f.write(json.dumps({'bench': 'vcuda-bench', 'metric': 'd2h_after_idle', 'value': v, 'unit': 'us',
                                'transport': 'vcuda-tcp', 'servers': 1, 'interval_ms': gap, 'params': {}}) + '\n')
    os.makedirs(f'{work}/idle-vcuda-ka2.r{k}.logs')
    with open(f'{work}/idle-vcuda-ka2.r{k}.logs/vcuda-server-0.log', 'w') as f:
        f.write('vcuda-server: device 0 listening on 127.0.0.1:5\n'
                f'vcuda-server: device 0: serving process 77 used 0.{k}00 s of CPU (user 0.050, system 0.050) '
                f'in 10.000 s: {k}.0%\n')

dest = os.path.join(work, 'medians.json')
p = subprocess.run([sys.executable, os.path.join(HERE, '..', 'bench', 'device_summary.py'), work, dest,
                    '--median-copies'], capture_output=True, text=True)
print(p.stdout, p.stderr)
expect(p.returncode == 0, 'the summariser runs')
doc = json.load(open(dest))
prof, two = doc['prof-256'], doc['local-256-n2-interleaved-threads']
t = prof['metrics']['interval_time']
expect(t['n'] == 3 and t['min'] <= t['median'] <= t['max'], 'one-device interval time: median of 3 repeats')
expect(two['params']['placement'] == 'interleaved' and two['params']['devices'] == 2, 'params kept')
r = two['R']
expect(abs(r['median'] - t['median'] / two['metrics']['gpu_seconds']['median']) < 1e-12 and r['min'] <= r['max'],
       'R(n) = T(1) / (n T(n)), with the extremes the repeats allow')
expect(doc['round_trips_per_device_per_interval'] == {'threads': {'0': 5.0, '1': 5.0}},
       'round trips per device per interval from 2 and 5 intervals')
idle = doc['idle-vcuda-ka2']
expect(idle['d2h_after_idle_us']['50']['median'] == 110.0 and abs(idle['jump_of_medians'] - 110 / 21) < 1e-12,
       'idle latency medians and their jump')
expect(idle['server_cpu_percent']['median'] == 2.0, 'servers CPU share from their logs')
expect(doc['same_physics'] == {'verify-256-n2-contiguous-serial': True, 'verify-256-n2-interleaved-threads': False},
       'same physics on one device and two; another seed differs')
med = open(os.path.join(work, 'prof-256.median.jsonl')).read()
def interval(k):
    with open(f'{work}/prof-256.r{k}.jsonl') as f:
        return next(r['value'] for r in map(json.loads, f) if r.get('metric') == 'interval_time' and 'rep' not in r)


times = sorted((interval(k), k) for k in (1, 2, 3))
expect(med == open(f'{work}/prof-256.r{times[1][1]}.jsonl').read(), 'the median repeat copied for the model')
expect('ladder_segment_time' in med, 'the copy holds the profile')
sys.exit(1 if failures else 0)
