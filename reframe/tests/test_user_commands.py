"""What a user types: `make help`, `make run` with bad input, the documented ReFrame
listing / dry-run commands, and `make system` adding a cluster without other edits."""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from umstudy import data

ROOT = data.REPO
RFM_MAIN = 'import sys; sys.argv[0] = "reframe"; from reframe.frontend.cli import main; main()'


def make(*args, timeout=600, env=None):
    """make in the repository; `env` adds variables to this environment (None: removes one)."""
    extra, env = env or {}, dict(os.environ, PYTHON=sys.executable)
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return subprocess.run(['make', '--no-print-directory', '-C', ROOT, *args, f'PYTHON={sys.executable}'],
                          capture_output=True, text=True, env=env, timeout=timeout)


def reports():
    return sorted(glob.glob(os.path.join(ROOT, 'output', 'reports', '*.json')))


def test_make_help_lists_targets_and_variables():
    r = make('help')
    assert r.returncode == 0
    for word in ('make run', 'make test', 'make system', 'SIZE=', 'SYSTEM=', 'CHECKS=', 'RFMFLAGS='):
        assert word in r.stdout, word
    for name in data.system_names():
        assert name in r.stdout


@pytest.mark.parametrize('arg, choices', [('SIZE=papr', ['quick', 'paper']),
                                          ('SYSTEM=nosuchsystem', data.system_names()),
                                          ('REPEAT=0', ['positive number of repeats', '>= 3'])])
def test_make_run_refuses_bad_input_with_the_choices(arg, choices):
    before = reports()
    r = make('run', arg)
    assert r.returncode != 0
    assert all(c in r.stderr for c in choices), r.stderr
    assert 'report:' not in r.stdout      # no report path, old or new
    assert reports() == before


def test_make_run_with_checks_matching_nothing_says_so(tmp_path):
    """...before anything is configured or built (ReFrame's listing, seconds)."""
    before = reports()
    r = make('run', 'CHECKS=^NoSuchCheckAnywhere$', f'OUTPUT={tmp_path}', f'BUILD={tmp_path}/build')
    assert r.returncode != 0
    assert 'matches no check' in r.stderr and 'HimenoCpuPerf' in r.stderr, r.stderr[-2000:]
    assert 'report' not in r.stdout and not (tmp_path / 'build').exists(), r.stdout
    assert reports() == before


@pytest.mark.parametrize('arg, says', [('CHECKS=((', 'invalid regex'),
                                       ('JOBS=-1', 'JOBS=-1 is not a positive number'),
                                       ('JOBS=two', 'JOBS=two is not a positive number')])
def test_make_run_refuses_bad_checks_and_jobs_before_building(arg, says, tmp_path):
    r = make('run', arg, f'OUTPUT={tmp_path}', f'BUILD={tmp_path}/build')
    assert r.returncode == 2 or (r.returncode != 0 and says in r.stderr), r.stdout + r.stderr
    assert says in r.stderr and 'Usage' not in r.stdout + r.stderr, r.stderr
    assert not (tmp_path / 'build').exists()


def test_make_run_fails_on_a_failure_that_is_no_measurement(tmp_path):
    """A case that fails outside its performance references (here: no result lines, as a
    program's crash leaves) makes `make run` exit non-zero and names the check."""
    r = make('run', 'CHECKS=^HimenoCpuPerf$', 'REPEAT=1', 'RFMFLAGS=-S HimenoCpuPerf.bench=nosuch',
             f'UMSTUDY_COMPONENTS={_components()}', f'OUTPUT={tmp_path}')
    assert r.returncode != 0, r.stdout + r.stderr
    assert re.search(r'^run +\d+ passed, 0 skipped, 1 failed \(HimenoCpuPerf\)', r.stdout, re.M), r.stdout
    assert 'make run: failures' in r.stderr and 'failed outside performance' in r.stderr, r.stderr


