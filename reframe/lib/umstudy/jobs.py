"""Jobs as data: how long each check takes, which queue a job goes to, what it asks for.

- reframe/times.yaml holds one time per check and size; it sets every job's walltime
  (`time_limit`) and is the table of ARTIFACT.md E (`python3 -m umstudy.jobs table`).
- A partition's `job:` block in systems/<name>/system.yaml says how a job asks for its
  queue (quick or paper size; CPU-only checks to a CPU partition where there is one), for
  GPUs and memory (PBS `-l select` chunk fields), and what the launcher needs.
- The placeholder group is refused before ReFrame generates any job (`refuse_placeholder`).
- The size (SIZE / UMSTUDY_SIZE) and the programming environments a session runs with
  (UMSTUDY_ENVIRONS) are read and checked once, by the ReFrame configuration.
- `make run` asks a system's batch system whether it answers before it builds anything
  (`python3 -m umstudy.jobs scheduler NAME`).
"""
import functools
import math
import os
import platform
import re
import shutil
import socket
import subprocess
import sys

import yaml

from . import data

TIMES_FILE = os.path.join(data.REPO, 'reframe', 'times.yaml')
PLACEHOLDER_GROUP = 'SET-UMSTUDY_GROUP'
SIZES = ('quick', 'paper')


@functools.lru_cache(maxsize=None)
def times():
    with open(TIMES_FILE) as f:
        return yaml.safe_load(f)


def estimate(check, size):
    """Seconds one case of `check` takes at `size` (quick: the slowest machine measured),
    or None when times.yaml has no figure for it."""
    entry = times()['checks'].get(check)
    if not entry:
        return None
    value = entry.get(size)
    if isinstance(value, dict):
        return max(value.values()) if value else None
    return value


def time_limit(check, size):
    """The walltime of a job of `check`: max(floor, margin x its time), whole minutes."""
    t = times()
    est = estimate(check, size)
    seconds = max(t['floor_s'], t['margin'] * est) if est else t['floor_s']
    return int(math.ceil(seconds / 60.0) * 60)


def hms(seconds):
    return f'{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}'


def table():
    """ARTIFACT.md E's per-check table (markdown), from times.yaml."""
    t = times()
    machines = sorted({m for e in t['checks'].values() for m in (e.get('quick') or {})})
    rows = ['| check | ' + ' | '.join(f'quick, {m} (s)' for m in machines) +
            ' | paper (s) | paper from | walltime quick / paper |',
            '|---|' + '---|' * len(machines) + '---|---|---|']
    for name, e in t['checks'].items():
        quick = e.get('quick') or {}
        cells = ' | '.join(f'{quick[m]:g}' if m in quick else 'not run' for m in machines)
        rows.append(f"| {name} | {cells} | {e['paper']:g} | {e.get('paper_on', '')} | "
                    f"{hms(time_limit(name, 'quick'))} / {hms(time_limit(name, 'paper'))} |")
    return '\n'.join(rows)


def machines_table():
    """The machines the times were measured on (markdown), from times.yaml."""
    rows = ['| machine | what it is | per-check times measured |', '|---|---|---|']
    for name, m in times()['machines'].items():
        rows.append(f"| {name} | {m['descr']} | {m['date']} |")
    return '\n'.join(rows)


def measured_table():
    """ARTIFACT.md E's table of the whole runs that were timed (markdown): each figure
    with its machine and date, the runs' median and min..max."""
    rows = ['| what | machine | date | runs (s) | median (min..max) (s) |', '|---|---|---|---|---|']
    for r in times()['suite']:
        runs = sorted(r['runs'])
        mid = len(runs) // 2
        median = runs[mid] if len(runs) % 2 else (runs[mid - 1] + runs[mid]) / 2
        about = '~' if r.get('approx') else ''   # a figure ARTIFACT.md C gives rounded
        spread = f'{about}{median:g}' + (f' ({runs[0]:g}..{runs[-1]:g})' if len(runs) > 1 else '')
        rows.append(f"| {r['what']} | {r['machine']} | {r['date']} | "
                    f"{', '.join(f'{about}{x:g}' for x in r['runs'])} | {spread} |")
    return '\n'.join(rows)


# ---- node-hours of a site: the jobs one run submits, from a ReFrame dry run ------------

RFM_MAIN = 'import sys; sys.argv[0] = "reframe"; from reframe.frontend.cli import main; main()'


