"""Job scripts every site profile generates, from a real ReFrame dry run, at both sizes.

For each system but `local` (whatever systems/ holds), three representative checks: a GPU
check (UmbBaseline), an MPI multi-node check (CabIs, most ranks, mpi3) and an OpenMP check
(HimenoCpuPerf); on a system with a CPU partition (feature `cpuonly`) the last two are
its jobs.  Each script must carry a walltime from reframe/times.yaml, the queue of its
partition and size, threads = that partition's cores, and the scheduler's own resource
syntax; where
reframe/tests/golden/<system>-<size>.txt exists (the cygnus, miyabi, pegasus, tsubame,
tsubame4 and slurm profiles), the directives, module lines, exports and launcher line
must equal it, so a change that drops or alters a directive fails.  The same dry runs
check every multi-rank check's script (coarray, dlm, the halo stencil: the layout asked
of the batch system and of the launcher, the environment forwarded to every rank, each
rank's placement line; check_multi_node_scripts) and RemdVcudaNodes' multi-node scripts
(remd_nodes_scripts.py).  After an intended change:
  UMSTUDY_REGOLD=1 python3 -m pytest reframe/tests/test_job_scripts.py   (then review the diff)
Detected profiles (`slurm`) read a saved probe (golden/probe.json: one H100, 16 cores), so
their scripts do not depend on the machine the test runs on.
"""
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys

import pytest

import remd_nodes_scripts
from umstudy import data, jobs

RFM_MAIN = 'import sys; sys.argv[0] = "reframe"; from reframe.frontend.cli import main; main()'
ROOT = data.REPO
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'golden')
SITES = [n for n in data.system_names() if n != 'local']
WALLTIME = re.compile(r'^#PBS -l walltime=|^#PBS -l elapstim_req=|^#SBATCH --time=|^#\$ -l h_rt=')
# Every check whose ranks span nodes (or share one by design): its script must place them
# and forward its environment (check_multi_node_scripts).
MULTI_RANK = r'Cab\w*|Dlm\w*|UmbHalo\w*'


def dry_run(system, size, tmp_path, group='grp42', names=r'^(UmbBaseline|CabIs|HimenoCpuPerf)\b', report=None):
    env = dict(os.environ, RFM_CONFIG_FILES=os.path.join(ROOT, 'reframe', 'config', 'umstudy.py'),
               UMSTUDY_OUTPUT=str(tmp_path), UMSTUDY_GROUP=group, UMSTUDY_SIZE=size,
               UMSTUDY_LOCAL_PROBE=os.path.join(GOLDEN, 'probe.json'),
               PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib'))
    for name in ('UMSTUDY_COMPONENTS', 'UMSTUDY_ENVIRONS', 'SIZE'):
        env.pop(name, None)
    r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-c', os.path.join(ROOT, 'reframe'),
                        '--system', system, '--dry-run', '-n', names] +
                       ([f'--report-file={report}'] if report else []),
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def scripts(tmp_path, system):
    """{case: (path, script text)}: the first environment's scripts, one per case."""
    found = {}
    for path in sorted(glob.glob(str(tmp_path / system / 'stage' / '**' / 'rfm_job.sh'), recursive=True)):
        case = os.path.basename(os.path.dirname(path))
        found.setdefault(case, (path, open(path).read()))
    return found


def partition_of(path, system):
    """The systems/<system>/system.yaml partition a staged job script belongs to
    (stage/<system>/<partition>/<environ>/<case>/rfm_job.sh)."""
    name = path.split(os.sep)[-4]
    desc = data.system(system)
    part = next(p for p in desc['partitions'] if p['name'] == name)
    return part, {**desc.get('facts', {}), **part.get('facts', {})}


def representative(found):
    pick = {}
    def ranks(case):
        m = re.search(r'(?:--ntasks=|mpiexec -n |mpirun -np )(\d+)', found[case][1])
        return int(m.group(1)) if m else 0
    cab = sorted((c for c in found if c.startswith('CabIs_')), key=ranks)
    mpi3 = [c for c in cab if 'XMPC_BACKEND=mpi3' in found[c][1]]
    if mpi3:
        pick['mpi'] = mpi3[-1]
    gpu = sorted(c for c in found if c.startswith('UmbBaseline'))
    if gpu:
        pick['gpu'] = gpu[0]
    if 'HimenoCpuPerf' in found:
        pick['openmp'] = 'HimenoCpuPerf'
    return pick


