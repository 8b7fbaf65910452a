"""box_vcuda_model.py predict (bench/): per server count the median of the runs' constants
with min..max, R(n) of the balance model from them for the reference one-GPU profile (the
model's own numbers, recomputed here through analysis/remd_balance_model.py), n that does
not divide the replicas refused by name, no usable line a clear error.

    test_box_vcuda_model.py"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, '..', 'bench', 'box_vcuda_model.py')
ANALYSIS = os.path.join(HERE, '..', '..', '..', 'analysis')
if not os.path.exists(os.path.join(ANALYSIS, 'remd_balance_model.py')):
    print(f'skipped: no {ANALYSIS}/remd_balance_model.py (a source tree of src/ alone: the model is in analysis/)')
    sys.exit(77)
sys.path.insert(0, os.path.join(HERE, '..', 'bench'))
sys.path.insert(0, ANALYSIS)
import box_vcuda_model as bv  # noqa: E402
import remd_balance_model as bm  # noqa: E402

failures = []


def expect(cond, what):
    print(('ok   ' if cond else 'FAIL ') + what)
    if not cond:
        failures.append(what)


def mean(n, lh, bh):
    return json.dumps({'bench': 'box-vcuda', 'kind': 'mean', 'servers': n, 'LH_us': lh, 'LD_us': lh + 1,
                       'BH_GBps': bh, 'BD_GBps': bh})


with tempfile.TemporaryDirectory() as d:
    files = []
    for rep, (lh, bh) in enumerate([(10.0, 2.0), (30.0, 1.0), (20.0, 3.0)]):
        p = os.path.join(d, f'run{rep}.jsonl')
        with open(p, 'w') as f:
            f.write('{"bench":"placement","rank":0,"host":"umsnode1","gpus":[]}\n')
            f.write('\n'.join(mean(n, lh * n, bh) for n in (1, 2, 3)) + '\n')
        files.append(p)
    out = os.path.join(d, 'model.json')
    r = subprocess.run([sys.executable, SCRIPT, 'predict', '--json', out, *files], capture_output=True, text=True)
    expect(r.returncode == 0, f'predict exits 0 ({r.stderr.strip()})')
    rows = {row['servers']: row for row in json.load(open(out))['rows']} if r.returncode == 0 else {}
    expect(sorted(rows) == [1, 2, 3] and all(rows[n]['runs'] == 3 for n in rows), 'three runs for each of 1..3 servers')
    q = bv.REF['quarters_s']
    one = bm.OneGpu(natom=2048, nrep=14336, mexch=100, sms=132, occ=1, waves={1: 0.032},
                    segments=[(s * 3584, (s + 1) * 3584 - 1, t) for s, t in enumerate(q)],
                    t_gpu1=4 * 0.866, t_local1=4 * 0.866 + 1.2e-3, t_clt=5e-4)
    for n in (1, 2):
        comm = {'BH': 2e9, 'BD': 2e9, 'LH': 20e-6 * n, 'LD': (20 * n + 1) * 1e-6}   # the medians
        want0 = bm.predict(one, dict(comm, LK=0.0), n, 'contiguous', 'serial')['R']
        want1 = bm.predict(one, dict(comm, LK=comm['LH']), n, 'contiguous', 'serial')['R']
        row = rows.get(n, {})
        expect(abs(row.get('R_lk0', -1) - want0) < 1e-12 and abs(row.get('R_lk_lh', -1) - want1) < 1e-12,
               f'R({n}) is the balance model of the median constants, LK = 0 and LK = LH')
    expect(rows.get(1, {}).get('R_lk0', 0) > rows.get(2, {}).get('R_lk0', 1), 'R(1) > R(2): the ladder is not balanced')
    expect('do not divide over 3 GPUs' in rows.get(3, {}).get('refused', ''), 'n = 3 refused: 14,336 replicas')
    expect('R(3): 14336 replicas do not divide over 3 GPUs' in r.stdout, 'the table says why R(3) is missing')
    expect('2 (1..3)' in r.stdout or '2.000 (1.000..3.000)' in r.stdout, 'BH shown as median (min..max)')
    empty = os.path.join(d, 'empty.jsonl')
    open(empty, 'w').write('{"bench":"placement"}\n')
    r = subprocess.run([sys.executable, SCRIPT, 'predict', empty], capture_output=True, text=True)
    expect(r.returncode != 0 and 'no "mean" line' in r.stderr, 'a file without client lines: an error naming what is missing')

print(f'{len(failures)} failure(s)')
sys.exit(1 if failures else 0)