def nodehours_systems():
    """The sites node-hours are given for: not detected (their nodes are this machine) and
    not retired (no job runs there)."""
    return [n for n in data.system_names()
            if not data.system(n).get('detect') and not data.system(n).get('retired')
            and any(p.get('scheduler', data.system(n)['scheduler']) != 'local'
                    for p in data.system(n)['partitions'])]


def node_hours(report, size):
    """{'jobs', 'asked', 'expected', 'unestimated'} of one dry-run report: every case the
    run submits as a job (not skipped, not run on the submitting node), its nodes times its
    walltime (`asked`, what the scheduler reserves) and times its time in times.yaml
    (`expected`; `unestimated` jobs have no time there), in node-hours, one repeat."""
    out = {'jobs': 0, 'asked': 0.0, 'expected': 0.0, 'unestimated': 0}
    for run in report.get('runs', []):
        for tc in run.get('testcases', []):
            if tc.get('result') == 'skip' or tc.get('local'):
                continue
            if tc.get('fixture') and tc.get('build_locally', True):
                continue   # the build fixture compiles on the submitting node
            ranks = tc.get('num_tasks') or 1
            nodes = max(1, ranks // (tc.get('num_tasks_per_node') or ranks))
            out['jobs'] += 1
            out['asked'] += nodes * (tc.get('time_limit') or 0) / 3600.0
            est = estimate(tc['display_name'].split()[0], size)
            if est is None:
                out['unestimated'] += 1
            else:
                out['expected'] += nodes * est / 3600.0
    return out


NODEHOURS_HEADER = ('| system | size | jobs | node-hours asked (walltimes) | node-hours expected (times.yaml) |\n'
                    '|---|---|---|---|---|')


def nodehours_row(system, size, nh):
    unest = f" ({nh['unestimated']} jobs without a time)" if nh['unestimated'] else ''
    return f"| {system} | {size} | {nh['jobs']} | {nh['asked']:.1f} | {nh['expected']:.2f}{unest} |"


def dry_run_report(system, size, out_dir=None):
    """A ReFrame dry run of every check on `system` at `size`; its run report (a dict)."""
    import json
    import tempfile
    out_dir = out_dir or tempfile.mkdtemp(prefix='umstudy-nodehours-')
    report = os.path.join(out_dir, f'dry-run-{system}-{size}.json')
    env = dict(os.environ, RFM_CONFIG_FILES=os.path.join(data.REPO, 'reframe', 'config', 'umstudy.py'),
               UMSTUDY_OUTPUT=out_dir, UMSTUDY_GROUP='grp', UMSTUDY_SIZE=size,
               PYTHONPATH=os.path.join(data.REPO, 'reframe', 'lib'))
    for name in ('UMSTUDY_COMPONENTS', 'UMSTUDY_ENVIRONS', 'UMSTUDY_RUN_LOG'):
        env.pop(name, None)
    r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-c', os.path.join(data.REPO, 'reframe'),
                        '--system', system, '--dry-run', f'--report-file={report}'],
                       capture_output=True, text=True, env=env, cwd=data.REPO, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f'dry run of {system} ({size}) failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}')
    with open(report) as f:
        return json.load(f)


def nodehours_table(out_dir=None):
    """ARTIFACT.md E's node-hours per site and size (markdown), one dry run each."""
    rows = [NODEHOURS_HEADER]
    for system in nodehours_systems():
        for size in SIZES:
            rows.append(nodehours_row(system, size, node_hours(dry_run_report(system, size, out_dir), size)))
    return '\n'.join(rows)


def job_block(partition_extras):
    return partition_extras.get('job', {}) or {}


def queue_options(partition_extras, scheduler, size):
    """The job options that pick the queue for this size (none where the partition has none)."""
    queues = job_block(partition_extras).get('queues') or {}
    queue = queues.get(size) or queues.get('quick')
    if not queue:
        return []
    return [f'--partition={queue}'] if scheduler in SLURM_LIKE else [f'-q {queue}']


SLURM_LIKE = ('slurm', 'squeue', 'scontrol')


def gpu_options(partition_extras, scheduler, num_gpus_per_node):
    """Slurm: the GPUs a job uses (ReFrame's Slurm backend asks for none itself);
    `job: gpu_option:` in system.yaml replaces the default `--gres=gpu:{gpus}`."""
    if scheduler not in SLURM_LIKE or not num_gpus_per_node:
        return []
    template = job_block(partition_extras).get('gpu_option', '--gres=gpu:{gpus}')
    return [template.format(gpus=num_gpus_per_node)] if template else []


