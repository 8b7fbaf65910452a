"""The cluster in a box (.ci/cluster.sh), for real: `up 4` gives four nodes with four
hostnames; Slurm (srun --mpi=pmix) and Grid Engine (qsub -pe mpi + mpirun through
qrsh -inherit) run an Open MPI job with one rank on each of two nodes, whose ranks talk
(cab-pingpong over the shaped link); a job packed onto one node is caught by the
placement check (umstudy.placement); `down` leaves no namespace, link, process, mount,
/etc/hosts line or file behind.  Needs root, Slurm, Grid Engine, Open MPI and the
coarray-bench build (UMSTUDY_BUILD or build/default): where one is missing the test
skips with the script's reason.  The arithmetic of the link rate and the summary of what
was measured are checked everywhere, without a cluster."""
import json
import os
import re
import subprocess
import tempfile
import time

import pytest

from umstudy import cluster, data, placement

ROOT = data.REPO
SCRIPT = os.path.join(ROOT, '.ci', 'cluster.sh')
BUILD = os.environ.get('UMSTUDY_BUILD', os.path.join(ROOT, 'build', 'default'))
PINGPONG = os.path.join(BUILD, 'coarray-bench', 'cab-pingpong')
# one line per rank, from the launcher's rank variable: srun --mpi=pmix sets PMIX_RANK,
# Open MPI's mpirun OMPI_COMM_WORLD_RANK
WHERE = ['sh', '-c', 'echo "rank ${OMPI_COMM_WORLD_RANK:-$PMIX_RANK} $(hostname)"']


def hosts_by_rank(text):
    """The host of each rank, in rank order, from WHERE's lines ('' for a silent rank)."""
    found = dict((int(r), h) for r, h in re.findall(r'^rank (\d+) (\S+)$', text, re.M))
    return [found.get(r, '') for r in range(max(found) + 1)] if found else []


# ---- without a cluster ----------------------------------------------------------------

def test_link_rate_keeps_the_papers_ratio():
    desc = cluster.system_file()
    copy = {'one_thread_gbyte_s': {'median': 10.0}, 'all_cores_gbyte_s': {'median': 20.0}}
    rates = cluster.regime_rates(desc, copy)
    # P004: FDR payload 6.82 GB/s against a 51.2 GB/s copy; P003: 3.2 against 8 GB/s
    assert rates['P004']['ratio'] == pytest.approx(6.82 / 51.2, abs=1e-4)
    assert rates['P004']['link_gbit'] == pytest.approx(6.82 / 51.2 * 20.0 * 8, abs=0.06)
    assert rates['P003']['ratio'] == pytest.approx(0.4)
    assert rates['P003']['link_gbit'] == pytest.approx(0.4 * 10.0 * 8, abs=0.06)
    assert desc['emulation']['chosen'] in rates and cluster.default_gbit(desc) > 0


def _rec(metric, value, nbytes, op='raw-get'):
    return json.dumps({'bench': 'cab-pingpong', 'metric': metric, 'value': value, 'unit': 'x',
                       'op': op, 'bytes': nbytes, 'verified': True})


def test_pingpong_summary_median_and_refusals():
    lines = [_rec('latency', v, 8) for v in (40.0, 30.0, 50.0)] + \
            [_rec('bandwidth', v, 4 << 20) for v in (800.0, 700.0, 900.0)] + \
            [_rec('latency', 1.0, 8, op='get'), 'raw-get 8 B ... (human line)']
    s = cluster.summarize_pingpong(lines, link_gbit=10.0)
    assert s['measured'] and s['latency_us']['median'] == 40.0 and s['latency_us']['n'] == 3
    assert (s['bandwidth_mb_s']['min'], s['bandwidth_mb_s']['max']) == (700.0, 900.0)
    assert s['fraction_of_link'] == pytest.approx(800e6 * 8 / 10e9, abs=1e-3)
    failed = cluster.summarize_pingpong(lines, link_gbit=10.0, status=124)
    assert not failed['measured'] and '124' in failed['reason']
    empty = cluster.summarize_pingpong(lines[:3], link_gbit=10.0)
    assert not empty['measured'] and 'bandwidth' in empty['reason']
    assert 'not measured' in cluster.describe(failed)


def test_measured_link_joins_the_facts(tmp_path):
    (tmp_path / 'link.json').write_text(json.dumps({'measured': True, 'link_gbit': 1.0}))
    desc = cluster.complete({'facts': {'network': {'gbit_s': 1.0}}},
                            {'UMSTUDY_CLUSTER_STATE': str(tmp_path)})
    assert desc['facts'] == {'network': {'gbit_s': 1.0}, 'link_measured': {'measured': True, 'link_gbit': 1.0}}
    assert cluster.complete({'facts': {}}, {})['facts'] == {}


