#!/usr/bin/env python3
"""Provenance bundle of one run: what was run, on what, built with what.

    python3 analysis/provenance.py --report output/reports/local-quick-T.json [--system local]

Writes output/provenance/<report name>/ with the run report, the Spack environment
(spack.yaml, spack.lock and `spack find` where Spack is present), `nvidia-smi -q`, the
driver and CUDA versions, the GH200 memory mode (addressing mode, NUMA nodes), MPI
(`ompi_info`, `mpirun --version`), compiler versions, `git describe`, the ReFrame version
and the local detection; then SHA256SUMS over every file and one SHA-256 over SHA256SUMS
(the bundle's hash), also written next to the report as <report>.provenance so the report
can cite it.  A tool that is absent is recorded as missing; it never fails the run.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..'))
TIMEOUT = 60

# name -> command; the first word must be on PATH, else the item is recorded as missing.
COMMANDS = {
    'nvidia-smi-q': ['nvidia-smi', '-q'],
    'nvidia-smi-query': ['nvidia-smi', '--query-gpu=name,driver_version,memory.total,'
                         'pcie.link.gen.max,pcie.link.width.max,addressing_mode',
                         '--format=csv'],
    'nvcc-version': ['nvcc', '--version'],
    'numa-hardware': ['numactl', '--hardware'],  # GH200: HBM shows up as a NUMA node
    'ompi-info': ['ompi_info'],
    'mpirun-version': ['mpirun', '--version'],
    'mpichversion': ['mpichversion'],
    'gcc-version': ['gcc', '--version'],
    'gxx-version': ['g++', '--version'],
    'gfortran-version': ['gfortran', '--version'],
    'nvc-version': ['nvc', '--version'],
    'clang-version': ['clang', '--version'],
    'cmake-version': ['cmake', '--version'],
    'git-describe': ['git', '-C', ROOT, 'describe', '--always', '--dirty', '--tags', '--long'],
    'git-head': ['git', '-C', ROOT, 'log', '-1', '--format=%H %cI %s'],
    'git-status': ['git', '-C', ROOT, 'status', '--porcelain'],
    'uname': ['uname', '-a'],
    'lscpu': ['lscpu'],
    'spack-version': ['spack', '--version'],
}
FILES = {
    'driver-version': '/proc/driver/nvidia/version',
    'os-release': '/etc/os-release',
}


def sha256(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def run(cmd, env=None):
    """(status, text): 'ok', 'failed (rc N)' or 'missing (...)'."""
    exe = shutil.which(cmd[0], path=(env or os.environ).get('PATH'))
    if not exe:
        return f'missing ({cmd[0]} not on PATH)', ''
    try:
        r = subprocess.run([exe] + cmd[1:], capture_output=True, text=True, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        return f'failed (timed out after {TIMEOUT} s)', ''
    except OSError as e:
        return f'failed ({e})', ''
    return ('ok' if r.returncode == 0 else f'failed (rc {r.returncode})'), r.stdout + r.stderr


def reframe_version(python):
    if not python:
        return 'missing (no Python with ReFrame given)', ''
    return run([python, '-c', 'import reframe; print(reframe.VERSION)'])


def detection(python):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, 'reframe', 'lib'))
    return run([python or sys.executable, '-m', 'umstudy.detect'], env=env)


def memory_mode(out_dir):
    """What decides P001's results on a GH200: the addressing mode the driver reports
    (ATS / HMM / none), pageable memory access per GPU, and the NUMA nodes (a GH200 in
    NUMA mode shows its HBM as a CPU-less node).  ('missing ...', '') without a GPU."""
    def read(name):
        path = os.path.join(out_dir, name)
        return open(path).read() if os.path.isfile(path) else ''
    smi = read('nvidia-smi-q.txt')
    modes = [line.split(':', 1)[1].strip() for line in smi.splitlines()
             if line.strip().startswith('Addressing Mode')]
    try:
        gpus = json.loads(read('detection.json') or '{}').get('gpus', [])
    except json.JSONDecodeError:
        gpus = []
    if not smi and not gpus:
        return 'missing (no nvidia-smi output and no GPU detected)', ''
    node_dir = '/sys/devices/system/node'
    nodes = sorted(n for n in os.listdir(node_dir) if n.startswith('node')) if os.path.isdir(node_dir) else []
    cpuless = [n for n in nodes
               if not open(os.path.join(node_dir, n, 'cpulist')).read().strip()]
    return 'ok', json.dumps({
        'addressing_mode': modes,
        'pageable_memory_access': [g.get('pageable_memory_access') for g in gpus],
        'pageable_uses_host_page_tables': [g.get('pageable_uses_host_page_tables') for g in gpus],
        'numa_nodes': nodes, 'cpuless_numa_nodes': cpuless}, indent=1)


def collect(report, system, out_dir, python=None, env=None):
    """Writes the bundle; returns its manifest (also bundle/MANIFEST.json)."""
    os.makedirs(out_dir, exist_ok=True)
    items = {}

    def put(name, status, text, suffix='.txt'):
        entry = {'status': status}
        if status == 'ok' or text:
            fname = name + suffix
            with open(os.path.join(out_dir, fname), 'w') as f:
                f.write(text)
            entry['file'] = fname
        items[name] = entry

    # Side by side: the slow ones (nvidia-smi -q, ompi_info, the detection probe) take
    # seconds each, and a run's last step should not wait for them in turn.
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        ran = {name: pool.submit(run, cmd, env) for name, cmd in COMMANDS.items()}
        ran['reframe-version'] = pool.submit(reframe_version, python)
        ran['detection'] = pool.submit(detection, python)
    for name in COMMANDS:
        put(name, *ran[name].result())
    for name, path in FILES.items():
        if os.path.isfile(path):
            put(name, 'ok', open(path, errors='replace').read())
        else:
            put(name, f'missing ({path} does not exist)', '')
    put('reframe-version', *ran['reframe-version'].result())
    put('detection', *ran['detection'].result(), suffix='.json')

    put('gpu-memory-mode', *memory_mode(out_dir), suffix='.json')

    spack_env = os.path.join(ROOT, 'systems', system)
    for fname in ('spack.yaml', 'spack.lock'):
        src = os.path.join(spack_env, fname)
        if os.path.isfile(src):
            shutil.copy(src, os.path.join(out_dir, fname))
            items[fname] = {'status': 'ok', 'file': fname}
        else:
            items[fname] = {'status': f'missing (systems/{system}/{fname} does not exist)'}
    if items['spack-version']['status'] == 'ok':
        put('spack-find', *run(['spack', '-e', spack_env, 'find', '-lv'], env))
    else:
        items['spack-find'] = {'status': 'missing (spack not on PATH)'}

    if report:
        shutil.copy(report, os.path.join(out_dir, 'run-report.json'))
        items['run-report'] = {'status': 'ok', 'file': 'run-report.json', 'source': os.path.abspath(report)}
    else:
        items['run-report'] = {'status': 'missing (no run report given)'}

    manifest = {'system': system, 'items': items,
                # make run and ReFrame build src/ with CMake; spack.yaml/spack.lock describe
                # the Spack route to the same programs (spack-find says what it installed)
                'build': 'CMake (make run / ReFrame UmstudyBuild); Spack environment recorded for reference'}
    with open(os.path.join(out_dir, 'MANIFEST.json'), 'w') as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    names = sorted(n for n in os.listdir(out_dir) if n != 'SHA256SUMS')
    with open(os.path.join(out_dir, 'SHA256SUMS'), 'w') as f:
        f.writelines(f'{sha256(os.path.join(out_dir, n))}  {n}\n' for n in names)
    # One hash names the whole bundle: `sha256sum SHA256SUMS`, then `sha256sum -c SHA256SUMS`.
    manifest['sha256'] = sha256(os.path.join(out_dir, 'SHA256SUMS'))
    manifest['bundle'] = os.path.abspath(out_dir)
    return manifest


def verify(bundle):
    """The bundle's hash if every file matches SHA256SUMS, else raises ValueError."""
    sums = os.path.join(bundle, 'SHA256SUMS')
    listed = set()
    with open(sums) as f:
        for line in f:
            digest, name = line.rstrip('\n').split('  ', 1)
            listed.add(name)
            if sha256(os.path.join(bundle, name)) != digest:
                raise ValueError(f'{name} does not match SHA256SUMS')
    extra = set(os.listdir(bundle)) - listed - {'SHA256SUMS'}
    if extra:
        raise ValueError(f'not in SHA256SUMS: {", ".join(sorted(extra))}')
    return sha256(sums)