def select_fields(partition_extras, num_gpus_per_node):
    """PBS `-l select` chunk fields beyond ReFrame's own (GPUs, memory), from the data."""
    job = job_block(partition_extras)
    facts = partition_extras.get('facts', {})
    values = {'gpus': num_gpus_per_node or 0,
              'mem_gib': int(facts.get('host_memory', {}).get('gib', 0))}
    out = []
    for field in job.get('select', []):
        if '{gpus}' in field and not values['gpus']:
            continue   # a CPU-only job asks for no GPU
        out.append(field.format(**values))
    return out


def builds_here(partition_extras, machine=None):
    """Whether a partition's programs can be built on this machine: not where its nodes
    declare another instruction set (`facts.cpu.arch`: Miyabi-C's x86-64 beside
    Miyabi-G's Arm); the build then runs as a job on the partition's own nodes."""
    arch = partition_extras.get('facts', {}).get('cpu', {}).get('arch')
    return not arch or arch == (machine or platform.machine())


def requested_system(argv, environ):
    """The system a ReFrame command line names (--system X / --system=X / RFM_SYSTEM)."""
    for i, a in enumerate(argv):
        if a == '--system' and i + 1 < len(argv):
            return argv[i + 1].split(':')[0]
        if a.startswith('--system='):
            return a.split('=', 1)[1].split(':')[0]
    return (environ.get('RFM_SYSTEM') or '').split(':')[0] or None


def system_by_hostname(candidates, hostname=None):
    """The system ReFrame picks by hostname when no --system is given (first match)."""
    host = hostname or socket.gethostname()
    return next((name for name, patterns in candidates if any(re.match(p, host) for p in patterns)), None)


def runs_jobs(argv):
    """True when the ReFrame command line submits jobs (-r/--run, not a dry run or listing)."""
    return ('-r' in argv or '--run' in argv) and '--dry-run' not in argv


def refuse_placeholder(system_desc, argv=None, environ=None):
    """Exits with a clear message when a run would submit jobs under the placeholder group.

    Listing and --dry-run keep working with the placeholder (their scripts show it)."""
    argv = sys.argv if argv is None else argv
    environ = os.environ if environ is None else environ
    if not runs_jobs(argv) or environ.get('UMSTUDY_GROUP', PLACEHOLDER_GROUP) != PLACEHOLDER_GROUP:
        return
    uses = [a for p in system_desc.get('partitions', []) for a in p.get('access', [])
            if '${UMSTUDY_GROUP}' in a]
    if uses:
        sys.stderr.write(
            f"umstudy: refusing to submit to {system_desc['name']}: its jobs name your group "
            f"({uses[0].replace('${UMSTUDY_GROUP}', '<group>')}) and UMSTUDY_GROUP is not set.\n"
            f"  export UMSTUDY_GROUP=<your group> and run again (listing and --dry-run work without it).\n")
        sys.exit(2)


def size_from_env(environ=None):
    """The size a ReFrame session runs at: UMSTUDY_SIZE, else SIZE (the name `make` and the
    README use), else quick.  Raises ValueError, naming the variable, for any other value."""
    environ = os.environ if environ is None else environ
    for name in ('UMSTUDY_SIZE', 'SIZE'):
        value = environ.get(name)
        if value:
            if value not in SIZES:
                raise ValueError(f"{name}={value} is not a size: choose {name}=quick or {name}=paper")
            return value
    return 'quick'


# Features the configuration gives the programming environments a session runs with:
# every check runs on the environments with RUN_ENV, an OpenACC check on those with RUN_ACC.
RUN_ENV, RUN_ACC = 'run_env', 'run_acc'


def prgenv_requested(argv):
    """True when the ReFrame command line picks environments itself (-p / --prgenv)."""
    return any(a in ('-p', '--prgenv') or a.startswith('--prgenv=') or
               (a.startswith('-p') and not a.startswith('--')) for a in (argv or [])[1:])


def environs_request(environ, argv):
    """What UMSTUDY_ENVIRONS asks for ('' = one environment per check); a ReFrame command
    line that picks environments itself (-p) gets them all to pick from."""
    return (environ.get('UMSTUDY_ENVIRONS') or '').strip() or ('all' if prgenv_requested(argv) else '')


