"""The Apptainer definitions, validated without Apptainer: structure, shell syntax, every
path they take from the checkout exists, the build stage makes what the final stage
copies, and (with $SPACK_ROOT) the images' Spack environments are valid and the x86_64
one concretises here."""
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CONTAINERS = os.path.abspath(os.path.join(HERE, '..'))
ROOT = os.path.dirname(CONTAINERS)
sys.path.insert(0, CONTAINERS)
import generate  # noqa: E402

SECTIONS = {'arguments', 'setup', 'files', 'post', 'environment', 'runscript', 'test', 'labels',
            'help', 'startscript'}
HEADER = {'Bootstrap', 'From', 'Stage'}
IMAGES = sorted(generate.images())


def parse(path):
    """[{header: {...}, sections: {name: (argument, body)}}] per stage."""
    stages, section = [], None
    for line in open(path):
        line = line.rstrip('\n')
        if not line.strip() or line.startswith('#') and section is None:
            continue
        m = re.match(r'^(\w+):\s*(.*)$', line)
        if m and m.group(1) in HEADER:
            if m.group(1) == 'Bootstrap':
                stages.append({'header': {}, 'sections': {}})
                section = None
            stages[-1]['header'][m.group(1)] = m.group(2)
            continue
        m = re.match(r'^%(\w+)\s*(.*)$', line)
        if m:
            section = m.group(1)
            assert section in SECTIONS, f'{path}: unknown section %{section}'
            stages[-1]['sections'][section] = (m.group(2), [])
            continue
        assert section is not None, f'{path}: text outside a section: {line!r}'
        stages[-1]['sections'][section][1].append(line)
    return stages


def test_generated_files_are_current():
    assert generate.main(['--check']) == 0, 'run: python3 containers/generate.py'


def test_an_image_with_everything_exists_and_sites_without_one_say_why():
    assert 'umstudy' in IMAGES
    for system, reason in generate.skipped().items():
        assert len(reason) > 20, system
    covered = {s for s, _ in generate.images().values()} | set(generate.skipped())
    assert covered == set(generate.spackenv.with_spack())


@pytest.mark.parametrize('image', IMAGES)
def test_definition_structure_and_paths(image):
    path = os.path.join(CONTAINERS, f'{image}.def')
    build, final = parse(path)
    assert build['header']['Stage'] == 'build' and final['header']['Stage'] == 'final'
    for stage in (build, final):
        assert stage['header']['Bootstrap'] == 'docker'
        assert re.fullmatch(r'nvidia/cuda:\d+\.\d+\.\d+-devel-[a-z]+\d+(\.\d+)?', stage['header']['From'])
    # everything %files takes from the build context (the repository root) exists
    copied = []
    for line in build['sections']['files'][1]:
        src, dest = line.split()
        assert os.path.exists(os.path.join(ROOT, src)), f'{image}.def copies missing {src}'
        copied.append(dest)
    # the final stage copies only what the build stage made
    arg, lines = final['sections']['files']
    assert arg == 'from build'
    post = '\n'.join(build['sections']['post'][1])
    env_yaml = open(os.path.join(CONTAINERS, 'envs', image, 'spack.yaml')).read()
    for line in lines:
        src = line.split()[0]
        assert src in copied or src in post or src in env_yaml or \
            any(c.startswith(src + '/') for c in copied), f'{src} is not made by the build stage'
    # every checkout path the scripts use exists (or is written by them)
    script = '\n'.join(l for s in (build, final) for n in ('post', 'test', 'environment')
                       if n in s['sections'] for l in s['sections'][n][1])
    for rel in re.findall(generate.PREFIX + r'/([\w./-]+)', script):
        if rel.startswith('.venv') or rel.endswith('container-externals.yaml'):
            continue  # made by the script itself
        assert os.path.exists(os.path.join(ROOT, rel)), f'{image}.def uses missing {rel}'
    # {{ VAR }} placeholders are all declared in %arguments
    declared = {l.split('=', 1)[0].strip() for l in build['sections']['arguments'][1] if '=' in l}
    assert set(re.findall(r'\{\{\s*(\w+)\s*\}\}', script)) <= declared
    assert 'make run' in '\n'.join(final['sections']['test'][1]), '%test runs the quick suite'


@pytest.mark.parametrize('image', IMAGES)
def test_scripts_are_valid_shell(image):
    for stage in parse(os.path.join(CONTAINERS, f'{image}.def')):
        for name in ('post', 'test', 'environment', 'runscript'):
            if name in stage['sections']:
                body = re.sub(r'\{\{\s*(\w+)\s*\}\}', r'\1', '\n'.join(stage['sections'][name][1]))
                r = subprocess.run(['bash', '-n'], input=body, capture_output=True, text=True)
                assert r.returncode == 0, f'{image} %{name}: {r.stderr}'


spack_root = os.environ.get('SPACK_ROOT')
spack = spack_root and os.path.join(spack_root, 'bin', 'spack')
needs_spack = pytest.mark.skipif(
    not (spack and os.path.exists(spack)),
    reason='SPACK_ROOT is not set to a Spack installation: Spack checks skipped')


@pytest.fixture
def image_env(request):
    """The image's environment with this machine's Open MPI standing in for the image's
    (the file the build stage writes), removed afterwards."""
    d = os.path.join(CONTAINERS, 'envs', request.param)
    ext = os.path.join(d, 'container-externals.yaml')
    version = re.search(r'v(\d+\.\d+\.\d+)', subprocess.run(['ompi_info', '--version'], capture_output=True,
                                                            text=True).stdout) if shutil.which('ompi_info') else None
    if not version:
        pytest.skip('no Open MPI (ompi_info) on this machine to stand in for the image\'s')
    with open(ext, 'w') as f:
        f.write(f'packages:\n  openmpi:\n    buildable: false\n    externals:\n'
                f'    - spec: openmpi@{version.group(1)}\n      prefix: /usr\n')
    yield d
    os.remove(ext)
    shutil.rmtree(os.path.join(d, '.spack-env'), ignore_errors=True)
    if os.path.exists(os.path.join(d, 'spack.lock')):
        os.remove(os.path.join(d, 'spack.lock'))


@needs_spack
@pytest.mark.parametrize('image_env', IMAGES, indirect=True)
def test_spack_accepts_the_image_environment(image_env):
    r = subprocess.run([spack, '-e', image_env, 'config', 'get', 'packages'],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


@needs_spack
@pytest.mark.parametrize('image_env', ['umstudy'], indirect=True)
def test_spack_concretises_the_image_with_everything(image_env):
    r = subprocess.run([spack, '-e', image_env, 'concretize', '-f'],
                       capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    for component in generate.spackenv.components():
        assert re.search(rf'\b{re.escape(component)}@main\S*.*dev_path=', out), component
