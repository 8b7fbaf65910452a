"""Job scripts each site's scheduler accepts, from a real ReFrame dry run: PBS Pro's
`-l select` on the PBS sites, NQSV's `-b` / `-T openmpi` on Cygnus."""
import glob
import os
import subprocess
import sys

import pytest

from umstudy import data

RFM_MAIN = 'import sys; sys.argv[0] = "reframe"; from reframe.frontend.cli import main; main()'
ROOT = data.REPO


def job_script(system, tmp_path):
    env = dict(os.environ, RFM_CONFIG_FILES=os.path.join(ROOT, 'reframe', 'config', 'umstudy.py'),
               UMSTUDY_OUTPUT=str(tmp_path), UMSTUDY_GROUP='grp42',
               PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib'))
    r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-c', os.path.join(ROOT, 'reframe'),
                        '--system', system, '--dry-run', '-n', '^CabIsMpi'],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    scripts = sorted(glob.glob(str(tmp_path / system / 'stage' / '**' / 'CabIsMpi*' / 'rfm_job.sh'),
                               recursive=True))
    assert scripts, r.stdout[-3000:]
    return open(scripts[-1]).read()


@pytest.mark.parametrize('system', ['miyabi', 'pegasus', 'tsubame'])
def test_pbs_sites(system, tmp_path):
    text = job_script(system, tmp_path)
    assert '#PBS -l select=' in text and '#PBS -W group_list=grp42' in text
    queue = next(a for a in data.system(system)['partitions'][0]['access'] if a.startswith('-q'))
    assert f'#PBS {queue}' in text


def test_cygnus_nqsv(tmp_path):
    text = job_script('cygnus', tmp_path)
    assert 'select=' not in text
    assert '#PBS -b ' in text and '#PBS -T openmpi' in text and '#PBS -A grp42' in text
