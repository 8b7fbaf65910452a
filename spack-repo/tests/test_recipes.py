"""The Spack recipes: static checks always; audit and concretisation with a real Spack.

The Spack part runs when SPACK_ROOT points at a Spack >= 1.0 whose `builtin` repository
is usable offline (see README, "Spack"); otherwise it is skipped with the reason."""
import ast
import os
import re
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.join(HERE, '..', 'spack_repo', 'umstudy')
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))


def recipe(name):
    # Spack >= 1.0 package directories are Python modules: xmp-coarray -> xmp_coarray
    with open(os.path.join(REPO_DIR, 'packages', name.replace('-', '_'), 'package.py')) as f:
        return f.read()


def cmake_options():
    text = open(os.path.join(ROOT, 'src', 'cmake', 'UmstudyCommon.cmake')).read()
    return set(re.findall(r'set\((UMSTUDY_\w+) ', text))


def test_layout_is_spack_1x():
    assert 'namespace: umstudy' in open(os.path.join(REPO_DIR, 'repo.yaml')).read()
    assert not os.path.exists(os.path.join(REPO_DIR, '..', '__init__.py')), \
        'spack_repo/__init__.py would shadow spack_repo.builtin'


def base_recipe():
    with open(os.path.join(REPO_DIR, 'build_systems', 'component.py')) as f:
        return f.read()


def cmake_cache_names(component):
    """Every cache variable the component's CMake (and the shared module) defines."""
    text = open(os.path.join(ROOT, 'src', component, 'CMakeLists.txt')).read()
    names = set(re.findall(r'set\((\w+) [^)]*CACHE', text))
    names |= {f'XMPC_{b}' for b in re.findall(r'foreach\(_b ([A-Z0-9 ]+)\)', text)[0].split()} \
        if 'foreach(_b ' in text else set()
    return names | cmake_options() | {'CMAKE_CUDA_ARCHITECTURES', 'BUILD_TESTING'}


@pytest.mark.parametrize('name', ['himeno', 'umbench', 'xmp-coarray', 'coarray-bench', 'vcuda', 'remd', 'dlm'])
def test_component_variants_map_to_cmake_options(name):
    src, base = recipe(name), base_recipe()
    ast.parse(src)
    ast.parse(base)
    names = cmake_cache_names(name)
    for _, opt in re.findall(r'self\.define\((f?)"([^"]+)"', src + base):
        # an f-string name (XMPC_{b.upper()}) must match at least one option
        pattern = re.sub(r'\{[^}]*\}', r'\\w+', opt)
        assert any(re.fullmatch(pattern, n) for n in names), f'{opt} is not a CMake option of src/{name}'
    assert re.search(r'class \w+\((Umstudy(Gpu|Cuda)?Component|XmpCoarray)\)', src)
    assert 'conflicts("cuda_arch=none", when="+cuda"' in base
    assert f'root_cmakelists_dir = "src/{name}"' in src
    assert os.path.isfile(os.path.join(ROOT, 'src', name, 'CMakeLists.txt'))


def test_bundle_covers_every_component_with_a_recipe():
    tree = ast.parse(recipe('umstudy'))
    comps = next(ast.literal_eval(n.value) for n in tree.body
                 if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == 'COMPONENTS')
    have = sorted(d.replace('_', '-') for d in os.listdir(os.path.join(REPO_DIR, 'packages'))
                  if d != 'umstudy' and not d.startswith('__'))
    assert sorted(comps) == have


spack_root = os.environ.get('SPACK_ROOT')
spack = spack_root and os.path.join(spack_root, 'bin', 'spack')
needs_spack = pytest.mark.skipif(
    not (spack and os.path.exists(spack)),
    reason='SPACK_ROOT is not set to a Spack installation: Spack checks skipped')


def run_spack(*args, scope=None, timeout=600):
    cmd = [spack]
    if scope:
        cmd += ['-C', scope]
    r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return r.returncode, r.stdout + r.stderr


@pytest.fixture(scope='module')
def scope(tmp_path_factory):
    d = tmp_path_factory.mktemp('scope')
    (d / 'repos.yaml').write_text(f'repos:\n  umstudy: {os.path.abspath(REPO_DIR)}\n')
    return str(d)


@needs_spack
def test_spack_audit_is_clean(scope):
    # every recipe of the repository, found, so a new component is audited too
    names = sorted(d.replace('_', '-') for d in os.listdir(os.path.join(REPO_DIR, 'packages'))
                   if not d.startswith('_'))
    rc, out = run_spack('audit', 'packages', *names, scope=scope)
    assert rc == 0, out


@needs_spack
def test_spack_concretises_the_bundle_and_the_local_environment(scope):
    rc, out = run_spack('spec', 'umstudy+cuda cuda_arch=90', scope=scope)
    assert rc == 0 and 'himeno@main+cuda' in out and 'umbench@main+cuda' in out and 'vcuda@main+cuda' in out, out
    rc, out = run_spack('spec', 'umstudy~cuda', scope=scope)
    # umbench is GPU programs only: a CPU-only bundle leaves it out.
    assert rc == 0 and 'himeno@main~cuda' in out and 'umbench' not in out and 'vcuda' not in out, out
    env = os.path.join(ROOT, 'systems', 'local')
    rc, out = run_spack('-e', env, 'concretize', '-f', timeout=900)
    assert rc == 0 and 'dev_path=' in out, out
    shutil.rmtree(os.path.join(env, '.spack-env'), ignore_errors=True)
