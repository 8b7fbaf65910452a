"""Writes systems/<name>/system.yaml for a cluster: `make system NAME=... SCHEDULER=...`.

Run it on a compute node of the cluster (or a login node with the same hardware): what
it can see it detects (cores, memory, the GPUs and their link through the CUDA driver,
the compilers, CUDA and MPI on PATH, the OS); what only you know comes as options
(scheduler, queues, the account option, GPUs per node, modules, launcher).  Then it
regenerates the Spack environment (systems/<name>/spack.yaml) and prints what to run.

  PYTHONPATH=reframe/lib python3 -m umstudy.newsystem --name mycluster --scheduler slurm \\
      --queue gpu --paper-queue gpu-long --account-option='--account=${UMSTUDY_GROUP}' \\
      --gpus-per-node 4 --modules 'cuda/12.6 openmpi/4.1.6'

Nothing else needs editing: every test and `make test` iterate over systems/.
"""
import argparse
import os
import platform
import re
import shutil
import socket
import subprocess
import sys

import yaml

from . import data, detect, spackenv

SCHEDULERS = {  # ReFrame scheduler, launcher, how the account option looks
    'slurm': ('slurm', 'srun', '--account=${UMSTUDY_GROUP}'),
    'pbs': ('pbs', 'mpiexec', '-W group_list=${UMSTUDY_GROUP}'),
    'nqsv': ('nqsv', 'mpirun', '-A ${UMSTUDY_GROUP}'),
    # Grid Engine (reframe/lib/umstudy/gridengine.py): qsub's project option by default;
    # TSUBAME4.0 names the group with -g instead
    'ge': ('ge', 'mpirun', '-P ${UMSTUDY_GROUP}'),
}
# Grid Engine has no portable "N nodes" request: sites ask for whole nodes through a
# resource type of their own or a parallel environment whose allocation rule puts one
# slot per host.  Examples for --ge-nodes-option.
GE_NODES_EXAMPLES = "'-l node_f={nodes}' (TSUBAME4.0's whole-node resource type) or " \
                    "'-pe mpi-1 {nodes}' (a parallel environment with allocation_rule 1)"


def _run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ''


def _version(pattern, text):
    m = re.search(pattern, text)
    return m.group(1) if m else None


def detected():
    """What this node shows: the probe of `local` plus compilers, CUDA, MPI, OS, memory."""
    p = detect.probe()
    mem_kib = int(_version(r'MemTotal:\s+(\d+)', open('/proc/meminfo').read()) or 0)
    osr = dict(re.findall(r'^(\w+)="?([^"\n]*)"?', open('/etc/os-release').read(), re.M)) \
        if os.path.exists('/etc/os-release') else {}
    gcc = shutil.which('gcc')
    return {
        'probe': p,
        'host_gib': round(mem_kib / 2**20),
        'os': f"{osr.get('NAME', 'Linux')} {osr.get('VERSION_ID', '')}".strip(),
        'os_id': f"{osr.get('ID', 'linux')}{osr.get('VERSION_ID', '').split('.')[0]}",
        'gcc': gcc and {'prefix': os.path.dirname(os.path.dirname(gcc)),
                        'version': _run([gcc, '-dumpfullversion']).strip() or None},
        'cuda': _version(r'release (\d+\.\d+)', _run([p['nvcc'], '--version'])) if p['nvcc'] else None,
        'mpi': _version(r'Open MPI\)? v?(\d+\.\d+\.\d+)', _run(['mpirun', '--version'])) if p['mpi'] else None,
        'cmake': _version(r'version (\d+\.\d+\.\d+)', _run(['cmake', '--version'])),
        'host': socket.gethostname().split('.')[0],
        'cpu_model': _version(r'model name\s*:\s*(.+)', open('/proc/cpuinfo').read()) or platform.machine(),
    }


GROUP = '${UMSTUDY_GROUP}'


def account_option(given, default):
    """The option that names the job's group, with the group left to UMSTUDY_GROUP, which
    the profile fills in when a job is made ($UMSTUDY_GROUP is taken as ${UMSTUDY_GROUP}).
    An option whose value is empty (the shell or make expanded ${UMSTUDY_GROUP} to nothing)
    is refused with the way to write it."""
    option = (given or default).replace('$UMSTUDY_GROUP', GROUP).strip()
    value = option.split('=', 1)[1] if '=' in option else option.split(None, 1)[1] if ' ' in option else ''
    if GROUP not in option and not value.strip():
        raise SystemExit(f"newsystem: --account-option {option!r} names no group: write it with the group "
                         f"left to UMSTUDY_GROUP, in single quotes so that no shell fills it in, e.g. "
                         f"ACCOUNT='{default}'")
    return option


