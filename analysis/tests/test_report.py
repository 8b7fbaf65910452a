"""analysis/report.py on synthetic ReFrame reports: each verdict path is exercised."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
import report  # noqa: E402


def case(name, system='miyabi', result='pass', perf=None, reason='', features=None, facts=None,
         size='quick'):
    return {
        'size': size,
        'name': name, 'system': system, 'partition': 'gpu', 'result': result,
        'fixture': False, 'fail_reason': reason if result == 'fail' else None,
        'skip_reason': reason if result == 'skip' else '',
        'perfvalues': {f'{system}:gpu:{k}': [v, 0, None, None, 'x', 'pass']
                       for k, v in (perf or {}).items()},
        'partition_info': {'features': features or ['cpu', 'gpu', 'cuda', 'sam', 'um'],
                           'facts': facts if facts is not None else {'gpu': {'mem_bw_gbps': 4000}}},
    }


def write_report(tmp_path, cases):
    path = tmp_path / 'run.json'
    path.write_text(json.dumps({'session_info': {}, 'runs': [{'testcases': cases}]}))
    return str(path)


def rows_by_id(tmp_path, cases, system='miyabi'):
    loaded = report.load_cases([write_report(tmp_path, cases)])
    return {r['id']: r for r in report.verdicts(loaded) if r['system'] == system}


def test_difference_claim_reproduced_and_not(tmp_path):
    good = [case('HimenoCudaPerf %alloc=explicit', perf={'gflops': 1500}),
            case('HimenoCudaPerf %alloc=managed', perf={'gflops': 1480}),
            case('HimenoCudaPerf %alloc=system', perf={'gflops': 1400})]
    row = rows_by_id(tmp_path, good)['P001-C8']
    assert row['verdict'] == report.REPRODUCED
    assert row['measured'] == {'explicit_minus_system': 100, 'managed_minus_system': 80}
    bad = [dict(c) for c in good]
    bad[2] = case('HimenoCudaPerf %alloc=system', perf={'gflops': 900})
    assert rows_by_id(tmp_path, bad)['P001-C8']['verdict'] == report.NOT_REPRODUCED


def test_skip_reason_makes_not_applicable(tmp_path):
    cases = [case('HimenoCudaPerf %alloc=explicit', perf={'gflops': 1500}),
             case('HimenoCudaPerf %alloc=managed', perf={'gflops': 1480}),
             case('HimenoCudaPerf %alloc=system', result='skip', reason='no HMM')]
    row = rows_by_id(tmp_path, cases)['P001-C8']
    assert row['verdict'] == report.NOT_APPLICABLE and 'no HMM' in row['reason']


def test_feature_rule_and_failed_case(tmp_path):
    cases = [case('HimenoCudaPerf %alloc=explicit', system='local', features=['cpu'],
                  result='fail', reason='boom')]
    rows = rows_by_id(tmp_path, cases, system='local')
    assert rows['P001-C8']['verdict'] == report.NOT_APPLICABLE
    assert rows['HIM-T1']['verdict'] == report.NOT_APPLICABLE  # needs gpu
    cases = [case('HimenoCudaPerf %alloc=explicit', result='fail', reason='boom')]
    assert rows_by_id(tmp_path, cases)['HIM-T1']['verdict'] == report.NOT_REPRODUCED


def test_bound_from_facts(tmp_path):
    # HIM-T2: 0.75 * 34 * 4000 * 0.85 / 56 = 1548.2 GFLOPS on a 4000 GB/s GPU.
    ok = [case('HimenoCudaPerf %alloc=explicit', perf={'gflops_loop': 1600, 'pct_roofline': 90})]
    rows = rows_by_id(tmp_path, ok)
    assert rows['HIM-T2']['verdict'] == report.REPRODUCED
    assert rows['HIM-T2']['expected'][0] == pytest.approx(0.75 * 34 * 4000 * 0.85 / 56)
    assert rows['HIM-T1']['verdict'] == report.REPRODUCED
    low = [case('HimenoCudaPerf %alloc=explicit', perf={'gflops_loop': 1500, 'pct_roofline': 70})]
    rows = rows_by_id(tmp_path, low)
    assert rows['HIM-T2']['verdict'] == report.NOT_REPRODUCED
    assert rows['HIM-T1']['verdict'] == report.NOT_REPRODUCED
    nofacts = [case('HimenoCudaPerf %alloc=explicit', perf={'gflops_loop': 1600}, facts={})]
    row = rows_by_id(tmp_path, nofacts)['HIM-T2']
    assert row['verdict'] == report.NOT_APPLICABLE and 'gpu.mem_bw_gbps' in row['reason']


def test_pending_components_are_not_run(tmp_path):
    # Any claim whose component has no measurement yet (none left: nothing to test).
    pending = next((c for c in report.data.all_claims() if not report.data.selectors(c)), None)
    if pending is None:
        pytest.skip('every claim has a measurement')
    rows = rows_by_id(tmp_path, [case('HimenoCpuPerf', perf={'gflops': 1})])
    row = rows[pending['id']]
    assert row['verdict'] == report.NOT_RUN and pending['component'] in row['reason']


def test_cli_writes_all_outputs_and_rejects_bad_input(tmp_path):
    path = write_report(tmp_path, [case('HimenoCudaPerf %alloc=explicit', perf={'gflops': 1500}),
                                   case('HimenoCpuPerf', perf={'gflops': 10})])
    out = tmp_path / 'out'
    r = subprocess.run([sys.executable, os.path.join(HERE, '..', 'report.py'), '--out', str(out), path],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    page = (out / 'report.html').read_text()
    for section in ('id="summary"', 'id="claims"', 'id="himeno"', 'id="cases"'):
        assert section in page
    assert (out / 'report.md').exists() and json.loads((out / 'verdicts.json').read_text())['verdicts']
    r = subprocess.run([sys.executable, os.path.join(HERE, '..', 'report.py'), '--out', str(out),
                        str(tmp_path / 'missing.json')], capture_output=True, text=True)
    assert r.returncode == 2 and 'no such run report' in r.stderr
    (tmp_path / 'junk.json').write_text('not json')
    r = subprocess.run([sys.executable, os.path.join(HERE, '..', 'report.py'), '--out', str(out),
                        str(tmp_path / 'junk.json')], capture_output=True, text=True)
    assert r.returncode == 2


def test_selectors_combine_over_checks_and_facts(tmp_path):
    # P001-C4: pattern bandwidths over the C2C link (a fact) and over baselines (a check).
    facts = {'gpu': {'mem_bw_gbps': 4000}, 'link': {'h2d_gbps': 450, 'd2h_gbps': 450}}
    cases = [case('UmbPatterns %array=4G %alloc=system', facts=facts,
                  perf={'p1_settled': 400, 'p2_settled': 440, 'p3_settled': 430, 'p4_settled': 290}),
             case('UmbBaseline %array=4G', facts=facts, perf={'d2h': 300, 'cpu_copy': 350})]
    row = rows_by_id(tmp_path, cases)['P001-C4']
    assert row['verdict'] == report.REPRODUCED, row
    assert abs(row['measured']['p2_over_c2c'] - 440 / 450) < 1e-12
    assert abs(row['measured']['p4_over_d2h'] - 290 / 300) < 1e-12
    cases[0]['perfvalues']['miyabi:gpu:p4_settled'][0] = 100  # far below DtoH
    assert rows_by_id(tmp_path, cases)['P001-C4']['verdict'] == report.NOT_REPRODUCED
    nolink = [dict(c, partition_info=dict(c['partition_info'], facts={})) for c in cases]
    row = rows_by_id(tmp_path, nolink)['P001-C4']
    assert row['verdict'] == report.NOT_APPLICABLE and 'link.h2d_gbps' in row['reason']


def test_paper_size_claims_need_paper_size_runs(tmp_path):
    perf = {'ratio_cpu_pack': 1.9, 'ratio_gpu_pack': 1.03}
    quick = [case(f'UmbHalo %problem={p}', system='cygnus', perf=perf) for p in ('small', 'large')]
    row = rows_by_id(tmp_path, quick, system='cygnus')['P000-C6']
    assert row['verdict'] == report.NOT_APPLICABLE and 'paper size' in row['reason']
    paper = [dict(c, size='paper') for c in quick]
    row = rows_by_id(tmp_path, paper, system='cygnus')['P000-C6']
    assert row['verdict'] == report.REPRODUCED
    assert rows_by_id(tmp_path, paper, system='cygnus')['P000-C5']['verdict'] == report.NOT_REPRODUCED


def test_failures_are_verdicts_only_for_missed_references(tmp_path):
    def run_report(phases):
        tcs = [{'name': f'C{i}', 'result': 'fail', 'fail_phase': ph} for i, ph in enumerate(phases)]
        tcs.append({'name': 'ok', 'result': 'pass'})
        p = tmp_path / f'r{len(phases)}{phases[-1] if phases else ""}.json'
        p.write_text(json.dumps({'runs': [{'testcases': tcs}]}))
        return str(p)
    assert report.failures_are_verdicts(run_report([])) == 0
    assert report.failures_are_verdicts(run_report(['performance', 'performance'])) == 0
    assert report.failures_are_verdicts(run_report(['performance', 'sanity'])) == 1
    assert report.failures_are_verdicts(run_report(['compile'])) == 1