def normalise(text, tmp_path):
    keep = []
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(('#PBS', '#SBATCH', '#$', '# submitted as:', 'export ', 'module ', '. ')):
            keep.append(line)
    keep.append(lines[-1])   # the launcher line
    out = '\n'.join(keep).replace(str(tmp_path), '<OUT>').replace(ROOT, '<REPO>')
    # build/default (reused from `make build`) or the fixture's own tree: either is right
    out = re.sub(r'<REPO>/build/[^/\s]+', '<BUILD>', out)
    return re.sub(r'_[0-9a-f]{8}\b', '', out)


@pytest.mark.parametrize('size', ['quick', 'paper'])
@pytest.mark.parametrize('system', SITES)
def test_site_job_scripts(system, size, tmp_path):
    """The dry run of every check on the site: its node-hours are ARTIFACT.md E's row, every
    job script lists (none skipped for a program this machine did not build), and the
    representative scripts equal the golden ones."""
    report = tmp_path / 'report.json'
    dry_run(system, size, tmp_path, names='.', report=report)
    cases = [tc for run in json.loads(report.read_text())['runs'] for tc in run['testcases']]
    if system in jobs.nodehours_systems():
        row = jobs.nodehours_row(system, size, jobs.node_hours(json.loads(report.read_text()), size))
        assert row in open(os.path.join(ROOT, 'ARTIFACT.md')).read(), \
            f'regenerate ARTIFACT.md E: PYTHONPATH=reframe/lib python3 -m umstudy.jobs nodehours\n{row}'
    for tc in cases:
        assert not (tc['result'] == 'skip' and 'built' in (tc.get('skip_reason') or '')), \
            (tc['display_name'], tc.get('skip_reason'))
    # one programming environment per check (UMSTUDY_ENVIRONS=all for every one)
    per_check = {}
    for tc in cases:
        per_check.setdefault((tc['display_name'], tc['partition']), set()).add(tc['environ'])
    assert all(len(e) == 1 for e in per_check.values()), {c: e for c, e in per_check.items() if len(e) > 1}
    found = scripts(tmp_path, system)
    remd_nodes_scripts.check(system, size, found, lambda text: normalise(text, tmp_path))
    check_multi_node_scripts(system, found)
    pick = representative(found)
    desc = data.system(system)
    assert {'mpi', 'openmp'} <= set(pick), sorted(found)
    cpu_part = any('cpuonly' in p.get('features', []) for p in desc['partitions'])
    rendered = []
    for role, case in sorted(pick.items()):
        path, text = found[case]
        part, _ = partition_of(path, system)
        lines = text.splitlines()
        # CPU-only checks on the CPU partition where there is one, GPU checks off it
        if cpu_part:
            assert ('cpuonly' in part['features']) == (role != 'gpu'), (role, path)
        # a walltime on every job, from reframe/times.yaml
        assert any(WALLTIME.match(x) for x in lines), (role, text)
        # the queue of this size, where the partition names one
        queue = (part.get('job', {}).get('queues') or {}).get(size)
        if queue:
            assert f'-q {queue}' in text or f'--partition={queue}' in text, (role, text)
        rendered.append(f"== {role}: {case.split('_')[0]} on {part['name']}\n{normalise(text, tmp_path)}")
    # OpenMP threads = the cores of the partition's nodes (facts, or the probe for detected systems)
    omp = found[pick['openmp']][1]
    cores = partition_of(found[pick['openmp']][0], system)[1].get('cpu', {}).get('cores')
    if desc.get('detect'):   # the dry run detected from the saved probe, not this machine
        cores = json.load(open(os.path.join(GOLDEN, 'probe.json')))['cores']
    assert f'export OMP_NUM_THREADS={cores}' in omp, omp
    golden(f'{system}-{size}.txt', '\n'.join(rendered) + '\n')