def ge_nodes_option(option):
    """A Grid Engine partition's request for N whole nodes: given, and with {nodes}
    (or {ranks}) in it, so that a job's node count reaches qsub."""
    if not option:
        raise SystemExit('newsystem: Grid Engine needs --ge-nodes-option, the qsub option that asks for '
                         f'N nodes with {{nodes}} for N, e.g. {GE_NODES_EXAMPLES}')
    if '{nodes}' not in option and '{ranks}' not in option:
        raise SystemExit(f'newsystem: --ge-nodes-option {option!r} has no {{nodes}} (or {{ranks}}): every job '
                         f'would ask for the same nodes; e.g. {GE_NODES_EXAMPLES}')
    try:
        option.format(nodes=2, per_node=1, ranks=2)
    except (KeyError, IndexError, ValueError) as e:
        raise SystemExit(f'newsystem: --ge-nodes-option {option!r}: only {{nodes}}, {{per_node}} and {{ranks}} '
                         f'can be filled in ({e})')
    return option


def modules_system(given, modules):
    """The module system the jobs use: the one given, else the one this shell has loaded.
    Modules with none would be dropped from every job script without a word."""
    if given:
        if given == 'nomod' and modules:
            raise SystemExit(f'newsystem: --modules {modules!r} with --modules-system nomod: no job could load them')
        return given
    if os.environ.get('LMOD_CMD'):
        return 'lmod'
    if os.environ.get('MODULES_CMD'):
        return 'tmod4'
    if modules:
        raise SystemExit(f'newsystem: --modules {modules!r} but no module system is loaded in this shell '
                         '(neither LMOD_CMD nor MODULES_CMD is set): pass --modules-system lmod, tmod4 or envmod')
    return 'nomod'


