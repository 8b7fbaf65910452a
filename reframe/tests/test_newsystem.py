"""`make system` (python3 -m umstudy.newsystem) for every scheduler it offers: the profile
it writes from this machine's detection plus the answers goes through a real ReFrame dry
run, and the job scripts carry the scheduler's own syntax for the group, the walltime,
the nodes and the modules.  Wrong answers are refused with the way to write them."""
import glob
import os
import shutil

import pytest
import yaml

from test_job_scripts import dry_run
from umstudy import data, newsystem

COMMON = ['--cuda-archs', '90', '--gpu-model', 'H100-SXM5-80GB', '--gpus-per-node', '4',
          '--cuda-version', '12.6', '--modules', 'cuda/12.6 openmpi/4.1.6', '--modules-system', 'tmod4',
          '--hostnames', '^nomatch$']
# what each scheduler's CabIs script (4 ranks, one per node, quick size) must hold
EXPECT = {
    'slurm': ([], ['#SBATCH --account=grp42', '#SBATCH --time=', '#SBATCH --nodes=4', '--ntasks-per-node=1']),
    'pbs': ([], ['#PBS -W group_list=grp42', '#PBS -l walltime=', 'place=scatter']),
    'nqsv': ([], ['#PBS -A grp42', '#PBS -l elapstim_req=', '#PBS -b 4']),
    'ge': (['--account-option=-g ${UMSTUDY_GROUP}', '--ge-nodes-option=-l node_f={nodes}',
            '--prepare-cmd', '. /etc/profile.d/modules.sh'],
           ['# submitted as: qsub -g grp42', '#$ -l h_rt=', '#$ -l node_f=4', '--map-by ppr:1:node',
            '. /etc/profile.d/modules.sh']),
}


def generate(name, scheduler, extra):
    args = newsystem.parser().parse_args(['--name', name, '--scheduler', scheduler] + COMMON + extra)
    return newsystem.describe(args, newsystem.detected())


@pytest.mark.parametrize('scheduler', sorted(newsystem.SCHEDULERS))
def test_generated_profile_makes_the_schedulers_job_scripts(scheduler, tmp_path):
    assert scheduler in EXPECT, f'a new scheduler in newsystem needs its expectations here: {scheduler}'
    extra, wanted = EXPECT[scheduler]
    name = f'zznew{scheduler}{os.getpid()}'
    folder = os.path.join(data.SYSTEMS_DIR, name)
    desc = generate(name, scheduler, extra)
    os.makedirs(folder)
    try:
        with open(os.path.join(folder, 'system.yaml'), 'w') as f:
            yaml.safe_dump(desc, f, sort_keys=False)
        dry_run(name, 'quick', tmp_path, names=r'^CabIs\b')
        found = glob.glob(str(tmp_path / name / 'stage' / name / '*' / '*' / 'CabIs*' / 'rfm_job.sh'))
        assert found, f'no CabIs job script under {tmp_path}'
        wanted = wanted + ['module load cuda/12.6', 'module load openmpi/4.1.6']
        # the case on 4 nodes (CabIs runs at several node counts and backends)
        scripts = [open(p).read() for p in found]
        four = [t for t in scripts if all(w in t for w in wanted)]
        assert four, f'{scheduler}: no CabIs script holds all of {wanted}; one of them:\n{scripts[0]}'
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize('extra, message', [
    ([], 'Grid Engine needs --ge-nodes-option'),
    (['--ge-nodes-option=-l node_f=1'], 'has no {nodes}'),
    (['--ge-nodes-option=-l node_f={nodes} {bogus}'], 'only {nodes}, {per_node} and {ranks}'),
])
def test_grid_engine_without_a_usable_nodes_option_is_refused(extra, message):
    with pytest.raises(SystemExit) as e:
        generate('zzbad', 'ge', extra)
    assert message in str(e.value)


def test_modules_without_a_module_system_are_refused(monkeypatch):
    monkeypatch.delenv('LMOD_CMD', raising=False)
    monkeypatch.delenv('MODULES_CMD', raising=False)
    args = newsystem.parser().parse_args(['--name', 'zzbad', '--scheduler', 'slurm', '--modules', 'cuda/12.6'])
    with pytest.raises(SystemExit) as e:
        newsystem.modules_system(args.modules_system, args.modules)
    assert 'no module system is loaded' in str(e.value)
    monkeypatch.setenv('MODULES_CMD', '/usr/share/modules/libexec/modulecmd.tcl')
    assert newsystem.modules_system(None, 'cuda/12.6') == 'tmod4'
    with pytest.raises(SystemExit):
        newsystem.modules_system('nomod', 'cuda/12.6')


def test_a_grid_engine_option_elsewhere_is_refused():
    with pytest.raises(SystemExit) as e:
        generate('zzbad', 'slurm', ['--ge-nodes-option=-l node_f={nodes}'])
    assert 'is for Grid Engine' in str(e.value)