def launcher_line(text):
    return text.strip().splitlines()[-1]


def exports(text):
    """{NAME: value} of the script's `export` lines."""
    return dict(re.findall(r'^export (\w+)=(\S*)$', text, re.M))


def asked_layout(text, scheduler, part):
    """(nodes, ranks per node) the script asks the batch system for, read from its
    directives in that scheduler's own words."""
    if scheduler in jobs.SLURM_LIKE:
        nodes = re.search(r'^#SBATCH --nodes=(\d+)$', text, re.M)
        per = re.search(r'^#SBATCH --ntasks-per-node=(\d+)$', text, re.M)
        return (int(nodes.group(1)) if nodes else None), (int(per.group(1)) if per else None)
    if scheduler == 'pbs':
        m = re.search(r'^#PBS -l select=(\d+):mpiprocs=(\d+)', text, re.M)
        return int(m.group(1)), int(m.group(2))
    if scheduler == 'nqsv':
        return int(re.search(r'^#PBS -b (\d+)$', text, re.M).group(1)), None
    if scheduler == 'ge':
        option = part['job']['nodes_option'].replace('{nodes}', '(\\d+)')
        return int(re.search('^#\\$ ' + option + '$', text, re.M).group(1)), None
    raise AssertionError(f'no parser for scheduler {scheduler}')


def check_multi_node_scripts(system, found):
    """Every multi-rank check's script on this profile: the batch system is asked for
    distinct nodes (Slurm --nodes with --ntasks-per-node, PBS Pro place=scatter over
    select=N:mpiprocs=P, NQSV -b N, Grid Engine whole nodes), the launcher maps the same
    ranks per node (Open MPI --map-by ppr:P:node or -npernode P, srun --ntasks-per-node),
    every exported variable reaches every rank (Open MPI -x NAME, srun --export=ALL, and
    the batch system's -v NAME=value on PBS, NQSV, Grid Engine), and each rank says where
    it ran (where.sh before the program).  The checks of the papers' multi-node
    experiments run one rank per node wherever a job can span nodes."""
    desc = data.system(system)
    multi = {c: v for c, v in found.items() if re.match(rf'({MULTI_RANK})_', c)}
    assert any(c.startswith('CabIs_') for c in multi) and any(c.startswith('Dlm') for c in multi), sorted(found)
    spanned = 0
    for case, (path, text) in sorted(multi.items()):
        part, facts = partition_of(path, system)
        scheduler = part.get('scheduler', desc['scheduler'])   # partitions may differ (`cluster`)
        launcher = part.get('launcher', desc['launcher'])
        line = launcher_line(text)
        m = re.search(r'(?:^mpirun -np |^mpiexec -n )(\d+)', line) or \
            re.search(r'^#SBATCH --ntasks=(\d+)$', text, re.M)
        assert m, (case, text)
        ranks = int(m.group(1))
        if ranks < 2:
            continue   # GASNet's smp conduit: one process forks the images itself
        one_node = part.get('job', {}).get('nodes') == 1
        gpus = facts.get('gpu', {}).get('count', 0)
        per_node = ranks if one_node else min(2, max(1, gpus)) if case.startswith('UmbHalo') else 1
        nodes = ranks // per_node
        spanned += nodes > 1
        asked_nodes, asked_per = asked_layout(text, scheduler, part)
        assert asked_nodes == nodes and asked_per in (None, per_node), (case, nodes, per_node, text)
        if scheduler == 'pbs':
            assert re.search(r'^#PBS -l place=scatter\b', text, re.M), (case, text)
        env = exports(text)
        assert env, (case, text)
        if scheduler in ('pbs', 'nqsv', 'ge'):
            prefix = '#$' if scheduler == 'ge' else '#PBS'
            given = dict(kv.split('=', 1) for ln in re.findall(rf'^{re.escape(prefix)} -v (\S+)$', text, re.M)
                         for kv in ln.split(','))
            assert {k: given.get(k) for k in env} == env, (case, env, given)
        if launcher == 'srun':
            assert f' --nodes={nodes} ' in line and f' --ntasks-per-node={per_node} ' in line, (case, line)
            assert ' --export=ALL ' in line, (case, line)
        else:
            assert (f' --map-by ppr:{per_node}:node ' in line or f' -npernode {per_node} ' in line), (case, line)
            for name in env:
                assert f' -x {name} ' in line, (case, name, line)
        assert re.search(r' \S+/reframe/lib/umstudy/where\.sh (--gpus )?-- \S+', line), (case, line)
    if not any(p.get('job', {}).get('nodes') == 1 for p in desc['partitions']):
        assert spanned, f'{system}: no multi-rank check spans nodes'


