"""analysis/report.py figures on a synthetic run report with umbench records."""
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
import figures  # noqa: E402
import report  # noqa: E402

pytest.importorskip('matplotlib')

FILES = ['umb_modes.png', 'umb_fraction.png', 'umb_stride.png', 'umb_halo.png',
         'umb_baseline.png', 'umb_patterns.png', 'umb_migration.png']
NO_HMM = 'the GPU reports no pageable memory access (no HMM/ATS)'


def tc(name, records=(), result='pass', reason='', system='miyabi', size='quick', params=None):
    return {'name': name, 'system': system, 'partition': 'gpu', 'result': result, 'size': size,
            'fixture': False, 'skip_reason': reason if result == 'skip' else '',
            'fail_reason': None, 'perfvalues': {}, 'partition_info': {},
            'records_kept': list(records), 'record_params': params or {}}


def time(mode, value, **fields):
    return dict(metric='time', value=value, unit='ms', mode=mode, **fields)


def trace(series, values, key='series', trial=0, start=0):
    return [{'metric': 'bandwidth', 'value': v, 'unit': 'GB/s', key: series, 'trial': trial,
             'rep': start + i} for i, v in enumerate(values)]


def umbench_cases(system='miyabi'):
    modes = [time(m, t) for m, t in (('explicit', 100), ('managed', 150), ('both', 148), ('prefetch', 120))]
    fraction = [time(m, t + f * k, fraction_pct=f) for f in (0, 50, 100)
                for m, t, k in (('explicit', 100, 0), ('managed', 20, 2))] + [
        {'metric': 'crossover_pct', 'value': 40, 'unit': '%'}]
    stride = [time(m, t, stride_kib=s) for s in (4, 64, 256, 1024)
              for m, t in (('explicit', 100), ('managed', 300 if s < 128 else 50))] + [
        {'metric': 'crossover_kib', 'value': 128, 'unit': 'KiB'}]
    halo = [time(m, t, pack=p) for p, m, t in (('cpu', 'explicit', 100), ('cpu', 'managed', 180),
                                              ('gpu', 'explicit', 10), ('gpu', 'managed', 11))]
    baseline = sum((trace(s, [v * 0.5, v, v]) for s, v in
                    (('cpu_copy', 300), ('gpu_copy', 3000), ('h2d', 400), ('d2h', 300), ('d2d', 3100))), [])
    patterns = sum((trace(f'p{k}', [10, 100 * k, 100 * k]) for k in range(1, 9)), []) + [
        {'metric': 'pattern', 'value': k, 'unit': '1', 'src': 'HM', 'dst': 'DM', 'by': 'CPU' if k < 5 else 'GPU'}
        for k in range(1, 9)]
    migration = (trace('phase1', [10, 3000, 3000], key='phase') +
                 trace('phase2', [50, 300, 300], key='phase', start=3) +
                 trace('phase3', [3000, 3000, 3000], key='phase', start=6) +
                 [{'metric': 'phase3_ramp', 'value': 1.0, 'unit': 'ratio'}])
    return [
        tc('UmbModes', modes, system=system, params={'size_bytes': 2**30}),
        tc('UmbFraction', fraction, system=system),
        tc('UmbStride', stride, system=system, size='paper'),
        tc('UmbHalo %problem=small', halo, system=system, params={'n': 7680}),
        tc('UmbHalo %problem=large', halo, system=system, params={'n': 15360}),
        tc('UmbBaseline %array=4G', baseline, system=system),
        tc('UmbPatterns %array=4G %alloc=system', patterns, system=system),
        tc('UmbPatterns %array=4G %alloc=managed', patterns, system=system),
        tc('UmbMigration %array=4G %alloc=system', result='skip', reason=NO_HMM, system=system),
        tc('UmbMigration %array=4G %alloc=managed', migration, system=system),
    ]


def load(tmp_path, testcases):
    path = tmp_path / 'run.json'
    path.write_text(json.dumps({'session_info': {}, 'runs': [{'testcases': testcases}]}))
    return report.load_cases([str(path)])


def test_load_cases_keeps_records(tmp_path):
    cases = load(tmp_path, umbench_cases())
    modes = next(c for c in cases if c['check'] == 'UmbModes')
    assert len(modes['records']) == 4 and modes['record_params'] == {'size_bytes': 2**30}
    skipped = next(c for c in cases if c['result'] == 'skip')
    assert skipped['records'] == [] and skipped['record_params'] == {}


def test_every_figure_drawn_and_skip_reason_noted(tmp_path):
    cases = load(tmp_path, umbench_cases() + umbench_cases('pegasus'))  # two systems: a panel each
    figs = {f['name']: f for f in figures.figures(cases, str(tmp_path))}
    assert sorted(figs) == sorted(FILES)
    for name in FILES:
        assert figs[name]['file'] == name
        assert (tmp_path / name).stat().st_size > 1000, name
    note = figs['umb_migration.png']['note']
    assert NO_HMM in note and 'UmbMigration array=4G alloc=system on miyabi' in note
    assert 'on pegasus' in note
    assert figs['umb_stride.png']['caption'].endswith('[paper size]')
    assert figs['umb_modes.png']['caption'].endswith('[quick size]')
    assert figs['umb_modes.png']['note'] == ''


def test_no_data_no_figure_but_a_note(tmp_path):
    cases = load(tmp_path, [tc('HimenoCpuPerf'),
                            tc('UmbPatterns %array=1G %alloc=system', result='skip', reason=NO_HMM)])
    figs = {f['name']: f for f in figures.figures(cases, str(tmp_path))}
    for name in FILES:
        assert figs[name]['file'] is None and not (tmp_path / name).exists()
        assert figs[name]['note'].startswith('no ')
    assert NO_HMM in figs['umb_patterns.png']['note']
    # A case that ran but kept no records (an older report) is no data either.
    cases = load(tmp_path, [tc('UmbModes')])
    fig, note = figures.umb_modes_figure(cases, str(tmp_path))
    assert fig is None and 'kept no records' in note


def test_report_has_figures_section(tmp_path):
    path = tmp_path / 'run.json'
    path.write_text(json.dumps({'session_info': {}, 'runs': [{'testcases': umbench_cases()[:2] + [
        tc('UmbMigration %array=4G %alloc=system', result='skip', reason=NO_HMM)]}]}))
    out = tmp_path / 'out'
    assert report.main(['--out', str(out), str(path)]) == 0
    md, page = (out / 'report.md').read_text(), (out / 'report.html').read_text()
    assert '## Figures' in md and 'id="figures"' in page and 'id="himeno"' in page
    for text in (md, page):
        assert 'umb_modes.png' in text and 'umb_fraction.png' in text
        assert 'umb_migration.png' in text and NO_HMM in text  # not drawn: its note says why
    assert '![umb_modes.png](umb_modes.png)' in md and '<img src="umb_fraction.png"' in page
    assert (out / 'umb_modes.png').exists() and not (out / 'umb_migration.png').exists()
