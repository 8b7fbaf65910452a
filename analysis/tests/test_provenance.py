"""analysis/provenance.py: the bundle, its one hash, and missing tools recorded, not fatal."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
import provenance  # noqa: E402

SCRIPT = os.path.join(HERE, '..', 'provenance.py')


def report(tmp_path):
    path = tmp_path / 'local-quick-T.json'
    path.write_text(json.dumps({'session_info': {'cmdline': 'reframe -r'}, 'runs': []}))
    return str(path)


def run(*args, env=None):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env)


def test_bundle_hash_covers_every_file(tmp_path):
    rep = report(tmp_path)
    r = run('--report', rep, '--out', str(tmp_path / 'b'))
    assert r.returncode == 0, r.stderr
    side = json.load(open(provenance.sidecar(rep)))
    bundle = side['bundle']
    assert json.loads(r.stdout)['sha256'] == side['sha256'] == provenance.verify(bundle)
    names = set(os.listdir(bundle))
    assert {'run-report.json', 'MANIFEST.json', 'SHA256SUMS', 'git-describe.txt', 'spack.yaml'} <= names
    manifest = json.load(open(os.path.join(bundle, 'MANIFEST.json')))
    in_git = subprocess.run(['git', '-C', provenance.ROOT, 'rev-parse'], capture_output=True).returncode == 0
    # a checkout records its commit; a tarball of it records why not, and still bundles
    assert (manifest['items']['git-describe']['status'] == 'ok') == in_git
    # one changed byte anywhere changes the verdict
    with open(os.path.join(bundle, 'run-report.json'), 'a') as f:
        f.write(' ')
    assert run('--verify', bundle).returncode == 1


def test_missing_tools_are_recorded_not_fatal(tmp_path):
    rep = report(tmp_path)
    empty = tmp_path / 'empty-path'
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty))
    r = run('--report', rep, '--out', str(tmp_path / 'b'), env=env)
    assert r.returncode == 0, r.stderr
    items = json.load(open(tmp_path / 'b' / 'MANIFEST.json'))['items']
    for name in ('nvidia-smi-q', 'ompi-info', 'gcc-version', 'git-describe', 'spack-find'):
        assert items[name]['status'].startswith('missing'), (name, items[name])
    assert 'nvidia-smi-q' in json.load(open(provenance.sidecar(rep)))['not_recorded']
    assert provenance.verify(str(tmp_path / 'b'))


def test_bad_input_is_a_usage_error(tmp_path):
    r = run('--report', str(tmp_path / 'nope.json'))
    assert r.returncode == 2 and r.stdout == '' and 'no such run report' in r.stderr
    r = run('--report', report(tmp_path), '--system', 'nowhere')
    assert r.returncode == 2 and r.stdout == ''