def test_hosts_by_rank_reads_every_rank():
    assert hosts_by_rank('rank 1 b\nrank 0 a\nnoise\n') == ['a', 'b']
    assert hosts_by_rank('rank 2 c\nrank 0 a\n') == ['a', '', 'c']
    assert hosts_by_rank('') == []


def test_bad_input_and_no_root_are_refused_by_name(tmp_path):
    env = dict(os.environ, UMSTUDY_CLUSTER_STATE=str(tmp_path / 'state'))
    for args, code, words in ((['up', 'x'], 2, 'usage'), (['up', '0'], 2, 'not a number of nodes'),
                              (['up', '2', '--link-gbit', '-1'], 2, 'not a positive number'),
                              (['up', '--link-gbit=fast'], 2, 'not a positive number'),
                              (['sideways'], 2, 'usage')):
        r = subprocess.run([SCRIPT, *args], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == code and words in r.stderr and not r.stdout, (args, r.returncode, r.stderr)
    assert not os.path.exists(tmp_path / 'state')
    # without root: exit 3, one line naming what is missing, nothing made
    cmd = [SCRIPT, 'up', '2']
    if os.getuid() == 0:
        cmd = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--'] + cmd
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and r.stderr.strip() == 'cluster: cannot start: needs root (namespaces, ' \
        'a bridge and daemons that run jobs as their owners)' and not r.stdout, (r.returncode, r.stderr)
    assert not os.path.exists(tmp_path / 'state')


# ---- the cluster ------------------------------------------------------------------------

def _run(cmd, env, timeout=120, **kw):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)


def _leftovers(state):
    """What of the cluster is still there (empty when it is all gone)."""
    left = []
    netns = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True).stdout
    left += [f'netns {n}' for n in re.findall(r'^(ums-node\d+)', netns, re.M)]
    links = subprocess.run(['ip', '-o', 'link'], capture_output=True, text=True).stdout
    left += [f'link {n}' for n in re.findall(r'^\d+: (umsbr0|umsveth\d+)[@:]', links, re.M)]
    ps = subprocess.run(['ps', '-eo', 'pid,stat,args'], capture_output=True, text=True).stdout
    left += [f'process {line.strip()}' for line in ps.splitlines()
             if state in line and ' Z' not in line[:12]]
    with open('/proc/self/mountinfo') as f:
        left += [f'mount {line.split()[4]}' for line in f if state in line]
    with open('/etc/hosts') as f:
        left += [f'/etc/hosts: {line.strip()}' for line in f
                 if 'umstudy cluster' in line or re.search(r'\bums(head|node\d+)$', line.strip())]
    if os.path.exists(state):
        left.append(f'directory {state}')
    return left


@pytest.fixture
def box(tmp_path):
    """A 4-node cluster for one test, its environment (the exports of `up`) and timings."""
    if subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True).stdout.count('ums-node'):
        pytest.skip('a cluster is up already on this machine (ip netns: ums-node*): not touching it')
    if not os.access(PINGPONG, os.X_OK):
        pytest.skip(f'{PINGPONG} is not built (make build, or set UMSTUDY_BUILD)')
    # short: unix sockets (munge, slurmd, PMIx) live under it, and their paths are limited
    state = tempfile.mkdtemp(prefix='umsc.', dir='/tmp')
    os.rmdir(state)
    env = dict(os.environ, UMSTUDY_CLUSTER_STATE=state, UMSTUDY_BUILD=BUILD)
    t0 = time.monotonic()
    r = _run([SCRIPT, 'up', '4'], env, timeout=240)
    up_s = time.monotonic() - t0
    if r.returncode == 3:
        assert not _leftovers(state), _leftovers(state)   # a refused start leaves nothing
        pytest.skip(r.stderr.strip().splitlines()[-1])
    timings = {'up_s': up_s, 'exports': r.stdout}
    try:
        assert r.returncode == 0, r.stderr
        # stdout: nothing but export lines, so `eval "$(cluster.sh up)"` is safe
        lines = r.stdout.splitlines()
        assert lines and all(re.match(r'^export [A-Za-z_][A-Za-z0-9_]*=\S+$', x) for x in lines), r.stdout
        exports = dict(x[len('export '):].split('=', 1) for x in lines)
        for name in ('SLURM_CONF', 'SGE_ROOT', 'SGE_CELL', 'UMSTUDY_CLUSTER_STATE',
                     'OMPI_MCA_btl_tcp_if_include', 'OMPI_MCA_oob_tcp_if_include'):
            assert name in exports, (name, r.stdout)
        env.update(exports)
        yield env, timings
    finally:
        t0 = time.monotonic()
        d = _run([SCRIPT, 'down'], env, timeout=120)
        timings['down_s'] = time.monotonic() - t0
        print(f"cluster: up {timings['up_s']:.1f} s, down {timings['down_s']:.1f} s")
        assert d.returncode == 0, d.stderr
        assert not _leftovers(state), _leftovers(state)
        again = _run([SCRIPT, 'down'], env)   # twice is harmless
        assert again.returncode == 0 and not _leftovers(state), again.stderr