def describe(args, det):
    """The system.yaml mapping from the answers and what was detected."""
    sched, launcher, account = SCHEDULERS[args.scheduler]
    account = account_option(args.account_option, account)
    p = det['probe']
    gpus = p['gpus']
    gpu = gpus[0] if gpus else None
    gpu_count = args.gpus_per_node if args.gpus_per_node is not None else len(gpus)
    # the CUDA the jobs load: --cuda-version, else a versioned cuda module, else nvcc here
    cuda_module = next((_version(r'cuda/(\d+\.\d+)', m) for m in (args.modules or '').split()
                        if re.match(r'cuda/\d+\.\d+', m)), None)
    cuda = args.cuda_version or cuda_module or det['cuda']
    if not cuda:
        raise SystemExit('newsystem: no CUDA found (nvcc) and no --cuda-version given: umstudy\'s '
                         'GPU studies need CUDA; load the CUDA module first or pass --cuda-version')
    arch = args.cuda_archs or (gpu['arch'] if gpu else None)
    if not arch:
        raise SystemExit('newsystem: no GPU visible here: pass --cuda-archs (e.g. 90 for H100/GH200)')
    cores = args.cores or p['cores']
    facts = {'cpu': {'model': args.cpu_model or det['cpu_model'], 'cores': cores},
             'host_memory': {'gib': det['host_gib']},
             'os': det['os'], 'cuda': cuda, 'compilers': ['gcc'], 'mpi': 'openmpi'}
    if args.host_mem_bw_gbps:
        facts['host_memory']['bw_gbps'] = args.host_mem_bw_gbps
    features = ['cpu', 'openmp', 'mpi', 'cuda']
    if gpu_count:
        cat = data.gpu_by_name(gpu['name']) if gpu else None
        facts['gpu'] = {'model': (cat or {}).get('model', args.gpu_model or (gpu or {}).get('name', 'unknown')),
                        'count': gpu_count, 'arch': str(arch)}
        if gpu:
            facts['pageable_memory_access'] = bool(gpu['pageable_memory_access'])
            facts['concurrent_managed_access'] = bool(gpu['concurrent_managed_access'])
            if gpu.get('pcie') and not gpu.get('pageable_uses_host_page_tables'):
                gen, width = gpu['pcie']
                gbps = round(detect._PCIE_LANE_GBPS.get(gen, 0.0) * width, 1)
                facts['link'] = {'type': f'PCIe Gen{gen} x{width}', 'h2d_gbps': gbps, 'd2h_gbps': gbps,
                                 'coherent': False}
        features += ['gpu', 'um'] + (['multigpu'] if gpu_count > 1 else []) + \
            (['sam'] if facts.get('pageable_memory_access') else [])
    job = {}
    if args.queue:
        job['queues'] = {'quick': args.queue, 'paper': args.paper_queue or args.queue}
    if args.scheduler == 'slurm' and args.mpi_plugin:
        job['launcher_options'] = [f'--mpi={args.mpi_plugin}']
    if args.scheduler == 'pbs' and gpu_count and args.pbs_gpu_field:
        job['select'] = [f'{args.pbs_gpu_field}={{gpus}}']
    if args.scheduler == 'ge':
        job['nodes_option'] = ge_nodes_option(args.ge_nodes_option)
    elif args.ge_nodes_option:
        raise SystemExit(f'newsystem: --ge-nodes-option is for Grid Engine (--scheduler ge), not {args.scheduler}')
    partition = {'name': 'default', 'descr': f'{args.name} nodes',
                 'access': [account] + list(args.access or []),
                 'features': sorted(set(features)), 'environs': ['gnu'], 'max_jobs': 8}
    if args.prepare_cmd:
        partition['prepare_cmds'] = list(args.prepare_cmd)
    if job:
        partition['job'] = job
    modules = (args.modules or '').split()
    gcc = det['gcc'] or {}
    spack = {
        'arch': f"linux-{det['os_id']}-{platform.machine()}",
        'specs': [f'umstudy+cuda cuda_arch={arch}'],
        'packages': {
            'gcc': {'externals': [{
                'spec': f"gcc@{gcc.get('version') or '0'} languages:='c,c++,fortran'",
                'prefix': gcc.get('prefix', '/usr'),
                'extra_attributes': {'compilers': {k: os.path.join(gcc.get('prefix', '/usr'), 'bin', v)
                                                   for k, v in (('c', 'gcc'), ('cxx', 'g++'), ('fortran', 'gfortran'))}}}]},
            'cuda': {'buildable': False, 'externals': [
                dict({'spec': f'cuda@{cuda}'}, **({'modules': [m for m in modules if 'cuda' in m]}
                                                  if any('cuda' in m for m in modules) else
                                                  {'prefix': os.path.dirname(os.path.dirname(p['nvcc'] or '/usr/local/cuda/bin/nvcc'))}))]},
            'openmpi': {'buildable': False, 'externals': [
                dict({'spec': f"openmpi@{args.mpi_version or det['mpi'] or '4.1.6'}"},
                     **({'modules': [m for m in modules if 'mpi' in m]} if any('mpi' in m for m in modules)
                        else {'prefix': '/usr'}))]},
            'mpi': {'buildable': False},
        },
    }
    if det['cmake']:
        spack['packages']['cmake'] = {'buildable': False, 'externals': [{'spec': f"cmake@{det['cmake']}",
                                                                         'prefix': '/usr'}]}
    return {
        'name': args.name,
        'descr': args.descr or f'{args.name}: {cores} cores, {gpu_count} GPU(s) per node ({args.scheduler})',
        'hostnames': [args.hostnames or f"^{re.sub(r'[0-9]+$', '', det['host'])}"],
        'modules_system': modules_system(args.modules_system, args.modules),
        'sources': {'generated': f'python3 -m umstudy.newsystem on {det["host"]} (detected) + the answers given'},
        'facts': facts,
        'scheduler': sched,
        'launcher': args.launcher or launcher,
        'partitions': [partition],
        'environments': {'gnu': {'modules': modules, 'cc': 'gcc', 'cxx': 'g++', 'ftn': 'gfortran',
                                 'features': ['openmp', 'cuda']}},
        'build': {'cuda_archs': str(arch), 'spack': True},
        'spack': spack,
        'container': {'skip': 'no image of its own: build natively with this Spack environment '
                              '(or run the `local` image, containers/README.md)'},
    }