def sidecar(report):
    return os.path.splitext(report)[0] + '.provenance'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--report', help='the ReFrame run report of this run')
    ap.add_argument('--system', default='local', help='systems/<name> the run used (default local)')
    ap.add_argument('--out', help='bundle directory (default output/provenance/<report name>)')
    ap.add_argument('--python', help='the Python that runs ReFrame (for its version)')
    ap.add_argument('--verify', metavar='BUNDLE', help='only check a bundle; prints its hash')
    args = ap.parse_args(argv)
    if args.verify:
        try:
            print(verify(args.verify))
        except (OSError, ValueError) as e:
            print(f'provenance: {args.verify}: {e}', file=sys.stderr)
            return 1
        return 0
    if args.report and not os.path.isfile(args.report):
        print(f'provenance: no such run report: {args.report}', file=sys.stderr)
        return 2
    if not os.path.isdir(os.path.join(ROOT, 'systems', args.system)):
        print(f'provenance: no system {args.system!r} under systems/', file=sys.stderr)
        return 2
    stem = os.path.splitext(os.path.basename(args.report))[0] if args.report else 'no-report'
    out = args.out or os.path.join(ROOT, 'output', 'provenance', stem)
    if os.path.isdir(out):
        shutil.rmtree(out)  # a bundle is written once, whole; a rerun replaces it
    m = collect(args.report, args.system, out, python=args.python)
    missing = sorted(k for k, v in m['items'].items() if v['status'] != 'ok')
    if args.report:
        with open(sidecar(args.report), 'w') as f:
            json.dump({'bundle': m['bundle'], 'sha256': m['sha256'], 'not_recorded': missing}, f, indent=1)
    print(f"provenance: {m['bundle']} sha256 {m['sha256']}", file=sys.stderr)
    if missing:
        print(f"provenance: not recorded: {', '.join(missing)}", file=sys.stderr)
    print(json.dumps({'bundle': m['bundle'], 'sha256': m['sha256']}))
    return 0


if __name__ == '__main__':
    sys.exit(main())