def unknown_environs(request, system_desc):
    """The names UMSTUDY_ENVIRONS gives that no partition of the system has."""
    if request in ('', 'all'):
        return []
    have = {e for p in system_desc['partitions'] for e in p['environs']}
    return [n for n in (x.strip() for x in request.split(',')) if n and n not in have]


def run_environs(environs, env_features, request=''):
    """{environment: features among RUN_ENV, RUN_ACC} for one partition.

    `environs` is the partition's list, `env_features` {name: features} of each.  By
    default each check runs under ONE environment: every check under the partition's
    first, an OpenACC check under the first whose features have `openacc` (the first of
    all where none says so: a detected machine's OpenACC is the partition's).
    `request` (UMSTUDY_ENVIRONS) 'all' runs each check under every environment it can
    use, 'a,b' under those named that the partition has."""
    acc = [e for e in environs if 'openacc' in (env_features.get(e) or [])]
    if not request:
        chosen, chosen_acc = environs[:1], (acc or environs)[:1]
    else:
        names = environs if request == 'all' else [n.strip() for n in request.split(',')]
        chosen = [e for e in environs if e in names]
        chosen_acc = [e for e in chosen if e in acc] if acc else chosen
    return {e: ([RUN_ENV] if e in chosen else []) + ([RUN_ACC] if e in chosen_acc else [])
            for e in environs}


# How `make run` asks a batch system whether it answers, per ReFrame scheduler: a query of
# the server (not `--version`, which answers without one).
SCHEDULER_PROBES = {
    'slurm': ['sinfo', '-h', '-o', '%P'], 'squeue': ['sinfo', '-h', '-o', '%P'],
    'scontrol': ['sinfo', '-h', '-o', '%P'],
    'pbs': ['qstat', '-B'],
    'nqsv': ['qstat', '-Q'],      # NQSV lists its queues (the CCS guides' own check)
    'ge': ['qstat', '-g', 'c'],   # Grid Engine: the cluster queue summary
}
SCHEDULER_NAMES = {'slurm': 'Slurm', 'squeue': 'Slurm', 'scontrol': 'Slurm', 'pbs': 'PBS',
                   'nqsv': 'NQSV', 'ge': 'Grid Engine'}


def scheduler_check(system_name, timeout=30):
    """'' when every batch system the system's partitions submit to answers here, else one
    line saying which command failed and how.  Local systems and retired ones need none."""
    desc = data.system(system_name)
    if desc.get('retired'):
        return ''
    scheds = sorted({p.get('scheduler', desc['scheduler']) for p in desc['partitions']} - {'local'})
    for sched in scheds:
        cmd, what = SCHEDULER_PROBES.get(sched), SCHEDULER_NAMES.get(sched, sched)
        if not cmd:
            return f'{system_name}: no way known to ask the `{sched}` scheduler whether it answers'
        if not shutil.which(cmd[0]):
            return (f"{system_name} submits to {what}, but `{cmd[0]}` is not on PATH here: run on "
                    f"the site's login node (or load its batch-system module)")
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"{system_name}: `{' '.join(cmd)}` did not answer in {timeout} s: is the {what} server up?"
        if r.returncode != 0:
            why = (r.stderr.strip() or r.stdout.strip() or f'exit {r.returncode}').splitlines()[-1]
            return f"{system_name}: `{' '.join(cmd)}` failed ({why}): {what} does not answer here"
    return ''


USAGE = """usage: python3 -m umstudy.jobs table | nodehours | scheduler SYSTEM
  table       ARTIFACT.md E: the machines, the timed runs and the per-check times (times.yaml)
  nodehours   ARTIFACT.md E: node-hours of one run per site and size (a dry run of each: minutes)
  scheduler   exit 0 if SYSTEM's batch system answers here, else 2 with one line saying why"""


def main(argv):
    if argv == ['table']:
        print(machines_table() + '\n\n' + measured_table() + '\n\n' + table())
    elif argv == ['nodehours']:
        print(nodehours_table())
    elif len(argv) == 2 and argv[0] == 'scheduler':
        try:
            why = scheduler_check(argv[1])
        except KeyError as e:
            why = e.args[0]
        if why:
            print(f'umstudy: {why}', file=sys.stderr)
            return 2
    else:
        print(USAGE, file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