def parser():
    ap = argparse.ArgumentParser(prog='python3 -m umstudy.newsystem', description=__doc__.split('\n\n')[0])
    ap.add_argument('--name', required=True, help='system name (a folder under systems/)')
    ap.add_argument('--scheduler', required=True, choices=sorted(SCHEDULERS))
    ap.add_argument('--queue', help='queue/partition for quick runs')
    ap.add_argument('--paper-queue', help='queue/partition for paper-size runs (default: --queue)')
    ap.add_argument('--account-option', metavar='OPTION',
                    help='how a job names your group, with the group left as ${UMSTUDY_GROUP} (filled in '
                         'from UMSTUDY_GROUP when a job is made); give it as --account-option=OPTION where '
                         'OPTION starts with "-", e.g. --account-option=\'--account=${UMSTUDY_GROUP}\'')
    ap.add_argument('--access', action='append', help='more scheduler options for every job (repeatable)')
    ap.add_argument('--gpus-per-node', type=int, help='GPUs per node (default: those visible here)')
    ap.add_argument('--cores', type=int, help='cores per node (default: those here)')
    ap.add_argument('--modules', help='modules every job loads, space-separated (e.g. "cuda/12.6 openmpi")')
    ap.add_argument('--modules-system', choices=['nomod', 'lmod', 'tmod4', 'envmod'],
                    help='default: lmod where Lmod is loaded, tmod4 where Environment Modules 4+ is, '
                         'else nomod (then --modules is refused: no job could load them)')
    ap.add_argument('--launcher', help='MPI launcher (default: srun | mpiexec | mpirun | mpirun by scheduler)')
    ap.add_argument('--mpi-plugin', default='pmix', help='Slurm: srun --mpi= plugin ("" for none)')
    ap.add_argument('--ge-nodes-option', metavar='OPTION',
                    help='Grid Engine: the qsub option asking for {nodes} whole nodes, e.g. '
                         '--ge-nodes-option=\'-l node_f={nodes}\' (TSUBAME4.0) or \'-pe mpi-1 {nodes}\'')
    ap.add_argument('--prepare-cmd', action='append',
                    help='a shell line every job runs first, e.g. ". /etc/profile.d/modules.sh" where a batch '
                         'shell has no `module` yet (repeatable)')
    ap.add_argument('--pbs-gpu-field', default='ngpus', help='PBS: the select field that asks for GPUs ("" for none)')
    ap.add_argument('--cuda-version', help='CUDA major.minor (default: nvcc on PATH)')
    ap.add_argument('--cuda-archs', help='CUDA architectures (default: the GPU here)')
    ap.add_argument('--mpi-version', help='Open MPI version (default: mpirun on PATH)')
    ap.add_argument('--cpu-model', help='CPU model (default: /proc/cpuinfo)')
    ap.add_argument('--gpu-model', help='GPU model where none is visible here')
    ap.add_argument('--descr', help='one line describing the system')
    ap.add_argument('--host-mem-bw-gbps', type=float, help='host memory bandwidth, GB/s (for references)')
    ap.add_argument('--hostnames', help='regex of the hostnames ReFrame picks this system on')
    ap.add_argument('--force', action='store_true', help='overwrite an existing systems/<name>/system.yaml')
    ap.add_argument('--print', action='store_true', help='print the system.yaml, write nothing')
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    if not re.fullmatch(r'[a-z][a-z0-9_-]*', args.name):
        raise SystemExit(f'newsystem: NAME={args.name!r}: use lower-case letters, digits, - or _')
    path = os.path.join(data.SYSTEMS_DIR, args.name, 'system.yaml')
    if os.path.exists(path) and not (args.force or args.print):
        raise SystemExit(f'newsystem: {path} exists (pass --force to overwrite it)')
    text = ('# Generated by `python3 -m umstudy.newsystem` (make system): check the facts and\n'
            '# the queue names against the site\'s guide before the first run.\n' +
            yaml.safe_dump(describe(args, detected()), sort_keys=False, width=100))
    if args.print:
        print(text)
        return 0
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
    data.system.cache_clear()
    spackenv.main([])
    print(f'wrote {os.path.relpath(path, data.REPO)} and its Spack environment. Next:\n'
          f'  . reframe/env.sh; reframe -c reframe/ --system {args.name} --dry-run   # read the job scripts\n'
          f'  UMSTUDY_GROUP=<your group> make run SYSTEM={args.name}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
