"""How a job places its ranks and hands every rank the experiment's environment, for
each scheduler and launcher umstudy speaks.  checks.UmstudyRunBase applies it to every
check with more than one rank, after the check's own hooks have set its tasks and its
environment; nothing else writes placement or forwarding options.

Placement: a check's ranks run `per_node` on each of `nodes` distinct nodes.  Both sides
are told, so neither can pack the ranks onto the first node:
- the scheduler allocates exactly those nodes: Slurm `--nodes` (beside ReFrame's own
  `--ntasks-per-node`), PBS Pro `-l place=scatter` over ReFrame's `select=N:mpiprocs=P`
  (no two chunks on one host), NQSV `-b N` (reframe/lib/umstudy/nqsv.py), Grid Engine the
  partition's `job: nodes_option` (TSUBAME4.0: whole nodes, `-l node_f=N`; elsewhere a
  parallel environment whose allocation_rule puts one slot on each host);
- the launcher maps that many ranks to each node: Open MPI `--map-by ppr:P:node`,
  MPICH/Hydra `-ppn P`, srun `--nodes=N --ntasks-per-node=P`; a partition whose MPI
  needs other words says so in `job: per_node_option` (Open MPI 1.6: `-npernode P`).
Forwarding: Open MPI's mpirun does not give remote ranks the job script's exports
unless named (`-x NAME`), Hydra takes `-genvlist`, srun `--export=ALL`; on PBS, NQSV and
Grid Engine the batch system also starts the job with them (`-v NAME=value`).
"""

SLURM_LIKE = ('slurm', 'squeue', 'scontrol')
PBS_LIKE = ('pbs', 'nqsv')
GRID_ENGINE = ('sge', 'ge')
MPI_LAUNCHERS = ('mpirun', 'mpiexec')
# What each MPI's mpirun/mpiexec takes (facts.mpi of the partition names the MPI).
FLAVOURS = {
    'openmpi': {'per_node': ['--map-by', 'ppr:{per_node}:node'], 'export': lambda names: [
        w for n in names for w in ('-x', n)]},
    'mpich': {'per_node': ['-ppn', '{per_node}'], 'export': lambda names: [
        '-genvlist', ','.join(names)] if names else []},
}
FLAVOURS['intelmpi'] = FLAVOURS['mpich']
FLAVOURS['mvapich2'] = FLAVOURS['mpich']


class LayoutError(ValueError):
    """A partition's data cannot express a layout (says which key is missing)."""


def flavour(facts):
    name = (facts or {}).get('mpi', 'openmpi')
    if name not in FLAVOURS:
        raise LayoutError(f"facts.mpi: {name!r}: umstudy knows how to place ranks with "
                          f"{', '.join(sorted(FLAVOURS))}")
    return FLAVOURS[name]


def _fill(words, **values):
    return [w.format(**values) for w in words]


def node_request(scheduler, job, nodes, per_node):
    """Job options that ask for the nodes where ReFrame's backend asks for none: Grid
    Engine (every job, one rank or many).  `job` is the partition's `job:` block of
    systems/<name>/system.yaml."""
    if scheduler not in GRID_ENGINE:
        return []
    if not job.get('nodes_option'):
        raise LayoutError('a Grid Engine partition needs `job: nodes_option`: its whole-node '
                          'resource (TSUBAME4.0: "-l node_f={nodes}") or a parallel environment '
                          'whose allocation_rule is 1 ("-pe <name> {ranks}" with one rank per node)')
    return [job['nodes_option'].format(nodes=nodes, per_node=per_node, ranks=nodes * per_node)]


def placement(scheduler, launcher, facts, job, nodes, per_node):
    """(job options, launcher options) that put `per_node` ranks on each of `nodes`
    distinct nodes (the nodes themselves: node_request and ReFrame's backends)."""
    values = {'nodes': nodes, 'per_node': per_node, 'ranks': nodes * per_node}
    job_opts, launch_opts = [], []
    if scheduler in SLURM_LIKE:
        job_opts.append(f'--nodes={nodes}')
    elif scheduler == 'pbs':
        job_opts.append(f"-l place={job.get('place', 'scatter')}")
    # nqsv: `-b N` logical hosts from the tasks (nqsv.py); Grid Engine: whole nodes or one
    # slot per host (node_request); local: one machine, nothing to ask.
    if launcher in MPI_LAUNCHERS:
        launch_opts += _fill(job.get('per_node_option') or flavour(facts)['per_node'], **values)
    elif launcher == 'srun':
        launch_opts += [f'--nodes={nodes}', f'--ntasks-per-node={per_node}']
    return job_opts, launch_opts


def _v_list(env_vars):
    for name, value in env_vars.items():
        if any(c in str(value) for c in ',"\' \t\n'):
            raise LayoutError(f'{name}={value!r}: a batch system `-v` list cannot carry commas, '
                              'quotes or white space')
    return ','.join(f'{name}={value}' for name, value in env_vars.items())


def forwarding(scheduler, launcher, facts, env_vars):
    """(job options, launcher options) that give every rank each of `env_vars`."""
    names = list(env_vars)
    if not names:
        return [], (['--export=ALL'] if launcher == 'srun' else [])
    job_opts = []
    if scheduler in PBS_LIKE or scheduler in GRID_ENGINE:
        job_opts.append(f'-v {_v_list(env_vars)}')
    if launcher in MPI_LAUNCHERS:
        return job_opts, flavour(facts)['export'](names)
    if launcher == 'srun':
        return job_opts, ['--export=ALL']
    return job_opts, []