def golden(name, got):
    """`got` must equal golden/<name> where it exists (UMSTUDY_REGOLD=1 writes it)."""
    path = os.path.join(GOLDEN, name)
    if os.environ.get('UMSTUDY_REGOLD'):
        with open(path, 'w') as f:
            f.write(got)
    if os.path.exists(path):
        assert got == open(path).read(), f'job scripts differ from {path}:\n{got}'


def test_placeholder_group_is_refused_before_any_job(tmp_path):
    """A run (not a dry run) without UMSTUDY_GROUP stops before ReFrame generates a job."""
    env = dict(os.environ, RFM_CONFIG_FILES=os.path.join(ROOT, 'reframe', 'config', 'umstudy.py'),
               UMSTUDY_OUTPUT=str(tmp_path), PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib'))
    env.pop('UMSTUDY_GROUP', None)
    for system in SITES:
        uses_group = any('${UMSTUDY_GROUP}' in a for p in data.system(system)['partitions']
                         for a in p.get('access', []))
        if not uses_group:
            continue
        r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-c', os.path.join(ROOT, 'reframe'),
                            '--system', system, '-r', '-n', '^HimenoCpuPerf$'],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert r.returncode != 0 and 'UMSTUDY_GROUP is not set' in r.stderr, r.stdout + r.stderr
        assert not glob.glob(str(tmp_path / system / 'stage' / '**' / 'rfm_job.sh'), recursive=True)


def test_a_site_found_by_hostname_is_refused_too():
    """On a site's login node ReFrame picks the system by hostname, without --system."""
    names = [(n, data.system(n).get('hostnames', [])) for n in data.system_names() if n != 'local']
    assert jobs.system_by_hostname(names, 'mg0001') == 'miyabi'
    assert jobs.system_by_hostname(names, 'pg12') == 'pegasus'
    assert jobs.system_by_hostname(names, 'laptop') is None
    with pytest.raises(SystemExit):
        jobs.refuse_placeholder(data.system('miyabi'), argv=['reframe', '-c', 'reframe/', '-r'], environ={})
    jobs.refuse_placeholder(data.system('miyabi'), argv=['reframe', '-r'], environ={'UMSTUDY_GROUP': 'gz00'})
    jobs.refuse_placeholder(data.system('miyabi'), argv=['reframe', '--dry-run'], environ={})


def test_gpu_requests_follow_the_data(tmp_path):
    """TSUBAME's chunk asks for the GPUs a check uses and the node's memory; CPU jobs ask for none."""
    for system in SITES:
        fields = [f for p in data.system(system)['partitions'] for f in p.get('job', {}).get('select', [])]
        if not any('{gpus}' in f for f in fields):
            continue
        out = tmp_path / system
        dry_run(system, 'quick', out)
        found = scripts(out, system)
        pick = representative(found)
        gpu = found[pick['gpu']][1]
        assert re.search(r'#PBS -l select=\S*:gpus=1\b', gpu), gpu
        assert ':gpus=' not in found[pick['openmp']][1]


def test_walltime_comes_from_the_time_data():
    t = jobs.times()
    for name in t['checks']:
        for size in ('quick', 'paper'):
            limit = jobs.time_limit(name, size)
            assert limit >= t['floor_s'] and limit >= t['margin'] * (jobs.estimate(name, size) or 0)
            assert limit % 60 == 0
    # every check has an entry (a new check without one gets only the floor)
    names = set()
    for module in glob.glob(os.path.join(ROOT, 'reframe', '*.py')):
        names |= set(re.findall(r'^@rfm\.simple_test\nclass (\w+)\(', open(module).read(), re.M))
    assert names and names <= set(t['checks']), sorted(names - set(t['checks']))


