"""Jobs as data: how long each check takes, which queue a job goes to, what it asks for.

- reframe/times.yaml holds one time per check and size; it sets every job's walltime
  (`time_limit`) and is the table of ARTIFACT.md E (`python3 -m umstudy.jobs table`).
- A partition's `job:` block in systems/<name>/system.yaml says how a job asks for its
  queue (quick or paper size; CPU-only checks to a CPU partition where there is one), for
  GPUs and memory (PBS `-l select` chunk fields), and what the launcher needs.
- The placeholder group is refused before ReFrame generates any job (`refuse_placeholder`).
"""
import functools
import math
import os
import platform
import re
import socket
import sys

import yaml

from . import data

TIMES_FILE = os.path.join(data.REPO, 'reframe', 'times.yaml')
PLACEHOLDER_GROUP = 'SET-UMSTUDY_GROUP'


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


if __name__ == '__main__':
    if sys.argv[1:] == ['table']:
        print(table())
    else:
        sys.exit('usage: python3 -m umstudy.jobs table')
