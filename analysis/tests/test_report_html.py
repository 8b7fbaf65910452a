"""The full report page: every section and every row (one per claim and system) is there (pure
Python, always), and the page renders in a real browser (headless Chromium, skipped
with the reason where it is not installed)."""
import html.parser
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
import provenance  # noqa: E402
import report  # noqa: E402
sys.path.insert(0, HERE)
from synth import V, repeated, run_case, write_report  # noqa: E402

SECTIONS = ['first-screen', 'claims', 'targets', 'consistency', 'not-applicable', 'summary', 'himeno', 'figures', 'tables',
            'provenance', 'cases']
TABLES = ('claims', 'targets', 'consistency')


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.sections, self.rows, self.stack, self._cells = [], [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == 'section':
            self.sections.append(attrs.get('id'))
        if tag == 'tr' and self.sections and self.sections[-1] in TABLES:
            self._cells = []
        if tag == 'td' and self._cells is not None:
            self._cells.append('')

    def handle_data(self, data):
        if self._cells:
            self._cells[-1] += data

    def handle_endtag(self, tag):
        if tag == 'tr' and self._cells:
            self.rows.append(self._cells)
        if tag == 'tr':
            self._cells = None


@pytest.fixture(scope='module')
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('report')
    cases = (repeated('HimenoCudaPerf %alloc=explicit', {'gflops': 1500}) +
             repeated('HimenoCudaPerf %alloc=managed', {'gflops': 1480}) +
             [run_case('HimenoCudaPerf %alloc=system', result='skip', reason='no HMM'),
              run_case('HimenoCudaPerf %alloc=explicit', system='local', features=['cpu', 'gpu'],
                       perf={'gflops': 900})])
    rep = write_report(tmp / 'run.json', cases)
    prov = provenance.collect(rep, 'local', str(tmp / 'prov'))
    with open(provenance.sidecar(rep), 'w') as f:
        json.dump({'bundle': prov['bundle'], 'sha256': prov['sha256'], 'not_recorded': []}, f)
    cases = V.load_cases([rep])
    path = report.write(V.verdicts(cases), cases, str(tmp / 'out'), [rep])
    return path, prov['sha256']


def test_every_section_claim_and_system_is_in_the_page(page):
    path, digest = page
    text = open(path).read()
    p = Page()
    p.feed(text)
    assert p.sections == SECTIONS
    ids = [c['id'] for c in V.data.all_claims()]
    rows = V.verdicts(V.load_cases([os.path.join(os.path.dirname(path), '..', 'run.json')]))
    tabled = {(r['id'], r['system']) for r in rows if r['verdict'] != V.NOT_APPLICABLE}
    shown = {(r[0], r[2]) if len(r) > 7 else (r[0], r[1]) for r in p.rows}
    assert shown == tabled  # every judged, consistency or not-run row in a table
    grouped = {(r['id'], r['system']) for r in rows if r['verdict'] == V.NOT_APPLICABLE}
    na = text[text.index('id="not-applicable"'):text.index('id="summary"')]
    assert all(f'{i} ({s})' in na for i, s in grouped)  # the rest grouped by what they need
    assert tabled | grouped == {(i, s) for i in ids for s in ('local', 'miyabi')}
    assert all(r['verdict'] in V.ALL for r in rows)
    assert digest in text
    md = open(os.path.join(os.path.dirname(path), 'report.md')).read()
    for heading in ('## Paper claims', '## Artifact targets', '## Figures', '## Not applicable here', '## Provenance'):
        assert heading in md


CHROMIUM = next((shutil.which(n) for n in ('chromium', 'chromium-browser', 'google-chrome')
                 if shutil.which(n)), None)


@pytest.mark.skipif(CHROMIUM is None, reason='no chromium/google-chrome on PATH (optional Debian '
                    'package `chromium`, installed by .ci/setup-system.sh where possible)')
def test_chromium_renders_every_section(page):
    path, digest = page
    r = subprocess.run([CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--dump-dom',
                        'file://' + os.path.abspath(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    p = Page()
    p.feed(r.stdout)
    assert p.sections == SECTIONS, r.stdout[:2000]
    assert len(p.rows) > 0 and p.sections.index('first-screen') == 0
    assert digest in r.stdout
