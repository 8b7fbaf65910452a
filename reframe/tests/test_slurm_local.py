"""The CPU checks through a real single-host Slurm: .ci/slurm-local.sh starts munged,
slurmctld and slurmd under a temporary directory; `reframe --system slurm -r` submits
every check with sbatch (scheduler `scontrol`, reframe/lib/umstudy/slurm.py) and launches
MPI ranks with `srun --mpi=pmix`; the run report must hold passing CPU checks with their
Slurm job ids.  Where Slurm cannot start (not root, packages missing) the test skips
with the script's reason; with CI set it fails instead (CI must run it)."""
import json
import os
import subprocess
import sys

import pytest

from umstudy import data

ROOT = data.REPO
SCRIPT = os.path.join(ROOT, '.ci', 'slurm-local.sh')
RFM_MAIN = 'import sys; sys.argv[0] = "reframe"; from reframe.frontend.cli import main; main()'


@pytest.fixture
def slurm(tmp_path):
    d = tmp_path / 'slurm'
    r = subprocess.run([SCRIPT, 'start', str(d)], capture_output=True, text=True, timeout=180)
    if r.returncode == 3:
        reason = r.stderr.strip().splitlines()[-1]
        if os.environ.get('CI'):
            pytest.fail(f'CI must run the Slurm test: {reason}')
        pytest.skip(reason)
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield str(d / 'slurm.conf')
    finally:
        subprocess.run([SCRIPT, 'stop', str(d)], timeout=60)


def test_cpu_checks_run_through_slurm(slurm, tmp_path):
    report = tmp_path / 'slurm-report.json'
    env = dict(os.environ, SLURM_CONF=slurm, UMSTUDY_OUTPUT=str(tmp_path / 'out'),
               RFM_CONFIG_FILES=os.path.join(ROOT, 'reframe', 'config', 'umstudy.py'),
               PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib'), PYTHONUNBUFFERED='1')
    # Every check: the GPU ones skip here with their reason, as on `local`.  Performance
    # is not judged (a 2-core box oversubscribed by MPI ranks says nothing about it).
    r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-c', os.path.join(ROOT, 'reframe'),
                        '--system', 'slurm', '-r', '--skip-performance-check',
                        f'--report-file={report}'],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=1500)
    print(r.stdout[-2500:])
    assert report.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    cases = [tc for run in json.loads(report.read_text())['runs'] for tc in run['testcases']]
    ran = [tc for tc in cases if tc['result'] != 'skip' and not tc['display_name'].startswith('UmstudyBuild')]
    failed = [f"{tc['display_name']}: {tc.get('fail_reason')}" for tc in ran if tc['result'] != 'pass']
    assert not failed, '\n'.join(failed)
    # Every job but the model fit (a few seconds of Python on the submitting node, `local`
    # by design) went through Slurm: a job id from sbatch, a script with its walltime.
    batch = [tc for tc in ran if not tc.get('local')]
    jobs = {tc['display_name']: tc.get('jobid') for tc in batch}
    assert jobs and all(str(j).isdigit() for j in jobs.values()), jobs
    print('sbatch job ids:', ', '.join(f'{n} -> {j}' for n, j in sorted(jobs.items())))
    kinds = {tc['display_name'].split()[0] for tc in batch}
    # MPI (coarray, dlm) and OpenMP (himeno-cpu) checks all ran as Slurm jobs.
    assert {'CabIs', 'DlmStream', 'HimenoCpuPerf'} <= kinds, kinds
    for tc in batch:
        script = open(os.path.join(tc['outputdir'], 'rfm_job.sh')).read()
        assert '#SBATCH --time=' in script and 'srun ' in script, script
    assert r.returncode == 0, r.stdout[-3000:]
