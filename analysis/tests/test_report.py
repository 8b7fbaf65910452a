"""analysis/report.py: the page an evaluator reads (claims first, targets, paper
consistency apart, not-applicable rows grouped by what they need, the reference
machine beside), the command line and its bad input."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
sys.path.insert(0, HERE)
import report  # noqa: E402
from synth import V, judge, repeated, run_case, write_report  # noqa: E402

REPORT = [sys.executable, os.path.join(HERE, '..', 'report.py')]


def gpu_run(system='miyabi'):
    return (repeated('HimenoCudaPerf %alloc=explicit', {'gflops': 1500, 'gflops_loop': 1700, 'pct_roofline': 80},
                     system=system) +
            repeated('UmbBaseline', {'h2d': 410, 'd2h': 300, 'gpu_copy': 3200, 'cpu_copy': 330}, system=system) +
            [run_case('HimenoCudaPerf %alloc=system', result='skip', reason='no HMM', system=system)])


def test_page_leads_with_the_claims_and_groups_what_needs_other_hardware(tmp_path):
    path = write_report(tmp_path / 'run.json', gpu_run())
    out = tmp_path / 'out'
    r = subprocess.run(REPORT + ['--out', str(out), '--reference', path, path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    page = (out / 'report.html').read_text()
    order = [page.index(f'id="{s}"') for s in ('claims', 'targets', 'consistency', 'not-applicable',
                                                  'summary', 'figures', 'provenance', 'cases')]
    assert order == sorted(order)
    claims = page[page.index('id="claims"'):page.index('id="targets"')]
    assert 'P001-C1' in claims and 'GPU copy' in claims and 'reproduced' in claims
    assert 'reference machine' in claims  # the reference runs, side by side
    na = page[page.index('id="not-applicable"'):page.index('id="summary"')]
    assert "a Cygnus-class node" in na and 'P000-C1 (miyabi)' in na
    md = (out / 'report.md').read_text()
    assert md.index('## Paper claims') < md.index('## Artifact targets') < md.index('## Not applicable here')
    data = json.loads((out / 'verdicts.json').read_text())
    assert data['counts'][V.REPRODUCED] > 0 and data['reference_sources'] == [path]


def test_dry_run_reports_are_never_sources(tmp_path):
    dry = write_report(tmp_path / 'dry.json', gpu_run(), cmdline='reframe -r --dry-run')
    real = write_report(tmp_path / 'run.json', gpu_run())
    out = tmp_path / 'out'
    r = subprocess.run(REPORT + ['--out', str(out), '--reference', dry, real], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads((out / 'verdicts.json').read_text())['sources'] == [real]
    r = subprocess.run(REPORT + ['--out', str(out), dry], capture_output=True, text=True)
    assert r.returncode == 2 and 'only dry-run' in r.stderr


def test_cli_rejects_bad_input(tmp_path):
    out = tmp_path / 'out'
    r = subprocess.run(REPORT + ['--out', str(out), str(tmp_path / 'missing.json')], capture_output=True, text=True)
    assert r.returncode == 2 and 'no such run report' in r.stderr
    (tmp_path / 'junk.json').write_text('not json')
    r = subprocess.run(REPORT + ['--out', str(out), str(tmp_path / 'junk.json')], capture_output=True, text=True)
    assert r.returncode == 2


def test_failures_are_verdicts_only_for_missed_references(tmp_path):
    def run_report(phases, extra=()):
        tcs = [{'name': f'C{i}', 'result': 'fail', 'fail_phase': ph} for i, ph in enumerate(phases)]
        tcs += [{'name': 'ok', 'result': 'pass'}] + list(extra)
        p = tmp_path / f'r{len(phases)}{phases[-1] if phases else ""}{len(extra)}.json'
        p.write_text(json.dumps({'runs': [{'testcases': tcs}]}))
        return str(p)
    assert report.failures_are_verdicts(run_report([])) == 0
    assert report.failures_are_verdicts(run_report(['performance', 'performance'])) == 0
    assert report.failures_are_verdicts(run_report(['performance', 'sanity'])) == 1
    assert report.failures_are_verdicts(run_report(['compile'])) == 1
    # a cancelled session (Ctrl-C, a killed job) is never a clean run
    assert report.failures_are_verdicts(run_report([], [{'name': 'X', 'result': 'abort'}])) == 1


def test_reference_reports_are_judged_each_on_its_own(tmp_path):
    """Two reference machines: a claim measured on both takes the first report's verdict
    (never the two machines' repeats pooled), one the first cannot judge comes from the
    second, and the column names both machines."""
    first = write_report(tmp_path / 'a.json', repeated('UmbBaseline', {'h2d': 410, 'd2h': 300, 'gpu_copy': 3200,
                                                                          'cpu_copy': 330}, system='miyabi'))
    second = write_report(tmp_path / 'b.json', repeated('UmbBaseline', {'h2d': 10, 'd2h': 10, 'gpu_copy': 10,
                                                                           'cpu_copy': 10}, system='miyabi') +
                          repeated('HimenoCudaPerf %alloc=explicit',
                                   {'gflops': 1500, 'gflops_loop': 1700, 'pct_roofline': 80}, system='miyabi'))
    rows, paths = report.load_reference([first, second])
    assert paths == [first, second]
    alone = {r['id']: r for r in V.verdicts(V.load_cases([first]))}
    assert rows['P001-C1']['verdict'] == alone['P001-C1']['verdict'] == V.REPRODUCED
    assert rows['P001-C1']['measured'] == alone['P001-C1']['measured']   # not pooled with b's 10s
    assert rows['HIM-T1']['verdict'] != V.NOT_RUN                       # only b measured it


# ---- the first screen, clean cells, units -------------------------------------------------

LOCAL_FACTS = {'cpu': {'cores': 2, 'model': 'AMD EPYC 9654'}, 'host_memory': {'gib': 23.5},
               'gpu_reason': 'no CUDA driver (libcuda.so.1: libcuda.so.1: cannot open shared object file: '
                             'No such file or directory)'}


def cpu_box_run():
    """A CPU box's run as make run writes it: two CPU claims measured (one outside its
    interval), a crash, the GPU checks skipped with detection's reason."""
    kw = dict(system='local', features=['cpu', 'mpi', 'openmp'], facts=LOCAL_FACTS)
    return (repeated('DlmMicro %engine=r58', {'time_t1': 27.5}, **kw) +
            repeated('DlmMicro %engine=r3', {'time_t1': 10.0}, **kw) +
            repeated('CabPingPong %backend=mpi3', {'put_lat8_over_raw': 4.0}, **kw) +
            [dict(run_case('HimenoVerify %variant=cpu', result='fail', fail_phase='sanity',
                           reason='sanity error: exit code 139, expected 0', **kw), job_exitcode=139),
             run_case('HimenoVerify %variant=cuda-explicit', result='skip',
                      reason='no GPU on this partition: ' + LOCAL_FACTS['gpu_reason'], **kw)])