def test_make_run_on_a_site_asks_its_batch_system_first(tmp_path):
    """A scheduler-backed system whose batch system does not answer here stops in one
    line, before anything is built."""
    from umstudy import jobs
    if not jobs.scheduler_check('cygnus'):
        pytest.skip("this machine's qstat answers: it is a site's login node")
    r = make('run', 'SYSTEM=cygnus', f'OUTPUT={tmp_path}', f'BUILD={tmp_path}/build')
    assert r.returncode != 0 and not (tmp_path / 'build').exists()
    said = [line for line in r.stderr.splitlines() if line.startswith('umstudy:')]
    assert len(said) == 1 and 'NQSV' in said[0] and 'qstat' in said[0], r.stderr


def test_reframe_takes_size_as_make_does(tmp_path):
    """SIZE=paper means the papers' sizes to ReFrame too (the walltimes of paper size), and
    a size that is not one stops ReFrame before a check is loaded."""
    env = dict(os.environ, RFM_CONFIG_FILES=os.path.join(ROOT, 'reframe', 'config', 'umstudy.py'),
               UMSTUDY_OUTPUT=str(tmp_path), PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib'), SIZE='paper')
    env.pop('UMSTUDY_SIZE', None)
    argv = [sys.executable, '-c', RFM_MAIN, '-c', os.path.join(ROOT, 'reframe'), '--system', 'cygnus',
            '--dry-run', '-n', '^UmbBaseline']
    r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    scripts = glob.glob(str(tmp_path / 'cygnus' / 'stage' / '**' / 'UmbBaseline_*' / 'rfm_job.sh'), recursive=True)
    assert scripts and all('elapstim_req=00:27:00' in open(p).read() for p in scripts), scripts
    r = subprocess.run(argv, capture_output=True, text=True, env=dict(env, SIZE='papr'), cwd=ROOT, timeout=300)
    assert r.returncode == 2 and 'SIZE=papr is not a size' in r.stderr, r.stdout + r.stderr


def test_one_programming_environment_per_check_unless_asked(tmp_path):
    env = dict(os.environ, RFM_CONFIG_FILES=os.path.join(ROOT, 'reframe', 'config', 'umstudy.py'),
               UMSTUDY_OUTPUT=str(tmp_path), PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib'))
    env.pop('UMSTUDY_ENVIRONS', None)

    def listing(*extra, **more):
        r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-c', os.path.join(ROOT, 'reframe'),
                            '--system', 'cygnus', '-lC', '-n', '^(HimenoCudaPerf|UmbAcc)', *extra],
                           capture_output=True, text=True, env=dict(env, **more), cwd=ROOT, timeout=300)
        return r.returncode, r.stdout + r.stderr, sorted(set(re.findall(r'@cygnus:gpu\+(\w+)', r.stdout)))
    rc, out, envs = listing()
    assert rc == 0 and re.search(r'HimenoCudaPerf.*@cygnus:gpu\+gnu', out) and \
        re.search(r'UmbAcc.*@cygnus:gpu\+pgi', out) and not re.search(r'HimenoCudaPerf.*\+pgi', out), out
    rc, out, envs = listing(UMSTUDY_ENVIRONS='all')
    assert rc == 0 and re.search(r'HimenoCudaPerf.*\+pgi', out) and re.search(r'HimenoCudaPerf.*\+gnu', out), out
    rc, out, envs = listing('-p', 'pgi')
    assert rc == 0 and envs == ['pgi'] and 'HimenoCudaPerf' in out, out
    rc, out, envs = listing(UMSTUDY_ENVIRONS='nvhpc')
    assert rc == 2 and 'no environment nvhpc' in out, out


def _components():
    cache = os.path.join(ROOT, 'build', 'default', 'CMakeCache.txt')
    if not os.path.exists(cache):
        pytest.skip('needs `make build` first (make run builds src/ before it runs ReFrame)')
    m = re.search(r'^UMSTUDY_COMPONENTS:\w+=(.*)$', open(cache).read(), re.M)
    return m.group(1) if m else ''


