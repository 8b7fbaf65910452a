"""The Spack recipes: static checks always; audit and concretisation with a real Spack.

The Spack part runs when SPACK_ROOT points at a Spack >= 1.0 whose `builtin` repository
is usable offline (see README, "Spack"); otherwise it is skipped with the reason."""
import ast
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile

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
    """Every cache variable the component's CMake (its tests' too, and the shared module)
    defines."""
    text = ''.join(open(os.path.join(ROOT, 'src', component, f)).read()
                   for f in ('CMakeLists.txt', 'tests/CMakeLists.txt')
                   if os.path.isfile(os.path.join(ROOT, 'src', component, f)))
    names = set(re.findall(r'set\((\w+) [^)]*CACHE', text)) | set(re.findall(r'find_program\((\w+)', text))
    names |= {f'XMPC_{b}' for b in re.findall(r'foreach\(_b ([A-Z0-9 ]+)\)', text)[0].split()} \
        if 'foreach(_b ' in text else set()
    return names | cmake_options() | {'CMAKE_CUDA_ARCHITECTURES', 'CMAKE_CUDA_COMPILER', 'CUDAToolkit_ROOT',
                                      'BUILD_TESTING', 'Python3_EXECUTABLE'}


COMPONENTS = ['himeno', 'umbench', 'xmp-coarray', 'coarray-bench', 'vcuda', 'remd', 'dlm']


@pytest.mark.parametrize('name', COMPONENTS)
def test_component_variants_map_to_cmake_options(name):
    src, base = recipe(name), base_recipe()
    ast.parse(src)
    ast.parse(base)
    names = cmake_cache_names(name)
    for opt in re.findall(r'self\.define(?:_from_variant)?\(\s*f?"([^"]+)"', src + base):
        # an f-string name (UMSTUDY_{feature.upper()}) must match at least one option
        pattern = re.sub(r'\{[^}]*\}', r'\\w+', opt)
        assert any(re.fullmatch(pattern, n) for n in names), f'{opt} is not a CMake option of src/{name}'
    assert re.search(r'class \w+\((Umstudy(Gpu|Cuda|Openmp)?Component)', src)
    assert re.search(r'conflicts\(\s*"cuda_arch=none",\s*when="\+cuda"', base)
    assert f'root_cmakelists_dir = "src/{name}"' in src
    assert os.path.isfile(os.path.join(ROOT, 'src', name, 'CMakeLists.txt'))


def auto_options(name):
    """The component's options that default to AUTO (detect what is on the build machine)."""
    text = open(os.path.join(ROOT, 'src', name, 'CMakeLists.txt')).read()
    opts = set(re.findall(r'set\((\w+) "AUTO" CACHE', text))
    if 'foreach(_b ' in text and 'set(XMPC_${_b} "AUTO"' in text:
        opts |= {f'XMPC_{b}' for b in re.findall(r'foreach\(_b ([A-Z0-9 ]+)\)', text)[0].split()}
    return opts


@pytest.mark.parametrize('name', COMPONENTS)
def test_spack_builds_leave_nothing_to_auto_detection(name):
    """Every AUTO option (the shared UMSTUDY_* ones and the component's own) is passed
    ON/OFF by the recipe, so a Spack build never picks up whatever the build machine has."""
    src, base = recipe(name), base_recipe()
    common = set(re.findall(r'set\((UMSTUDY_\w+) "AUTO" CACHE',
                            open(os.path.join(ROOT, 'src', 'cmake', 'UmstudyCommon.cmake')).read()))
    features = re.search(r'FEATURES = \(([^)]*)\)', base).group(1)
    passed = {f'UMSTUDY_{f.upper()}' for f in re.findall(r'"(\w+)"', features)}
    passed |= set(re.findall(r'self\.define(?:_from_variant)?\(\s*"([A-Z0-9_]+)"', src))
    missing = (common | auto_options(name)) - passed
    assert not missing, f'{name}: the recipe leaves {sorted(missing)} to AUTO'


@pytest.mark.parametrize('name', COMPONENTS)
def test_every_component_has_stand_alone_tests(name):
    tree = ast.parse(recipe(name))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    tests = [f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name.startswith('test_')]
    assert tests and all(ast.get_docstring(f) for f in tests), f'{name}: test_* methods with docstrings'
    # the installed files are checked right after the install by Spack's own sanity check
    # (installed_files -> sanity_check_is_file), never by a bare assert in a callback
    assert any(isinstance(f, ast.FunctionDef) and f.name == 'installed_files' for f in cls.body), name
    for f in cls.body:
        if isinstance(f, ast.FunctionDef) and any('run_after' in ast.unparse(d) for d in f.decorator_list):
            assert not any(isinstance(n, ast.Assert) for n in ast.walk(f)), f'{name}.{f.name}: a bare assert after install'


