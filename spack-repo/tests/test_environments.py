"""The per-system Spack environments (systems/<name>/spack.yaml): generated from
system.yaml, complete, and valid for a real Spack (validation and, for `local`,
concretisation; skipped without $SPACK_ROOT)."""
import os
import re
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'reframe', 'lib'))
from umstudy import data, spackenv  # noqa: E402

SYSTEMS = spackenv.with_spack()


def env(name):
    with open(spackenv.path(name)) as f:
        return yaml.safe_load(f)['spack']


def test_every_system_has_an_environment():
    assert set(SYSTEMS) == set(data.system_names())


def test_generated_files_are_current():
    assert spackenv.main(['--check']) == 0, 'run: PYTHONPATH=reframe/lib python3 -m umstudy.spackenv'


@pytest.mark.parametrize('name', SYSTEMS)
def test_environment_builds_every_component_from_this_checkout(name):
    e = env(name)
    assert set(e['develop']) == set(spackenv.components())
    assert all(os.path.samefile(os.path.join(data.SYSTEMS_DIR, name, d['path']), ROOT)
               for d in e['develop'].values())
    assert os.path.isfile(os.path.join(data.SYSTEMS_DIR, name, e['repos']['umstudy'], 'repo.yaml'))


@pytest.mark.parametrize('name', [n for n in SYSTEMS if not data.system(n).get('detect')])
def test_site_environment_pins_cuda_mpi_and_the_gpu_architecture(name):
    e, build = env(name), data.system(name)['build']
    pkgs = e['packages']
    for virtual_or_pkg in ('cuda', 'mpi'):
        assert pkgs[virtual_or_pkg]['buildable'] is False
    assert pkgs['cuda']['externals'], 'the site CUDA must be an external'
    mpi = data.facts(name)['mpi']
    assert pkgs[mpi]['externals'] and pkgs[mpi]['buildable'] is False
    # cuda_arch for every CUDA component (Spack cannot propagate it from the bundle)
    assert pkgs['all']['variants'] == f"cuda_arch={build['cuda_archs']}"
    assert any(s.startswith('umstudy+cuda') for s in e['specs']), 'sites install the bundle'
    # CUDA version: the facts' major.minor
    assert pkgs['cuda']['externals'][0]['spec'].startswith(f"cuda@{data.facts(name)['cuda']}")
    assert 'gcc' in pkgs and pkgs['gcc']['externals'][0]['extra_attributes']['compilers']['c']


spack_root = os.environ.get('SPACK_ROOT')
spack = spack_root and os.path.join(spack_root, 'bin', 'spack')
needs_spack = pytest.mark.skipif(
    not (spack and os.path.exists(spack)),
    reason='SPACK_ROOT is not set to a Spack installation: Spack checks skipped')


@needs_spack
@pytest.mark.parametrize('name', SYSTEMS)
def test_spack_accepts_the_environment(name):
    # `config get` validates every section against Spack's schema
    r = subprocess.run([spack, '-e', os.path.join(data.SYSTEMS_DIR, name), 'config', 'get', 'packages'],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_local_externals_are_untracked_and_take_spack_writes():
    """`spack -e systems/local external find` writes the included, untracked file
    (prefer_modify), never the generated spack.yaml."""
    inc = env('local')['include']
    assert inc == [{'path': 'local-externals.yaml', 'optional': True, 'prefer_modify': True}]
    r = subprocess.run(['git', '-C', ROOT, 'check-ignore', '-q', 'systems/local/local-externals.yaml'])
    assert r.returncode == 0, 'systems/local/local-externals.yaml must be git-ignored'


def spack_env(*args, timeout=900):
    r = subprocess.run([spack, '-e', os.path.join(data.SYSTEMS_DIR, 'local')] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


@needs_spack
@pytest.mark.skipif(os.environ.get('UMSTUDY_SPACK_INSTALL') != '1',
                    reason='builds every component (minutes): set UMSTUDY_SPACK_INSTALL=1 to run')
def test_local_environment_installs_every_component_offline(tmp_path):
    """`spack -e systems/local install` from this checkout, no network needed beyond the
    mirror named in the Spack configuration; each component then has its programs or
    library; a second install with nothing changed rebuilds nothing; the environment's
    packages make one view (no two install the same file)."""
    rc, out = spack_env('concretize', '-f')
    assert rc == 0, out
    rc, out = spack_env('install', '--fail-fast', timeout=3600)
    assert rc == 0, out[-4000:]
    rc, out = spack_env('install')
    assert rc == 0 and 'Executing phase' not in out, f'an unchanged checkout was rebuilt:\n{out[-4000:]}'
    rc, out = spack_env('find', '--paths', *spackenv.components(), timeout=300)
    assert rc == 0, out
    for component in spackenv.components():
        prefix = re.search(rf'^{re.escape(component)}@main\S*\s+(/\S+)', out, re.M)
        assert prefix, f'{component} not installed:\n{out}'
        made = [d for d in ('bin', 'lib', 'lib64', 'include') if os.path.isdir(os.path.join(prefix.group(1), d))
                and os.listdir(os.path.join(prefix.group(1), d))]
        assert made, f'{component} installed nothing (no programs, libraries or headers)'
    rc, out = spack_env('view', 'symlink', str(tmp_path / 'view'), 'umstudy', timeout=300)
    assert rc == 0 and (tmp_path / 'view' / 'bin' / 'cab-is').exists(), out
    rc, out = spack_env('audit', 'configs', timeout=300)
    assert rc == 0, out


@needs_spack
def test_make_spack_offline_writes_a_spack_1x_mirror(tmp_path):
    """`make spack-offline` lays the release tarball out as Spack 1.x reads it and adds the
    sources of what the local environment builds besides (compiler-wrapper), from the
    mirrors Spack has or the network."""
    r = subprocess.run(['make', '-s', 'spack-offline', 'SYSTEM=local', f'MIRROR={tmp_path}', f'SPACK={spack}'],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    # Whether every download is already in a configured mirror is this machine's state,
    # not the repository's: without network, what is missing is a reason to skip.
    missing = sorted(set(re.findall(r'Error while fetching (\S+)', out)))
    if r.returncode != 0 and missing and re.search(r'Name or service not known|Network is unreachable', out):
        pytest.skip(f"no network and not in a configured mirror: {', '.join(missing)}")
    assert r.returncode == 0, out
    sha = re.search(r'^RELEASE = \("[^"]+", "([0-9a-f]{64})"\)', open(os.path.join(
        ROOT, 'spack-repo', 'spack_repo', 'umstudy', 'build_systems', 'component.py')).read(), re.M).group(1)
    assert (tmp_path / 'source' / '_source-cache' / 'archive' / sha[:2] / f'{sha}.tar.gz').is_file()
    assert 'compiler-wrapper' in out and '0    failed to fetch' in out, out
    assert (tmp_path / 'source' / 'compiler-wrapper').is_dir()
