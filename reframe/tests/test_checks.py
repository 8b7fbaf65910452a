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