def test_cluster_places_one_rank_per_node(box, tmp_path):
    env, timings = box
    t_start = time.monotonic()
    state = env['UMSTUDY_CLUSTER_STATE']
    # `up` again: already up, the same exports
    again = _run([SCRIPT, 'up', '4'], env)
    assert again.returncode == 0 and 'already up' in again.stderr, again.stderr
    assert again.stdout == timings['exports']
    # what `up` measured over the link, through the project's ping-pong
    link = json.load(open(os.path.join(state, 'link.json')))
    assert link['measured'], link
    assert link['latency_us']['n'] == 3 and link['bandwidth_mb_s']['median'] > 0, link
    status = _run([SCRIPT, 'status'], env)
    assert status.returncode == 0 and 'cluster: up, 4 nodes' in status.stdout, status.stdout
    # ... and it joins the cluster system's facts in this environment
    assert cluster.complete({'facts': {'network': {}}}, env)['facts']['link_measured'] == link

    # Slurm: four nodes, four names
    r = _run(['srun', '-N', '4', '--ntasks-per-node=1', 'hostname'], env)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ['umsnode1', 'umsnode2', 'umsnode3', 'umsnode4'], r.stdout

    # Slurm: an Open MPI job on two nodes, one rank each; its ranks talk over the link
    r = _run(['srun', '-N', '2', '--ntasks-per-node=1', '--mpi=pmix'] + WHERE, env)
    assert r.returncode == 0, r.stderr
    hosts = hosts_by_rank(r.stdout)
    ok, why = placement.check_layout(hosts, nodes=2, per_node=1)
    assert ok, (why, r.stdout)
    r = _run(['srun', '-N', '2', '--ntasks-per-node=1', '--mpi=pmix', PINGPONG, '--ops', 'get', '--raw',
              '--min', '8', '--max', '64K', '--loop', '20', '--check-rounds', '0'], env)
    assert r.returncode == 0 and '"op":"raw-get"' in r.stdout, r.stderr[-2000:]

    # Slurm, wrong layout: two ranks packed onto one node are a placement failure
    r = _run(['srun', '-N', '1', '-n', '2', '--mpi=pmix'] + WHERE, env)
    assert r.returncode == 0, r.stderr
    ok, why = placement.check_layout(hosts_by_rank(r.stdout), nodes=2, per_node=1)
    assert not ok and '1 distinct node' in why, (why, r.stdout)

    # Grid Engine: qsub -pe mpi 2 (one slot per node) + mpirun (qrsh -inherit)
    script = tmp_path / 'ge-job.sh'
    script.write_text('#!/bin/bash\n'
                      'export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n'
                      f"mpirun $MAP {' '.join(WHERE[:2])} '{WHERE[2]}'\n"
                      'if [ "$NSLOTS" = 2 ]; then\n'
                      f'  mpirun {PINGPONG} --ops get --raw --min 8 --max 64K --loop 20 --check-rounds 0\n'
                      'fi\n')

    def qsub(name, *request, mapping=''):
        out = tmp_path / f'{name}.out'
        q = _run(['qsub', '-sync', 'y', '-N', name, '-cwd', '-j', 'y', '-o', str(out), '-v', f'MAP={mapping}',
                  *request, str(script)], env, timeout=180, cwd=str(tmp_path))
        text = out.read_text() if out.exists() else ''
        assert q.returncode == 0, (q.stdout, q.stderr, text)
        return text

    text = qsub('ge_mpi', '-pe', 'mpi', '2')
    ok, why = placement.check_layout(hosts_by_rank(text), nodes=2, per_node=1)
    assert ok, (why, text)
    assert '"op":"raw-get"' in text, text
    # TSUBAME4.0's way: `-l node_f=3` is three whole nodes; two ranks on each
    text = qsub('ge_nodef', '-l', 'node_f=3', '-l', 'h_rt=0:05:00', mapping='--map-by ppr:2:node')
    ok, why = placement.check_layout(hosts_by_rank(text), nodes=3, per_node=2)
    assert ok, (why, text)
    # one resource type per job, as on TSUBAME4.0: two are refused at submission
    q = _run(['qsub', '-l', 'node_f=1', '-l', 'cpu_4=1', str(script)], env, cwd=str(tmp_path))
    assert q.returncode != 0 and 'one resource type per job' in q.stdout + q.stderr, (q.stdout, q.stderr)
    # Grid Engine, wrong layout: PE smp puts both slots on one node
    text = qsub('ge_smp', '-pe', 'smp', '2')
    ok, why = placement.check_layout(hosts_by_rank(text), nodes=2, per_node=1)
    assert not ok and '1 distinct node' in why, (why, text)
    print(f'cluster: jobs {time.monotonic() - t_start:.1f} s; link: {cluster.describe(link)}')