def test_post_install_check_is_spacks_sanity_check():
    base = base_recipe()
    assert 'def sanity_check_is_file(self)' in base and 'return self.installed_files()' in base


@pytest.mark.parametrize('name', COMPONENTS)
def test_no_program_is_left_to_the_build_machines_path(name):
    """A program the component's CMake looks for (find_program: OpenCoarrays' caf) is
    named by the recipe, from a variant, so a `caf` on the build machine's PATH changes
    nothing."""
    text = open(os.path.join(ROOT, 'src', name, 'CMakeLists.txt')).read()
    found = set(re.findall(r'^find_program\((\w+)', text, re.M))
    defined = set(re.findall(r'self\.define\(\s*"([A-Z0-9_]+)"', recipe(name)))
    assert found <= defined, f'{name}: {sorted(found - defined)} left to the PATH'


def test_recipes_pin_the_release_and_no_fake_maintainer():
    base = base_recipe()
    version, sha256 = re.search(r'^RELEASE = \("([^"]+)", "([0-9a-f]{64})"\)$', base, re.M).groups()
    assert 'version(RELEASE[0], sha256=RELEASE[1]' in base and 'version("main", branch="main")' in base
    assert re.search(rf'project\(umstudy [^)]*VERSION {re.escape(version)}\)',
                     open(os.path.join(ROOT, 'src', 'CMakeLists.txt')).read()), 'src/CMakeLists.txt: same version'
    for name in COMPONENTS + ['umstudy']:
        assert 'maintainers(' not in recipe(name)
    assert 'maintainers(' not in base


def test_license_file_is_apache_2():
    text = open(os.path.join(ROOT, 'LICENSE')).read()
    assert 'Apache License' in text and 'Version 2.0, January 2004' in text
    assert 'END OF TERMS AND CONDITIONS' in text and len(text.splitlines()) > 190
    assert 'license("Apache-2.0")' in base_recipe()


