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
from synth import V, repeated, run_case, write_report  # noqa: E402

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