def test_artifact_time_tables_are_generated_from_the_time_data():
    """ARTIFACT.md E's tables are times.yaml's, and README and ARTIFACT.md D quote no run
    time of their own (they point to E)."""
    text = open(os.path.join(ROOT, 'ARTIFACT.md')).read()
    for table in (jobs.machines_table(), jobs.measured_table(), jobs.table()):
        assert table in text, 'regenerate ARTIFACT.md E: PYTHONPATH=reframe/lib python3 -m umstudy.jobs table'
    section_d = text[text.index('## D. How to run'):text.index('### D.1')]
    readme = open(os.path.join(ROOT, 'README.md')).read()
    for run in jobs.times()['suite']:
        for seconds in run['runs']:
            for doc, where in ((section_d, 'ARTIFACT.md D'), (readme, 'README.md')):
                assert not re.search(rf'\b{seconds:g} s\b', doc), f'{where} quotes {seconds:g} s: point to ARTIFACT.md E'
    for t in jobs.times()['suite']:
        assert t['machine'] in jobs.times()['machines'] and t['date'], t


def test_cpu_only_checks_go_to_a_cpu_partition_where_there_is_one(tmp_path):
    """A system with a GPU partition and a CPU partition (feature `cpuonly`): coarray, dlm and
    himeno-cpu go to the CPU partition only, GPU checks to the GPU partition only."""
    name = f'zzcpu{os.getpid()}'
    folder = os.path.join(data.SYSTEMS_DIR, name)
    base = dict(data.system('miyabi'))
    gpu = dict(base['partitions'][0])
    cpu = {'name': 'cpu', 'descr': 'CPU nodes', 'access': gpu['access'], 'environs': ['gnu'],
           'features': ['cpu', 'openmp', 'mpi', 'cpuonly'], 'job': {'queues': {'quick': 'debug-c'}},
           'facts': {'cpu': {'model': 'test CPU', 'cores': 112}}}
    desc = {k: v for k, v in base.items() if k not in ('spack', 'container')}
    desc.update(name=name, hostnames=[], partitions=[gpu, cpu])
    os.makedirs(folder)
    try:
        import yaml
        with open(os.path.join(folder, 'system.yaml'), 'w') as f:
            yaml.safe_dump(desc, f)
        dry_run(name, 'quick', tmp_path)
        where = {}
        for path in glob.glob(str(tmp_path / name / 'stage' / name / '*' / '*' / '*' / 'rfm_job.sh')):
            part, case = path.split(os.sep)[-4], path.split(os.sep)[-2].split('_')[0]
            where.setdefault(case, set()).add(part)
        assert where.get('CabIs') == {'cpu'} and where.get('HimenoCpuPerf') == {'cpu'}, where
        assert where.get('UmbBaseline') == {'gpu'}, where
        omp = open(glob.glob(str(tmp_path / name / 'stage' / name / 'cpu' / 'gnu' / 'HimenoCpuPerf' /
                                 'rfm_job.sh'))[0]).read()
        assert '#PBS -q debug-c' in omp and 'OMP_NUM_THREADS=112' in omp, omp
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_partition_of_another_instruction_set_builds_on_its_own_nodes(tmp_path):
    """Miyabi-C (x86-64) beside Miyabi-G (Arm): whichever of the two is not this machine's
    instruction set builds src/ as a job in its quick queue on a whole node; the other
    builds here, as before."""
    assert jobs.builds_here({'facts': {'cpu': {'arch': 'aarch64'}}}, machine='aarch64')
    assert not jobs.builds_here({'facts': {'cpu': {'arch': 'x86_64'}}}, machine='aarch64')
    assert jobs.builds_here({'facts': {'cpu': {'cores': 8}}}, machine='aarch64')   # not declared
    dry_run('miyabi', 'quick', tmp_path)
    builds = {}
    for path in glob.glob(str(tmp_path / 'miyabi' / 'stage' / 'miyabi' / '*' / 'gnu' / 'UmstudyBuild_*' / 'rfm_build.sh')):
        builds[path.split(os.sep)[-4]] = (path, open(path).read())
    arches = set()
    for part in data.system('miyabi')['partitions']:
        path, text = builds[part['name']]
        facts = partition_of(path, 'miyabi')[1]
        arches.add(facts['cpu']['arch'])
        if facts['cpu']['arch'] == platform.machine():
            assert '#PBS' not in text, text
        else:
            assert f"#PBS -q {part['job']['queues']['quick']}" in text, text
            assert f"ncpus={facts['cpu']['cores']}" in text and f"-j {facts['cpu']['cores']}" in text, text
            assert '/usr/local/cuda' not in text   # this machine's CUDA says nothing of those nodes
    assert len(arches) == 2, arches


