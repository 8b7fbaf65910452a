"""Placement: the layout comparison (umstudy.placement), how where.sh's lines become hosts
by rank (umstudy.checks.hosts_by_rank), the options each scheduler and launcher gets
(umstudy.launch), and where.sh itself."""
import json
import os
import subprocess

import pytest

from umstudy import launch
from umstudy.checks import WHERE, hosts_by_rank
from umstudy.placement import check_layout

NODES32 = [f'n{i:03d}' for i in range(32)]


@pytest.mark.parametrize('hosts, nodes, per_node, ok, words', [
    (NODES32, 32, 1, True, '32 distinct node'),
    (['n000'] * 32, 32, 1, False, 'ranks on 1 distinct node(s), the layout needs 32 (n000: rank(s) 0-31)'),
    (['a', 'b', 'a', 'b'], 2, 2, True, '2 per node'),
    (['a', 'a', 'a', 'b'], 2, 2, False, 'a: rank(s) 0-2; b: rank(s) 3'),
    (['a', 'a'], 1, 2, True, '1 distinct node'),          # UmbHalo on a node with two GPUs
    (['a', 'a'], 2, 1, False, 'ranks on 1 distinct node(s), the layout needs 2'),
    (['a', 'b', 'c'], 2, 1, False, '3 rank(s) said where they ran, the layout has 2'),
    (['a', None, 'c'], 3, 1, False, 'rank(s) 1 did not say'),
    (['a', 'b', 'c', 'a'], 4, 1, False, '3 distinct node(s)'),
])
def test_check_layout(hosts, nodes, per_node, ok, words):
    got, reason = check_layout(hosts, nodes, per_node)
    assert got is ok and words in reason, reason


def test_check_layout_refuses_an_empty_layout():
    with pytest.raises(ValueError):
        check_layout([], 0, 1)


def test_hosts_by_rank():
    lines = [{'rank': 1, 'host': 'b'}, {'rank': 0, 'host': 'a'}]
    assert hosts_by_rank(lines, 2) == (['a', 'b'], '')
    assert hosts_by_rank(lines[:1], 2) == ([None, 'b'], '')            # rank 0 never said
    assert 'reported twice' in hosts_by_rank(lines + [{'rank': 1, 'host': 'c'}], 2)[1]
    assert 'ranks 0..1' in hosts_by_rank([{'rank': None, 'host': 'a'}], 2)[1]
    assert 'ranks 0..1' in hosts_by_rank([{'rank': 5, 'host': 'a'}], 2)[1]


OPENMPI = {'mpi': 'openmpi'}


@pytest.mark.parametrize('scheduler, launcher, job, want_job, want_launch', [
    ('scontrol', 'srun', {}, ['--nodes=32'], ['--nodes=32', '--ntasks-per-node=1']),
    ('pbs', 'mpiexec', {}, ['-l place=scatter'], ['--map-by', 'ppr:1:node']),
    ('pbs', 'mpirun', {'place': 'scatter:excl', 'per_node_option': ['-npernode', '{per_node}']},
     ['-l place=scatter:excl'], ['-npernode', '1']),
    ('nqsv', 'mpirun', {}, [], ['--map-by', 'ppr:1:node']),            # -b N: nqsv.py, from the tasks
    ('ge', 'mpirun', {'nodes_option': '-l node_f={nodes}'}, [], ['--map-by', 'ppr:1:node']),
])
def test_placement_options(scheduler, launcher, job, want_job, want_launch):
    assert launch.placement(scheduler, launcher, OPENMPI, job, 32, 1) == (want_job, want_launch)


def test_grid_engine_asks_for_whole_nodes_on_every_job_and_needs_the_data():
    assert launch.node_request('ge', {'nodes_option': '-l node_f={nodes}'}, 1, 1) == ['-l node_f=1']
    assert launch.node_request('ge', {'nodes_option': '-pe one {ranks}'}, 4, 1) == ['-pe one 4']
    assert launch.node_request('pbs', {}, 4, 1) == []
    with pytest.raises(launch.LayoutError, match='nodes_option'):
        launch.node_request('ge', {}, 2, 1)


def test_mpich_places_and_forwards_in_its_own_words():
    mpich = {'mpi': 'mpich'}
    assert launch.placement('pbs', 'mpiexec', mpich, {}, 4, 1)[1] == ['-ppn', '1']
    assert launch.forwarding('pbs', 'mpiexec', mpich, {'A': '1', 'B': 'x'})[1] == ['-genvlist', 'A,B']
    with pytest.raises(launch.LayoutError, match='facts.mpi'):
        launch.placement('pbs', 'mpiexec', {'mpi': 'lam'}, {}, 4, 1)


def test_forwarding_names_every_variable_the_check_sets():
    env = {'OMP_NUM_THREADS': '1', 'XMPC_BACKEND': 'gasnet'}
    assert launch.forwarding('nqsv', 'mpirun', OPENMPI, env) == (
        ['-v OMP_NUM_THREADS=1,XMPC_BACKEND=gasnet'], ['-x', 'OMP_NUM_THREADS', '-x', 'XMPC_BACKEND'])
    assert launch.forwarding('ge', 'mpirun', OPENMPI, env)[0] == ['-v OMP_NUM_THREADS=1,XMPC_BACKEND=gasnet']
    assert launch.forwarding('scontrol', 'srun', OPENMPI, env) == ([], ['--export=ALL'])
    assert launch.forwarding('local', 'mpirun', OPENMPI, env) == ([], ['-x', 'OMP_NUM_THREADS', '-x', 'XMPC_BACKEND'])
    with pytest.raises(launch.LayoutError, match='commas'):
        launch.forwarding('pbs', 'mpiexec', OPENMPI, {'LIST': 'a,b'})


def where(*args, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith(('OMPI_', 'PMIX_', 'PMI_', 'SLURM_', 'PALS_'))}
    e.update(env)
    return subprocess.run([WHERE, *args], capture_output=True, text=True, env=e)


def test_where_says_which_rank_runs_where_then_becomes_the_program():
    r = where('--', 'sh', '-c', 'echo program; exit 3', OMPI_COMM_WORLD_RANK='5', OMPI_COMM_WORLD_SIZE='8',
              SLURM_PROCID='0')   # mpirun inside a Slurm job: the MPI's own rank wins
    first, second = r.stdout.splitlines()
    rec = json.loads(first)
    assert rec['bench'] == 'placement' and rec['rank'] == 5 and rec['size'] == 8 and rec['host']
    assert second == 'program' and r.returncode == 3
    rec = json.loads(where('--gpus', '--', 'true', PMIX_RANK='1', CUDA_VISIBLE_DEVICES='2').stdout)
    assert rec['rank'] == 1 and rec['cuda_visible_devices'] == '2' and isinstance(rec['gpus'], list)
    assert json.loads(where('--', 'true').stdout)['rank'] is None   # no launcher: no rank to claim
    r = where()
    assert r.returncode == 2 and 'no program given' in r.stderr
