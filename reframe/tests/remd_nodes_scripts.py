"""RemdVcudaNodes' job scripts (remd through vcuda across nodes, P003's layout) on every
site profile, at both sizes: test_job_scripts.py's dry runs include the check and hand
its scripts to `check` (one dry run per system and size for both: each costs seconds).

Each script must ask for the client's node plus the server nodes in the scheduler's own
syntax (Slurm tasks one per node on N nodes, PBS `select=N:mpiprocs=1` scattered, NQSV
`-b N`, Grid Engine whole nodes) with the job's environment on every node, carry a
walltime, run `vcuda-launch` itself (no launcher before it: it launches its own tasks)
with the partition's launcher and the options the site's batch system prepares (NQSV's
${NQSV_MPIOPTS}), servers off the client's node, and the GPUs per node the layout needs;
where reframe/tests/golden/remd-nodes-<system>-<size>.txt exists (cygnus, miyabi,
pegasus, tsubame, tsubame4, slurm) the directives, exports and command line must equal it, so a
dropped directive fails.  After an intended change:
  UMSTUDY_REGOLD=1 python3 -m pytest reframe/tests/test_job_scripts.py   (then review the diff)
"""
import json
import math
import os
import re

from umstudy import data, jobs

NAMES = 'RemdVcudaNodes'


def gpus_per_node(system):
    from test_job_scripts import GOLDEN
    desc = data.system(system)
    if desc.get('detect'):   # the dry run detected from the saved probe
        return len(json.load(open(os.path.join(GOLDEN, 'probe.json'))).get('gpus', [])) or 1
    return desc['facts']['gpu']['count']


def nodes_asked(text):
    for pattern in (r'^#SBATCH --ntasks=(\d+)$', r'^#PBS -l select=(\d+):', r'^#PBS -b (\d+)$',
                    r'^#\$ -l (?!h_rt=)\w+=(\d+)$'):
        m = re.search(pattern, text, re.M)
        if m:
            return int(m.group(1))
    return None


def check(system, size, found, normalise):
    """Checks the RemdVcudaNodes scripts among `found` ({case: (path, text)}) and compares
    the one with the most GPUs with its golden file; `normalise(text)` as for the others."""
    from test_job_scripts import WALLTIME, golden, partition_of   # (that module imports this one)
    found = {c: v for c, v in found.items() if c.startswith(NAMES + '_')}
    desc = data.system(system)
    gpn = gpus_per_node(system)
    cases = []
    for case, (path, text) in found.items():
        # a system's partitions may differ in scheduler and launcher (`cluster`: Slurm
        # and Grid Engine): each script is held to its own partition's
        part, _ = partition_of(path, system)
        scheduler = part.get('scheduler', desc['scheduler'])
        launcher = part.get('launcher', desc['launcher'])
        m = re.search(r' --gpus (\d+)\b', text)
        assert m, (case, text)
        gpus = int(m.group(1))
        server_nodes = math.ceil(gpus / gpn)
        line = text.strip().splitlines()[-1]
        # the client's node plus the server nodes, one task each
        assert nodes_asked(text) == 1 + server_nodes, (gpus, gpn, text)
        if scheduler in jobs.SLURM_LIKE:
            assert '#SBATCH --ntasks-per-node=1' in text and f'#SBATCH --nodes={1 + server_nodes}' in text, text
        if scheduler == 'pbs':   # no two of the job's nodes on one host
            assert re.search(r'^#PBS -l place=scatter\b', text, re.M), text
        if scheduler in ('pbs', 'nqsv', 'ge'):   # the job's environment on every node
            env = re.findall(r'^export (\w+=\S*)$', text, re.M)
            given = ','.join(re.findall(r'^#(?:PBS|\$) -v (\S+)$', text, re.M)).split(',')
            assert set(env) <= set(given), (env, given, text)
        assert any(WALLTIME.match(x) for x in text.splitlines()), text
        # vcuda-launch first on the line, through the site's launcher, servers elsewhere
        assert re.match(r'^\S+/vcuda/vcuda-launch ', line), line
        assert f'--launcher {launcher} --nodes {1 + server_nodes} ' in line, line
        assert f'--gpus-per-node {math.ceil(gpus / server_nodes)} ' in line and ' --remote-only ' in line, line
        for opt in part.get('job', {}).get('launcher_options', []):
            assert f'--launcher-opts "{opt}"' in line, line
        keepalive = 'export VCUDA_KEEPALIVE_MS=2' in text
        cases.append((gpus, keepalive, '--cells 4 ' in line, case))
    assert cases, sorted(found)
    # the golden: the most GPUs, P003's keep-alive on, 256 atoms
    gpus, _, _, case = max(cases)
    assert gpus == max(c[0] for c in cases)
    golden(f'remd-nodes-{system}-{size}.txt', f"== remd-nodes: {gpus} GPUs\n{normalise(found[case][1])}\n")