def test_first_screen_names_machine_counts_rows_and_reasons(tmp_path):
    refused = os.path.join(HERE, 'reports', 'slurm-unreachable.json.gz')
    run = write_report(tmp_path / 'local.json', cpu_box_run())
    out = tmp_path / 'out'
    r = subprocess.run(REPORT + ['--out', str(out), refused, run], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    md = (out / 'report.md').read_text()
    screen = md.split('\nSources:')[0]
    # the machine, as the run recorded it, without the loader's raw error
    assert ('Machine (local): CPU: AMD EPYC 9654, 2 cores; memory: 23.5 GiB; GPU: none (no CUDA driver) — '
            '5 test cases from local.json') in screen
    assert 'libcuda' not in screen
    # every verdict counted; the judged rows named
    assert '2 of 3 judged rows reproduced (one row per claim and system)' in screen
    for v in V.ALL:
        assert f'{v}: ' in screen
    assert '- reproduced: P004-C1 (local), DLM-T3 (local)' in screen
    assert '- not reproduced: CAB-T1 (local)' in screen
    # one line per reason for what was not judged
    assert ('- scheduler error: sbatch: fatal: Could not establish a configuration source: 8 rows not run; '
            '7 test cases affected') in screen
    data = json.loads((out / 'verdicts.json').read_text())
    no_gpu = [v for v in data['verdicts'] if v['verdict'] == V.NOT_APPLICABLE and v['group'] == 'an NVIDIA GPU']
    assert len(no_gpu) > 30
    assert f'- needs an NVIDIA GPU: {len(no_gpu)} rows not applicable; 1 test case skipped' in screen
    # the refused Slurm run judged nothing
    assert not [v for v in data['verdicts'] if v['system'] == 'slurm' and v['verdict'] in V.COUNTED]
    page = (out / 'report.html').read_text()
    assert page.index('id="first-screen"') < page.index('id="claims"')


def test_failed_rows_are_red_and_counted_apart(tmp_path):
    crash = [dict(run_case('HimenoVerify %variant=cuda-explicit', result='fail', fail_phase='sanity',
                           reason='sanity error: exit code 139, expected 0'), job_exitcode=139)]
    out = tmp_path / 'out'
    assert report.main(['--out', str(out), write_report(tmp_path / 'r.json', crash)]) == 0
    page, md = (out / 'report.html').read_text(), (out / 'report.md').read_text()
    assert '<tr class="fail"><td>HIM-T3-explicit</td>' in page and 'tr.fail td { background: #e03131' in page
    assert ("<li class=\"fail\">failed (the artifact&#x27;s own failure, counted apart): HIM-T3-explicit (miyabi): "
            'gosa_rel_err, p_max_abs_diff: HimenoVerify variant=cuda-explicit failed: the program crashed: '
            'exit 139 (SIGSEGV)</li>') in page
    assert '0 of 0 judged rows reproduced' in md and 'failed: 1' in md
    assert '| HimenoVerify variant=cuda-explicit | miyabi:gpu | failed | 0 of 1 | the program crashed' in md


def _all_rows(tmp_path):
    """Every claim judged reproduced (its fixture), and not run, on its system."""
    from test_verdicts import FIXTURES, build
    rows = []
    for cid, (system, size, cases, _) in FIXTURES.items():
        rows.append(judge(tmp_path, build(system, size, cases), system)[cid])
        rows.append(judge(tmp_path, [], system)[cid])
    return rows


def test_cells_are_clean_and_units_right(tmp_path):
    for r in _all_rows(tmp_path):
        for cell in report.cells(r)[3:6]:
            for junk in ('[-', '- ratio', 'None', ', -]'):
                assert junk not in cell, (r['id'], cell)
        if r['origin'] == 'target':
            assert report.fmt_paper(r) == 'artifact target'
    claim = V.data.claim('P003-C6')
    assert V.unit_of(claim, 'gap_ms') == 'ms' and V.unit_of(claim, 'fast_us') == 'us'
    row = next(r for r in _all_rows(tmp_path) if r['id'] == 'P003-C6' and r['parts'])
    assert report.fmt_paper(row) == 'fast_us: 20..30 us; slow_us: 200..300 us; gap_ms: 10 ms (any system)'
    assert report.fmt_expected(row) == 'fast_us: 10..45 us; slow_us: 100..450 us'
    assert report.fmt_measured(row).startswith('fast_us: 25 us (25..25, n=3); slow_us: 250 us')
    c1 = next(r for r in _all_rows(tmp_path) if r['id'] == 'P003-C1' and r['parts'])
    assert 'BH: 1960 MB/s (' in report.fmt_measured(c1) and 'LH: 9.23 us (' in report.fmt_measured(c1)
    cab = next(r for r in _all_rows(tmp_path) if r['id'] == 'CAB-T1' and r['parts'])
    assert report.fmt_expected(cab) == '≤ 1.2×' and report.fmt_paper(cab) == 'artifact target'
    p002 = next(r for r in _all_rows(tmp_path) if r['id'] == 'P002-C1')
    assert report.fmt_paper(p002) == '≤ 0.95× (any system)'


def test_every_claim_part_has_the_unit_its_name_says():
    suffix = {'_us': 'us', '_ms': 'ms', '_pct': '%', '_kib': 'KiB', '_gbps': 'GB/s'}
    for c in V.data.all_claims():
        keys = list(c['value']) if isinstance(c.get('value'), dict) else []
        keys += [k for k in (c.get('bound') or {}) if k not in ('lower', 'upper')]
        for k in keys:
            for end, unit in suffix.items():
                if k.endswith(end):
                    assert V.unit_of(c, k) == unit, (c['id'], k, V.unit_of(c, k))
            if '_over_' in k:
                assert V.unit_of(c, k) == 'ratio', (c['id'], k)
        assert c.get('unit') != 'mixed', c['id']


def test_every_row_not_judged_says_why_in_the_row(tmp_path):
    refused = os.path.join(HERE, 'reports', 'slurm-unreachable.json.gz')
    cases = V.load_cases([refused, write_report(tmp_path / 'l.json', cpu_box_run())])
    for r in V.verdicts(cases) + _all_rows(tmp_path):
        if r['verdict'] in (V.NOT_RUN, V.FAILED, V.NOT_APPLICABLE):
            assert r['reason'] and r['group'], r


def test_the_case_table_never_says_pass_beside_a_missed_reference(tmp_path):
    tc = run_case('CabPingPong %backend=mpi3', result='fail', fail_phase='performance',
                  reason='performance error: failed to meet reference(s): put_lat8_over_raw=4.04 ratio, '
                         'expected 1.2 (l=-inf, u=1.2)', perf={'put_lat8_over_raw': 4.04})
    (case,) = V.load_cases([write_report(tmp_path / 'r.json', [tc])])
    row = report.case_rows([case])[0]
    assert row[2] == 'measured, missed a ReFrame reference' and 'pass' not in row[2]
    assert "missed ReFrame's reference: put_lat8_over_raw = 4.04× (1 repeat), expected ≤ 1.2×" in row[4]


def test_reference_column_says_when_the_reference_machine_never_ran_the_check(tmp_path):
    gpu_only = write_report(tmp_path / 'ref.json', gpu_run())
    ref, _ = report.load_reference([gpu_only])
    rows = {r['id']: r for r in V.verdicts(V.load_cases([write_report(tmp_path / 'l.json', cpu_box_run())]))}
    assert report.ref_cell(rows['P004-C1'], ref) == report.NO_REFERENCE_RUN
    assert report.ref_cell(rows['HIM-T1'], ref).endswith('reproduced')
    # a check the reference machine ran but could not judge says why, never a bare "not run"
    skipped = report.ref_cell(rows['P001-C8'], ref)
    assert skipped != 'not run' and skipped.startswith(('not run: ', 'not applicable: '))


def test_a_quote_comes_with_its_english_and_a_latin_citation(tmp_path):
    row = V.verdicts([], ['miyabi'])[[c['id'] for c in V.data.all_claims()].index('P001-C2')]
    text = report.claim_text(row)
    assert text.startswith('CPU copy 310-360 GB/s with occasional dips of ~100 GB/s — quoted from '
                           'P001 fig. 5.1 (Satoshi Yoshida, 2024): “CPU メモリでは')
