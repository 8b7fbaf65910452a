"""README's offline Spack sequence, run as it is written, from a fresh clone of this
repository, with a user scope of its own (a copy of the caller's, minus what the sequence
itself adds), so the caller's ~/.spack is left alone.  It then installs the pinned release
and runs every component's stand-alone tests.

The sequence has one step that needs the network, `make spack-offline` (it fetches what
Spack builds besides umstudy, compiler-wrapper, unless a configured mirror holds it):
where that step cannot reach the network the test skips, saying so.  Every other step
runs with the network cut (proxies pointing at a closed local port): any failure there,
a download included, fails the test.  Skipped, with the reason, without $SPACK_ROOT or
nvcc."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
MARKER = '<!-- offline-sequence -->'

spack_root = os.environ.get('SPACK_ROOT')
spack = spack_root and os.path.join(spack_root, 'bin', 'spack')


NETWORK_STEP = 'make spack-offline'
# Any proxy-aware download (Python's urllib, curl, git) fails at once.
NO_NETWORK = {name: 'http://127.0.0.1:9' for name in
              ('http_proxy', 'https_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'all_proxy', 'ALL_PROXY')}


def offline_sequence():
    """The shell block right after the marker in README.md."""
    text = open(os.path.join(ROOT, 'README.md')).read()
    assert MARKER in text, 'README.md lost its offline sequence marker'
    m = re.match(r'\s*```sh\n(.*?)\n```', text.split(MARKER, 1)[1], re.S)
    assert m, 'the marker must be followed by a ```sh block'
    return m.group(1)


def split_sequence(seq):
    """(the lines up to the one network step, inclusive; the offline rest)."""
    lines = seq.splitlines()
    at = [i for i, line in enumerate(lines) if line.split('#')[0].strip() == NETWORK_STEP]
    assert len(at) == 1, f'the sequence must have one `{NETWORK_STEP}` line: {seq}'
    return '\n'.join(lines[:at[0] + 1]), '\n'.join(lines[at[0] + 1:])


def test_the_sequence_names_its_one_network_step():
    """README says which step needs the network, and only that one does."""
    online, offline = split_sequence(offline_sequence())
    assert 'network' in online.splitlines()[-1], 'mark the network step in README with a comment'
    assert 'spack install' in offline and 'spack test run' in offline and 'network' not in offline


def test_readme_sequence_uses_only_untracked_scopes():
    """No documented step writes a tracked file: no `-e systems/...` scope writes, no
    editing under systems/ or spack-repo/."""
    seq = offline_sequence()
    for line in seq.splitlines():
        assert not re.search(r'(external|compiler) find.*-e|-e \S+ (external|compiler|config|mirror|repo)', line), line
        assert '>' not in line and 'sed ' not in line, f'the sequence edits a file: {line}'
    assert 'spack install umstudy@' in seq and 'spack test run umstudy@' in seq
    assert 'make spack-offline' in seq and 'spack mirror add' in seq


def user_scope(dest):
    """A copy of the caller's user scope (where `builtin` and the mirrors Spack has are
    configured), without what the sequence adds, so it adds it again."""
    src = os.environ.get('SPACK_USER_CONFIG_PATH') or os.path.expanduser('~/.spack')
    os.makedirs(dest)
    for name in ('repos.yaml', 'mirrors.yaml', 'config.yaml', 'bootstrap.yaml', 'concretizer.yaml'):
        path = os.path.join(src, name)
        if not os.path.isfile(path):
            continue
        data = yaml.safe_load(open(path)) or {}
        added = {'repos.yaml': 'umstudy', 'mirrors.yaml': 'umstudy-offline'}.get(name)
        if added and isinstance(data.get(name[:-5]), dict):
            data[name[:-5]].pop(added, None)
        with open(os.path.join(dest, name), 'w') as f:
            yaml.safe_dump(data, f)


@pytest.mark.skipif(not (spack and os.path.exists(spack)),
                    reason='SPACK_ROOT is not set to a Spack installation: the offline sequence is not run')
def test_readme_offline_sequence_installs_and_tests_the_release(tmp_path):
    if not shutil.which('nvcc'):
        pytest.skip('no nvcc on PATH: the sequence installs umstudy +cuda')
    clone = tmp_path / 'clone'
    subprocess.run(['git', 'clone', '-q', ROOT, str(clone)], check=True)
    user_scope(str(tmp_path / 'user-scope'))
    env = dict(os.environ, SPACK_USER_CONFIG_PATH=str(tmp_path / 'user-scope'),
               PATH=os.path.join(spack_root, 'bin') + os.pathsep + os.environ['PATH'])
    online, offline = split_sequence(offline_sequence())
    r = subprocess.run(['bash', '-c', 'set -e -x\n' + online + '\n'], cwd=clone, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=3600)
    missing = sorted(set(re.findall(r'Error while fetching (\S+)', r.stdout)))
    if r.returncode != 0 and missing and re.search(r'Name or service not known|Network is unreachable|'
                                                   r'Could not resolve host|Temporary failure in name resolution',
                                                   r.stdout):
        pytest.skip(f"`{NETWORK_STEP}`, the sequence's one network step, could not fetch "
                    f"{', '.join(missing)}: no network here and no configured mirror holds it")
    assert r.returncode == 0, r.stdout[-6000:]
    r = subprocess.run(['bash', '-c', 'set -e -x\n' + offline + '\n'], cwd=clone, env=dict(env, **NO_NETWORK),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600)
    out = r.stdout
    assert r.returncode == 0, out[-6000:]
    # every installed umstudy (this one, and others already in the install tree) passes
    assert re.search(r'(\d+) passed of \1 specs?\b', out) and 'failed' not in out.split('spack test run')[-1], \
        out[-4000:]
    r = subprocess.run([spack, 'find', '-v', 'umstudy@0.1.0'], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and 'umstudy@0.1.0+cuda' in r.stdout, r.stdout + r.stderr
