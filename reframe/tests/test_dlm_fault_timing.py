"""The DLM checks with -S fault_timing=1, through a real ReFrame run on `local` (the
dlm component alone is built): P004's per-fault timing points become performance
variables of every engine beside the claims' ones, uffd's unobservable points are left
out, and without the option the checks report no such variable."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from umstudy import data

RFM_MAIN = 'import sys; sys.argv[0] = "reframe"; from reframe.frontend.cli import main; main()'
CASES = ['DlmMicro%engine=r77', 'DlmMicro%engine=uffd', 'DlmStencil%engine=r58']


def run_checks(tmp_path, names, *options):
    report = tmp_path / 'report.json'
    env = dict(os.environ, UMSTUDY_OUTPUT=str(tmp_path / 'out'), UMSTUDY_COMPONENTS='dlm',
               UMSTUDY_SIZE='quick', RFM_CONFIG_FILES=os.path.join(data.REPO, 'reframe', 'config', 'umstudy.py'),
               PYTHONPATH=os.path.join(data.REPO, 'reframe', 'lib'))
    cmd = [sys.executable, '-c', RFM_MAIN, '-c', os.path.join(data.REPO, 'reframe', 'dlm.py'),
           '--system', 'local', '-r', f'--report-file={report}', *options]
    for n in names:
        cmd += ['-n', n]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200, cwd=data.REPO)
    assert report.exists(), r.stdout[-3000:] + r.stderr[-2000:]
    cases = {tc['name']: tc for run in json.loads(report.read_text())['runs'] for tc in run['testcases']
             if not tc.get('fixture')}
    return cases, r.stdout


def variables(tc):
    return {k.rsplit(':', 1)[-1]: v[0] for k, v in (tc.get('perfvalues') or {}).items()}


def test_dlm_checks_report_the_fault_timing_points(tmp_path):
    if not shutil.which('mpirun'):
        pytest.skip('no mpirun on this machine: the DLM checks cannot run')
    cases, out = run_checks(tmp_path, CASES, '-S', 'fault_timing=1')
    assert len(cases) == len(CASES), out[-3000:]
    for name, tc in cases.items():
        if tc['result'] == 'skip':  # uffd where userfaultfd is not permitted
            assert 'userfaultfd' in tc['skip_reason'], tc['skip_reason']
            continue
        # A performance reference the quick size misses (P004's retention) is a verdict,
        # not a broken check: every other phase must have passed.
        assert tc['result'] == 'pass' or tc.get('fail_phase') == 'performance', (name, tc.get('fail_reason'))
        perf = variables(tc)
        where = ['t1', 't4'] if name.startswith('DlmMicro') else ['4x']
        engine = re.search(r'engine=(\w+)', name).group(1)
        seen = ['b', 'q', 'c', 'd'] + (['a', 'wake', 'stall'] if engine != 'uffd' else [])
        for w in where:
            for p in seen:
                assert perf.get(f'fault_{p}_us_{w}', 0) > 0 or p == 'q', (name, p, w, sorted(perf))
            assert 0 <= perf[f'fault_q_share_{w}'] <= 100
            if engine == 'uffd':
                assert not any(f'fault_{p}_us_{w}' in perf for p in ('a', 'wake', 'stall')), sorted(perf)
            else:  # the faulting thread waits for a..c of its own fault, then its wake-up
                parts = sum(perf[f'fault_{p}_us_{w}'] for p in ('a', 'b', 'q', 'c', 'wake'))
                assert parts == pytest.approx(perf[f'fault_stall_us_{w}'], rel=1e-6)
        # the claims' variables are still there
        assert ('time_t1' in perf) if name.startswith('DlmMicro') else ('retention_4x' in perf)

    cases, out = run_checks(tmp_path, CASES[:1])
    (tc,) = cases.values()
    assert 'time_t1' in variables(tc) and not any(k.startswith('fault_') and k.endswith(('_us_t1', 'share_t1'))
                                                  for k in variables(tc)), sorted(variables(tc))