def test_release_tarball_is_reproducible_and_pinned(tmp_path):
    """`make dist` twice gives the same bytes, holding src/ and LICENSE; the recipes pin its
    sha256 (after a change to src/, `make spack-pin`)."""
    dist = os.path.join(ROOT, 'spack-repo', 'dist.py')
    shas = []
    for d in ('a', 'b'):
        r = subprocess.run([sys.executable, dist, '--out', str(tmp_path / d)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        shas.append(r.stdout.split()[0])
    assert shas[0] == shas[1]
    version = re.search(r'^RELEASE = \("([^"]+)"', base_recipe(), re.M).group(1)
    path = tmp_path / 'a' / f'umstudy-{version}.tar.gz'
    assert hashlib.sha256(path.read_bytes()).hexdigest() == shas[0]
    with tarfile.open(path) as tar:
        names = tar.getnames()
        assert all(n.startswith(f'umstudy-{version}/') for n in names)
        assert f'umstudy-{version}/LICENSE' in names and f'umstudy-{version}/src/CMakeLists.txt' in names
        assert {m.mtime for m in tar.getmembers()} == {1767225600} and {m.uid for m in tar.getmembers()} == {0}
    r = subprocess.run([sys.executable, dist, '--check'], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_release_goes_into_a_spack_1x_mirror(tmp_path):
    dist = os.path.join(ROOT, 'spack-repo', 'dist.py')
    r = subprocess.run([sys.executable, dist, '--out', str(tmp_path / 'd'), '--mirror', str(tmp_path / 'm')],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    sha = r.stdout.split()[0]
    archive = tmp_path / 'm' / '_source-cache' / 'archive' / sha[:2] / f'{sha}.tar.gz'
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == sha
    for name in COMPONENTS:
        assert (tmp_path / 'm' / name).is_dir() and os.path.samefile(next((tmp_path / 'm' / name).iterdir()), archive)


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
    (d / 'packages.yaml').write_text('packages:\n  all:\n    variants: cuda_arch=90\n')
    return str(d)


@needs_spack
def test_spack_audit_is_clean(scope):
    # every recipe of the repository, found, so a new component is audited too
    names = sorted(d.replace('_', '-') for d in os.listdir(os.path.join(REPO_DIR, 'packages'))
                   if not d.startswith('_'))
    rc, out = run_spack('audit', 'packages', *names, scope=scope)
    assert rc == 0, out


@pytest.fixture(scope='module')
def scope_without_cuda_arch(tmp_path_factory):
    d = tmp_path_factory.mktemp('noarch')
    (d / 'repos.yaml').write_text(f'repos:\n  umstudy: {os.path.abspath(REPO_DIR)}\n')
    return str(d)


@needs_spack
@pytest.mark.parametrize('spec', ['umstudy', 'umbench', 'himeno+cuda'])
def test_no_gpu_architecture_is_refused_with_the_way_out(spec, scope_without_cuda_arch):
    """Without cuda_arch the bundle is refused (its +cuda is sticky: the concretizer may
    not fall back to the CPU programs by itself), naming both ways on."""
    rc, out = run_spack('spec', spec, scope=scope_without_cuda_arch)
    assert rc != 0 and 'need the GPU architecture' in out and 'cuda_arch=90' in out and \
        'umstudy~cuda' in out, out
    rc, out = run_spack('spec', 'umstudy~cuda', scope=scope_without_cuda_arch)
    assert rc == 0 and 'umstudy@0.1.0~cuda' in out, out


@needs_spack
def test_openacc_without_an_openacc_compiler_is_the_recipes_message(scope):
    rc, out = run_spack('spec', 'himeno+openacc', scope=scope)
    if rc == 0:
        assert re.search(r'himeno@\S+\+openacc.*%c,cxx=(nvhpc|gcc@\S+)', out) and '~nvptx' not in out, out
        pytest.skip('this Spack knows an OpenACC compiler (nvhpc or gcc+nvptx): nothing to refuse')
    assert '+openacc needs an OpenACC compiler' in out and 'Only external' not in out, out


@needs_spack
def test_spack_style_is_clean():
    """`spack style` (import, isort, black, flake8) on every recipe; mypy is left out: it
    checks Spack's own sources too, against whatever mypy is installed."""
    tools = [t for t in ('black', 'isort', 'flake8') if not shutil.which(t)]
    if tools:
        pytest.skip(f'spack style needs {", ".join(tools)} on PATH (pip install "black<=25.1" "isort<6" flake8); '
                    'without them it bootstraps them from the network')
    files = sorted(os.path.relpath(os.path.join(d, f), ROOT) for d, _, fs in os.walk(REPO_DIR)
                   for f in fs if f.endswith('.py'))
    rc, out = run_spack('style', '-s', 'mypy', *files)
    assert rc == 0 and 'spack style checks were clean' in out, out


@needs_spack
def test_spack_concretises_the_bundle_and_the_local_environment(scope):
    rc, out = run_spack('spec', 'umstudy+cuda', scope=scope)
    for c in COMPONENTS:
        assert rc == 0 and re.search(rf'\^{c}@0\.1\.0', out), out
    assert 'himeno@0.1.0+cuda' in out and 'cuda_arch:=90' in out and 'vcuda@0.1.0+cuda~ipo~ucx' in out, out
    # coarray-bench uses xmp-coarray's installed runtime
    assert re.search(r'\^coarray-bench@\S+[^\n]*\n(\s.*\n)*?\s+\^xmp-coarray@', out) or 'xmp-coarray' in out
    rc, out = run_spack('spec', 'umstudy~cuda', scope=scope)
    # umbench and vcuda are GPU programs: a CPU-only bundle leaves them out.
    assert rc == 0 and 'himeno@0.1.0~cuda' in out and 'umbench' not in out and 'vcuda' not in out, out
    # the bundle is +cuda unless told otherwise, every component in it
    rc, out = run_spack('spec', 'umstudy', scope=scope)
    assert rc == 0 and 'umstudy@0.1.0+cuda+mpi' in out and all(f'^{c}@0.1.0' in out for c in COMPONENTS), out
    # coarray-bench: the OpenCoarrays peer only on request
    assert '^coarray-bench@0.1.0~caf' in out, out
    # ~mpi: no MPI anywhere in the bundle (umbench without its halo stencil)
    rc, out = run_spack('spec', 'umstudy~mpi', scope=scope)
    assert rc == 0 and re.search(r'\^umbench@0\.1\.0\+cuda\S*~mpi', out), out
    assert not re.search(r'\^(openmpi|mpich|mvapich|intel-oneapi-mpi)@|\^mpi\b', out), out
    env = os.path.join(ROOT, 'systems', 'local')
    rc, out = run_spack('-e', env, 'concretize', '-f', timeout=900)
    assert rc == 0 and 'dev_path=' in out, out
    shutil.rmtree(os.path.join(env, '.spack-env'), ignore_errors=True)
