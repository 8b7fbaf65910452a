"""What `make run` shows (umstudy.runview) and the choices the configuration reads once
(umstudy.jobs: the size, the programming environments a check runs under)."""
import io
import json

import pytest

from umstudy import jobs, runview


def test_progress_counts_finished_cases_and_leaves_the_label():
    lines = ['[ReFrame Setup]\n', '[ RUN      ] HimenoCpuPerf /1 @local:default+gnu\n',
             '[       OK ] ( 1/3) HimenoCpuPerf /1 @local:default+gnu\n',
             '[     SKIP ] ( 2/3) UmbModes /2 @local:default+gnu\n',
             '[     FAIL ] ( 3/3) DlmStream /3 @local:default+gnu\n', '[  FAILED  ] Ran 3/3 test case(s)\n']
    out = io.StringIO()
    assert runview.progress(lines, out, 'run', tty=False) == 3
    assert out.getvalue() == runview.label('run')            # nothing of ReFrame's own output
    out = io.StringIO()
    runview.progress(lines, out, 'run', tty=True)
    assert '3/3 cases' in out.getvalue() and out.getvalue().endswith('\r' + runview.label('run'))


def case(name, result, phase=None):
    return {'display_name': name, 'result': result, 'fail_phase': phase}


def test_summary_counts_missed_references_apart_from_failures():
    report = {'runs': [{'testcases': [case('HimenoCpuPerf', 'pass'), case('DlmStream %x=1', 'fail', 'performance'),
                                      case('UmbModes', 'skip'), case('CabIs %r=2', 'fail', 'sanity')]}]}
    line = runview.summary(report, 12.4)
    assert line.startswith('1 passed, 1 missed a performance reference (measurements: the report judges them), '
                           '1 skipped, 1 failed (CabIs)'), line
    assert line.endswith('4 cases in 12 s')
    clean = runview.summary({'runs': [{'testcases': [case('A', 'pass')]}]}, 1)
    assert 'failed' not in clean and 'missed' not in clean


def test_verdicts_line_is_the_reports_counts(tmp_path):
    path = tmp_path / 'verdicts.json'
    path.write_text(json.dumps({'counts': {'reproduced': 2, 'not reproduced': 0, 'not run': 5}}))
    assert runview.verdicts(str(path)) == '2 reproduced, 5 not run'


def test_size_from_the_environment():
    assert jobs.size_from_env({}) == 'quick'
    assert jobs.size_from_env({'SIZE': 'paper'}) == 'paper'
    assert jobs.size_from_env({'SIZE': 'paper', 'UMSTUDY_SIZE': 'quick'}) == 'quick'
    for env in ({'SIZE': 'papr'}, {'UMSTUDY_SIZE': 'big'}):
        with pytest.raises(ValueError, match='is not a size'):
            jobs.size_from_env(env)


def test_one_environment_per_check_by_default():
    feats = {'gnu': ['openmp', 'cuda'], 'pgi': ['openmp', 'cuda', 'openacc']}
    run, acc = jobs.RUN_ENV, jobs.RUN_ACC
    assert jobs.run_environs(['gnu', 'pgi'], feats) == {'gnu': [run], 'pgi': [acc]}
    assert jobs.run_environs(['gnu', 'pgi'], feats, 'all') == {'gnu': [run], 'pgi': [run, acc]}
    assert jobs.run_environs(['gnu', 'pgi'], feats, 'pgi') == {'gnu': [], 'pgi': [run, acc]}
    # a detected machine (no environment says openacc): its one environment does both
    assert jobs.run_environs(['gnu'], {'gnu': ['openmp']}) == {'gnu': [run, acc]}
    desc = {'partitions': [{'environs': ['gnu', 'pgi']}]}
    assert jobs.unknown_environs('pgi,nvhpc', desc) == ['nvhpc'] and jobs.unknown_environs('all', desc) == []
    assert jobs.environs_request({}, ['reframe', '-p', 'pgi']) == 'all'
    assert jobs.environs_request({}, ['reframe', '-r']) == ''