def test_ctrl_c_stops_make_run_and_keeps_earlier_runs(tmp_path):
    """Ctrl-C (SIGINT to the foreground process group) mid-run: ReFrame stops, make exits
    non-zero, the earlier complete run's report is untouched, the interrupted run leaves no
    report the next `make report` would read, and the next `make run` works."""
    args = ['make', '--no-print-directory', '-C', ROOT, 'run', f'PYTHON={sys.executable}',
            f'OUTPUT={tmp_path}', f'UMSTUDY_COMPONENTS={_components()}']
    first = subprocess.run(args + ['CHECKS=^HimenoCpuPerf'], capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    # one line per phase: the build's and ReFrame's output are in the run's logs
    phases = [line.split()[0] for line in first.stdout.splitlines()[1:]]
    assert phases == ['system', 'python', 'checks', 'build', 'run', 'run', 'provenance', 'report', 'verdicts'], \
        first.stdout
    assert not re.search(r'Entering directory|\[ *FAILED *\]|^#|cmake ', first.stdout, re.M), first.stdout
    done = sorted(glob.glob(str(tmp_path / 'reports' / '*.json')))
    assert len(done) == 1
    kept = open(done[0]).read()
    # (DLM ten times over: a session long enough to be mid-run when interrupted)
    p = subprocess.Popen(args + ['CHECKS=^Dlm', 'REPEAT=10'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while time.time() < deadline and not glob.glob(str(tmp_path / 'local' / 'stage' / '**' / 'Dlm*'),
                                                     recursive=True):
        time.sleep(0.5)   # ReFrame is running DLM checks now
    time.sleep(2)
    os.killpg(p.pid, signal.SIGINT)
    out = p.communicate(timeout=120)[0]
    assert p.returncode != 0, out[-2000:]
    assert sorted(glob.glob(str(tmp_path / 'reports' / '*.json'))) == done and open(done[0]).read() == kept
    assert not subprocess.run(['pgrep', '-f', str(tmp_path)], capture_output=True).stdout, 'processes left'
    again = subprocess.run(args + ['CHECKS=^HimenoCpuPerf'], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert len(glob.glob(str(tmp_path / 'reports' / '*.json'))) == 2


def documented_reframe_commands():
    """`reframe -c reframe/ ... -l | --dry-run` commands quoted in README.md and ARTIFACT.md."""
    found = set()
    for doc in ('README.md', 'ARTIFACT.md'):
        for cmd in re.findall(r'(reframe -c reframe/[^`\n#|]*)', open(os.path.join(ROOT, doc)).read()):
            cmd = cmd.strip()
            if ' -l' in cmd or '--dry-run' in cmd:
                found.add(cmd)
    return sorted(found)


@pytest.mark.parametrize('command', documented_reframe_commands())
def test_documented_listing_and_dry_run_commands_work(command, tmp_path):
    argv = command.split()[1:]
    system = argv[argv.index('--system') + 1]
    if system not in data.system_names():
        pytest.skip(f'{system}: an example name for a cluster of your own (test_make_system covers it)')
    env = dict(os.environ, RFM_CONFIG_FILES=os.path.join(ROOT, 'reframe', 'config', 'umstudy.py'),
               UMSTUDY_OUTPUT=str(tmp_path), PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib'))
    # a dry run of everything takes minutes; one check shows the command is valid
    r = subprocess.run([sys.executable, '-c', RFM_MAIN, *argv, '-n', '^HimenoCpuPerf$'],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, command + '\n' + r.stdout[-2000:] + r.stderr[-2000:]
    assert 'HimenoCpuPerf' in r.stdout


def test_make_n_run_runs_nothing(tmp_path):
    """`make -n run` prints the commands and runs none of them (no ReFrame, no report)."""
    r = make('-n', 'run', f'OUTPUT={tmp_path}')
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert 'reframe' in r.stdout and os.listdir(tmp_path) == []


def test_direct_reframe_run_leaves_make_runs_log_alone(tmp_path):
    """output/reframe.log is `make run`'s link to its latest run's log: ReFrame started by
    hand writes its own file there, keeps that run's log as it was, and starts even where
    the linked log was deleted."""
    (tmp_path / 'logs').mkdir()
    kept = tmp_path / 'logs' / 'local-quick-T.log'
    kept.write_text('the run before\n')
    env = dict(os.environ, RFM_CONFIG_FILES=os.path.join(ROOT, 'reframe', 'config', 'umstudy.py'),
               UMSTUDY_OUTPUT=str(tmp_path), PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib'))
    env.pop('UMSTUDY_RUN_LOG', None)
    for target in ('logs/local-quick-T.log', 'logs/deleted.log'):
        link = tmp_path / 'reframe.log'
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(target, link)
        r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-c', os.path.join(ROOT, 'reframe'),
                            '--system', 'local', '-l', '-n', '^HimenoCpuPerf$'],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert not os.path.islink(link) and 'HimenoCpuPerf' in link.read_text()
        assert kept.read_text() == 'the run before\n'


def test_make_system_adds_a_cluster_that_needs_no_other_edit(tmp_path):
    name = f'zztest{os.getpid()}'
    folder = os.path.join(data.SYSTEMS_DIR, name)
    try:
        # an account option naming no group (what a shell leaves of --account=${UMSTUDY_GROUP}
        # in double quotes) is refused; the README's form, as written, is kept for run time
        r = make('system', f'NAME={name}', 'SCHEDULER=slurm', 'ACCOUNT=--account=', 'SYSTEMFLAGS=--cuda-archs 90')
        assert r.returncode != 0 and 'names no group' in r.stderr and not os.path.exists(folder), r.stderr
        readme = ['system', f'NAME={name}', 'SCHEDULER=slurm', 'QUEUE=gpu', 'PAPER_QUEUE=gpu-long', 'GPUS=4',
                  'MODULES=cuda/12.6 openmpi/4.1.6', 'ACCOUNT=--account=${UMSTUDY_GROUP}']
        # modules where this shell has no module system (this machine) are refused, not dropped
        # from every job; on a cluster's node the loaded Lmod or Environment Modules is taken
        r = make(*readme, 'SYSTEMFLAGS=--cuda-archs 90', env={'LMOD_CMD': None, 'MODULES_CMD': None})
        assert r.returncode != 0 and 'no module system is loaded' in r.stderr and not os.path.exists(folder), r.stderr
        r = make(*readme, 'SYSTEMFLAGS=--cuda-archs 90', env={'LMOD_CMD': '/usr/share/lmod/lmod/libexec/lmod'})
        assert r.returncode == 0, r.stdout + r.stderr
        assert "- --account=${UMSTUDY_GROUP}" in open(os.path.join(folder, 'system.yaml')).read()
        assert os.path.exists(os.path.join(folder, 'spack.yaml'))
        env = dict(os.environ, RFM_CONFIG_FILES=os.path.join(ROOT, 'reframe', 'config', 'umstudy.py'),
                   UMSTUDY_OUTPUT=str(tmp_path), UMSTUDY_GROUP='grp42', UMSTUDY_SIZE='paper',
                   PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib'))
        r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-c', os.path.join(ROOT, 'reframe'),
                            '--system', name, '--dry-run', '-n', r'^(UmbBaseline|HimenoCpuPerf)\b'],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        scripts = {os.path.basename(os.path.dirname(p)): open(p).read() for p in
                   glob.glob(str(tmp_path / name / 'stage' / '**' / 'rfm_job.sh'), recursive=True)}
        gpu = next(t for c, t in scripts.items() if c.startswith('UmbBaseline'))
        for directive in ('#SBATCH --partition=gpu-long', '#SBATCH --account=grp42', '#SBATCH --time=',
                          '#SBATCH --gres=gpu:1', 'module load cuda/12.6', 'module load openmpi/4.1.6', 'srun '):
            assert directive in gpu, (directive, gpu)
        # the repository's own consistency checks see the new system as one of theirs
        r = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-x', '-p', 'no:cacheprovider',
                            os.path.join(ROOT, 'reframe', 'tests', 'test_data.py'),
                            os.path.join(ROOT, 'spack-repo', 'tests', 'test_environments.py'),
                            '-k', 'every_system or generated or pins'],
                           capture_output=True, text=True, cwd=ROOT, timeout=600,
                           env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib')))
        assert r.returncode == 0, r.stdout[-3000:]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
