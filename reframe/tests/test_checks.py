"""The shared check logic through a real ReFrame run: an 'unsupported' program (exit 77
with a reason) becomes a skip carrying that reason; an error line fails sanity."""
import json
import os
import subprocess
import sys
import textwrap

from umstudy import data

RFM_MAIN = 'import sys; sys.argv[0] = "reframe"; from reframe.frontend.cli import main; main()'

PROGRAM = """#!/bin/sh
case "$1" in
  unsupported) echo '{"bench":"fake","status":"unsupported","reason":"no widget here"}'; exit 77;;
  error) echo '{"bench":"fake","status":"error","reason":"boom"}'; exit 0;;
  *) echo '{"bench":"fake","metric":"x","value":1,"unit":"1","params":{}}'; exit 0;;
esac
"""

CHECK = textwrap.dedent('''
    import os, sys
    import reframe as rfm
    from reframe.core.builtins import parameter, run_after
    sys.path.insert(0, {lib!r})
    from umstudy.checks import UmstudyRunBase

    @rfm.simple_test
    class FakeProgram(UmstudyRunBase):
        valid_systems = ['*']
        bench = 'fake'
        component = 'none'
        outcome = parameter(['unsupported', 'error', 'ok'])
        executable = {program!r}

        @run_after('setup')
        def set_opts(self):
            self.executable_opts = [self.outcome]
''')


def test_unsupported_skips_with_reason_and_errors_fail(tmp_path):
    check = tmp_path / 'fake_check.py'
    program = tmp_path / 'fake.sh'
    program.write_text(PROGRAM)
    program.chmod(0o755)
    check.write_text(CHECK.format(lib=os.path.join(data.REPO, 'reframe', 'lib'), program=str(program)))
    report = tmp_path / 'report.json'
    env = dict(os.environ, UMSTUDY_OUTPUT=str(tmp_path / 'out'))
    r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-C',
                        os.path.join(data.REPO, 'reframe', 'config', 'umstudy.py'),
                        '-c', str(check), '--system', 'local', '-r', f'--report-file={report}'],
                       capture_output=True, text=True, env=env, timeout=300)
    results = {tc['outcome']: tc for run in json.loads(report.read_text())['runs']
               for tc in run['testcases']}
    assert results['unsupported']['result'] == 'skip', r.stdout
    assert results['unsupported']['skip_reason'] == 'no widget here'
    assert results['error']['result'] == 'fail'
    assert results['ok']['result'] == 'pass'
    assert r.returncode != 0  # one check failed, so ReFrame says so


RANKS = """#!/bin/sh
# one result line (from the first rank) and the setting every rank must see
echo "{\\"bench\\":\\"fake\\",\\"rank_saw\\":\\"${FAKE_SETTING:-unset}\\"}"
[ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] && echo '{"bench":"fake","metric":"x","value":1,"unit":"1","params":{}}'
exit 0
"""

MULTI_RANK_CHECK = textwrap.dedent('''
    import os, sys
    import reframe as rfm
    from reframe.core.builtins import parameter, run_after, run_before
    sys.path.insert(0, {lib!r})
    from umstudy.checks import UmstudyRunBase, mpirun_on_local

    @rfm.simple_test
    class FakeRanks(UmstudyRunBase):
        valid_systems = ['*']
        bench = 'fake'
        component = 'none'
        per_node = parameter([2, 1])
        executable = {program!r}

        @run_after('setup')
        def two_ranks(self):
            self.num_tasks = 2
            self.num_tasks_per_node = self.per_node
            self.env_vars = {{'FAKE_SETTING': 'on'}}

        @run_before('run')
        def through_mpirun(self):
            mpirun_on_local(self)
''')


def test_every_rank_says_where_it_ran_and_a_wrong_layout_is_a_placement_failure(tmp_path):
    """Two ranks through mpirun on this machine: asked for on one node they pass, with
    both ranks' host recorded; asked for on two nodes (one rank per node) the same run is
    a placement failure with the reason, not a measurement."""
    import shutil
    import pytest
    if not shutil.which('mpirun'):
        pytest.skip('no mpirun on this machine: the ranks cannot be started')
    check = tmp_path / 'ranks_check.py'
    program = tmp_path / 'ranks.sh'
    program.write_text(RANKS)
    program.chmod(0o755)
    check.write_text(MULTI_RANK_CHECK.format(lib=os.path.join(data.REPO, 'reframe', 'lib'), program=str(program)))
    report = tmp_path / 'report.json'
    env = dict(os.environ, UMSTUDY_OUTPUT=str(tmp_path / 'out'))
    r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-C',
                        os.path.join(data.REPO, 'reframe', 'config', 'umstudy.py'),
                        '-c', str(check), '--system', 'local', '-r', f'--report-file={report}'],
                       capture_output=True, text=True, env=env, timeout=300)
    results = {str(tc['per_node']): tc for run in json.loads(report.read_text())['runs'] for tc in run['testcases']}
    one_node, two_nodes = results['2'], results['1']
    assert one_node['result'] == 'pass', r.stdout[-3000:]
    assert one_node['layout'] == {'nodes': 1, 'per_node': 2} and one_node['placement_failure'] == ''
    hosts = one_node['rank_hosts']
    assert sorted(h['rank'] for h in hosts) == [0, 1] and len({h['host'] for h in hosts}) == 1, hosts
    assert two_nodes['result'] == 'fail' and two_nodes['fail_phase'] == 'sanity', r.stdout[-3000:]
    assert two_nodes['layout'] == {'nodes': 2, 'per_node': 1}
    assert 'the layout needs 2' in two_nodes['placement_failure']
    assert 'placement failure' in two_nodes['fail_reason']
    out = open(os.path.join(one_node['outputdir'], 'rfm_job.out')).read()
    assert out.count('"rank_saw":"on"') == 2, out   # the check's setting reached both ranks
