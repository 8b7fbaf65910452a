"""ReFrame configuration generated from systems/<name>/system.yaml (all of them).

`reframe -C reframe/config/umstudy.py --system NAME ...` picks one; sourcing
reframe/env.sh sets RFM_CONFIG_FILES so that `-C` can be left out.  Real sites are
matched by hostname; anything else is `local`, whose features come from detection.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
from umstudy import data  # noqa: E402
from umstudy import jobs  # noqa: E402
from umstudy import gridengine  # noqa: E402,F401  (registers the `ge` scheduler: TSUBAME4.0)
from umstudy import nqsv  # noqa: E402,F401  (registers the `nqsv` scheduler: Cygnus, Pegasus)
from umstudy import slurm  # noqa: E402,F401  (registers `scontrol`: Slurm without accounting)

PREFIX = os.environ.get('UMSTUDY_OUTPUT', os.path.join(data.REPO, 'output'))
os.makedirs(PREFIX, exist_ok=True)


def _refuse(message):
    sys.stderr.write(f'umstudy: {message}\n')
    sys.exit(2)


# The size, read once for the checks (umstudy.checks.size): SIZE=paper means the same to
# ReFrame as to `make run` (UMSTUDY_SIZE, where set, wins); anything else is refused here,
# before a check is loaded.
try:
    os.environ['UMSTUDY_SIZE'] = jobs.size_from_env()
except ValueError as e:
    _refuse(e)

# One programming environment per check unless UMSTUDY_ENVIRONS (or -p) asks for more.
_ENVIRONS = jobs.environs_request(os.environ, sys.argv)


def _expand(items):
    # Site-specific values (project/group names) come from the environment; a clear
    # placeholder is left when unset so listings and dry runs still work.
    env = dict(os.environ)
    env.setdefault('UMSTUDY_GROUP', 'SET-UMSTUDY_GROUP')
    return [os.path.expandvars(i).replace('${UMSTUDY_GROUP}', env['UMSTUDY_GROUP'])
            if '$' in i else i for i in items]


def _module_tool_here(kind):
    """Whether this machine has the module tool a system names (nomod: always)."""
    present = {
        'lmod': bool(os.environ.get('LMOD_CMD')),
        'envmod': bool(shutil.which('modulecmd') or os.environ.get('MODULESHOME')),
        'tmod4': bool(shutil.which('modulecmd')),
    }
    return present.get(kind, kind == 'nomod')


def _resolves_modules(name):
    """False where the system's module tool is not on this machine (listing, --dry-run
    and the analysis away from the site: an evaluator's laptop, CI).  ReFrame then
    neither validates the tool nor asks it about conflicts (general/resolve_module_conflicts
    also decides modules_system_validate), and writes each environment's `module load`
    lines into the job scripts as the site would run them; on the site the real tool is
    found, validated and asked."""
    return _module_tool_here(data.system(name).get('modules_system', 'nomod'))


def _processor(facts):
    # The node's cores: what OpenMP checks use (OMP_NUM_THREADS, num_cpus_per_task).
    cores = facts.get('cpu', {}).get('cores')
    return {'num_cpus': int(cores)} if cores else {}


def _system(name):
    desc = data.system(name)
    os.environ.setdefault('UMSTUDY_GROUP', jobs.PLACEHOLDER_GROUP)
    parts = []
    for p in desc['partitions']:
        # A partition may override the system's facts (a CPU partition's own nodes).
        facts = {**desc.get('facts', {}), **p.get('facts', {})}
        parts.append({
            'name': p['name'],
            'descr': p.get('descr', p['name']),
            'scheduler': p.get('scheduler', desc['scheduler']),
            'launcher': p.get('launcher', desc['launcher']),
            'access': _expand(p.get('access', [])),
            'environs': [f'{e}' for e in p['environs']],
            'features': p.get('features', []),
            'max_jobs': p.get('max_jobs', 8),
            # shell lines every job runs first (e.g. the site's module initialisation)
            'prepare_cmds': p.get('prepare_cmds', []),
            # Apptainer images from containers/ (see containers/README.md)
            'container_platforms': p.get('container_platforms', []),
            'processor': _processor(facts),
            'extras': {'system': name, 'facts': facts, 'build': desc.get('build', {}),
                       'job': p.get('job', {}), 'retired': desc.get('retired', '')},
        })
    return {
        'name': name,
        'descr': desc.get('descr', name),
        'hostnames': desc.get('hostnames', []),
        'modules_system': desc.get('modules_system', 'nomod'),
        'prefix': os.path.join(PREFIX, name),
        'partitions': parts,
    }


def _environment(env_name, env, target):
    return {
        'name': env_name,
        'target_systems': [target],
        'modules': env.get('modules', []),
        'cc': env.get('cc', 'cc'),
        'cxx': env.get('cxx', 'CC'),
        'ftn': env.get('ftn', 'ftn'),
        'features': env.get('features', []),
    }


def _environments(name):
    """The environments of a system, and per partition the ones its checks run with
    (features RUN_ENV / RUN_ACC: one per check by default, umstudy.jobs.run_environs)."""
    desc = data.system(name)
    # A detected machine builds with the compilers `make build` used: CC/CXX/FC where set
    # (so the build fixture reuses build/default instead of building src/ again).
    chosen = {k: os.environ[v] for k, v in (('cc', 'CC'), ('cxx', 'CXX'), ('ftn', 'FC'))
              if desc.get('detect') and os.environ.get(v)}
    common = {env_name: {**env, **chosen} for env_name, env in desc.get('environments', {}).items()}
    envs = [_environment(env_name, env, name) for env_name, env in common.items()]
    # Per partition (ReFrame takes the system:partition definition there): the features
    # that choose the environments its checks run with, and a partition's own definition
    # of an environment for its nodes (Miyabi-C's x86-64 modules beside Miyabi-G's).
    for p in desc['partitions']:
        own = {e: {**common.get(e, {}), **((p.get('environments') or {}).get(e) or {})} for e in p['environs']}
        run = jobs.run_environs(p['environs'], {e: own[e].get('features', []) for e in own}, _ENVIRONS)
        for env_name, env in own.items():
            env = dict(env, features=list(env.get('features', [])) + run[env_name])
            envs.append(_environment(env_name, env, f"{name}:{p['name']}"))
    return envs


# `local` matches any host, so it goes last.
_names = [n for n in data.system_names() if n != 'local'] + ['local']

# A run that would submit jobs under the placeholder group stops here, before any job
# script exists (listing and --dry-run go on: their scripts show the placeholder).
_asked = jobs.requested_system(sys.argv, os.environ) or jobs.system_by_hostname(
    [(n, data.system(n).get('hostnames', [])) for n in _names if n != 'local'])
if _asked in _names:
    jobs.refuse_placeholder(data.system(_asked))
_checked = _asked if _asked in _names else 'local'
_unknown = jobs.unknown_environs(_ENVIRONS, data.system(_checked))
if _unknown:
    _refuse(f"UMSTUDY_ENVIRONS={_ENVIRONS}: {_checked} has no environment {', '.join(_unknown)} "
            f"(it has {', '.join(sorted({e for p in data.system(_checked)['partitions'] for e in p['environs']}))}; "
            f"or UMSTUDY_ENVIRONS=all)")

def _log_file():
    """`make run`'s own log for its run; otherwise output/reframe.log, which `make run` left
    as a link to its latest run's log: a direct ReFrame run replaces the link (and neither
    overwrites that log nor fails on a link whose log was deleted)."""
    if os.environ.get('UMSTUDY_RUN_LOG'):
        return os.environ['UMSTUDY_RUN_LOG']
    path = os.path.join(PREFIX, 'reframe.log')
    if os.path.islink(path):
        os.unlink(path)
    return path


_GENERAL = {'report_file': os.path.join(PREFIX, 'reports', 'run-report-{sessionid}.json'), 'remote_detect': False}
_LOCAL_POLL = {'poll_rate_max': 50, 'poll_rate_decay': 0.02, 'poll_rate_min': 2}
_LOCAL_JOBS = [n for n in _names if all(p.get('scheduler', data.system(n)['scheduler']) == 'local'
                                        for p in data.system(n)['partitions'])]

site_configuration = {
    'systems': [_system(n) for n in _names],
    'environments': [e for n in _names for e in _environments(n)],
    'logging': [{
        'level': 'debug',
        'handlers': [
            {'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s'},
            # One log per run (UMSTUDY_RUN_LOG, set by `make run`), so the log a failed run
            # points to is still there after the next one.
            {'type': 'file', 'name': _log_file(),
             'level': 'debug',
             'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s', 'append': False},
        ],
        'handlers_perflog': [{
            'type': 'filelog',
            'prefix': os.path.join(PREFIX, 'perflogs', '%(check_system)s', '%(check_partition)s'),
            'level': 'info',
            'format': '%(check_job_completion_time)s|%(check_info)s|%(check_perfvalues)s',
            'format_perfvars': '%(check_perf_value)s|%(check_perf_unit)s|',
            'append': True,
        }],
    }],
    'storage': [{'enable': True, 'sqlite_db_file': os.path.join(PREFIX, 'results.db')}],
    # One entry per system.  Where jobs are local processes a poll is a waitpid, not a
    # scheduler query: poll fast (ReFrame's default, 10/s decaying by 10% a poll, adds up
    # to a second to each of a quick run's ~150 short cases).
    'general': [{**_GENERAL, 'target_systems': [n], 'resolve_module_conflicts': _resolves_modules(n),
                 **(_LOCAL_POLL if n in _LOCAL_JOBS else {})} for n in _names],
}