def test_build_fixture_reuses_make_build_only_when_configured_alike():
    from umstudy.checks import UmstudyBuild
    cc = shutil.which('gcc') or shutil.which('cc')
    cxx = shutil.which('g++') or shutil.which('c++')
    if not (cc and cxx):
        pytest.skip('no C/C++ compiler on PATH')
    cache = {'CMAKE_BUILD_TYPE': 'Release', 'UMSTUDY_COMPONENTS': '', 'UMSTUDY_CUDA': 'AUTO',
             'CMAKE_CUDA_COMPILER': '/usr/local/cuda/bin/nvcc', 'CMAKE_CUDA_ARCHITECTURES': '90',
             'CMAKE_C_COMPILER': cc, 'CMAKE_CXX_COMPILER': cxx}
    want = {'CMAKE_BUILD_TYPE': 'Release', 'UMSTUDY_COMPONENTS': '', 'UMSTUDY_CUDA': 'ON',
            'CMAKE_CUDA_ARCHITECTURES': '90', 'CMAKE_C_COMPILER': os.path.basename(cc),
            'CMAKE_CXX_COMPILER': os.path.basename(cxx)}
    assert UmstudyBuild.reusable(cache, want)
    assert UmstudyBuild.reusable(cache, dict(want, UMSTUDY_CUDA='OFF'))          # CPU-only partition
    assert not UmstudyBuild.reusable(cache, dict(want, CMAKE_CUDA_ARCHITECTURES='70'))
    assert not UmstudyBuild.reusable(cache, dict(want, UMSTUDY_COMPONENTS='himeno'))
    assert not UmstudyBuild.reusable(dict(cache, UMSTUDY_CUDA='OFF'), want)        # no CUDA built
    assert not UmstudyBuild.reusable(dict(cache, CMAKE_BUILD_TYPE='Debug'), want)
    assert not UmstudyBuild.reusable(cache, dict(want, CMAKE_C_COMPILER='no-such-cc'))
    assert not UmstudyBuild.reusable({}, want)


def test_a_retired_system_runs_no_job_but_its_model(tmp_path):
    """TSUBAME2.5 (`retired:` in its system.yaml) lists and dry-runs, but a run skips every
    job with the reason, before its build; P003's model still computes on this machine."""
    retired = [n for n in SITES if data.system(n).get('retired')]
    assert 'tsubame' in retired
    env = dict(os.environ, RFM_CONFIG_FILES=os.path.join(ROOT, 'reframe', 'config', 'umstudy.py'),
               UMSTUDY_OUTPUT=str(tmp_path), UMSTUDY_GROUP='grp42', PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib'))
    report = tmp_path / 'report.json'
    r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-c', os.path.join(ROOT, 'reframe'), '--system', 'tsubame',
                        '-r', '-n', r'^(HimenoCpuPerf|RemdModelFit)\b', f'--report-file={report}'],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    cases = {tc['display_name'].split()[0]: tc for run in json.loads(report.read_text())['runs']
             for tc in run['testcases']}
    assert cases['UmstudyBuild']['result'] == 'skip' and 'TSUBAME2.5 was retired' in r.stdout, r.stdout[-2000:]
    assert cases['HimenoCpuPerf']['result'] == 'skip' and cases['RemdModelFit']['result'] == 'pass'
    assert not glob.glob(str(tmp_path / 'tsubame' / 'stage' / '**' / 'rfm_job.sh'), recursive=True)
