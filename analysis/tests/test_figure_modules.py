"""The figures package: one module per study, the report's import path, every figure
drawn from the medians the tables print with min..max bars, indicative cases hollow,
one line of text where there is nothing to draw, and no CJK glyph in a PNG where no
CJK font is installed."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
sys.path.insert(0, HERE)
import figures  # noqa: E402
from figures import common, p004  # noqa: E402
import report  # noqa: E402
from synth import V, run_case, write_report  # noqa: E402
from test_dlm import micro  # noqa: E402

plt = pytest.importorskip('matplotlib.pyplot')


def test_one_module_per_study_behind_the_reports_import_path():
    pkg = os.path.join(HERE, '..', 'figures')
    assert sorted(f for f in os.listdir(pkg) if f.endswith('.py')) == [
        '__init__.py', 'common.py', 'p000.py', 'p001.py', 'p002.py', 'p003.py', 'p004.py', 'vcuda.py']
    assert not os.path.exists(os.path.join(HERE, '..', 'figures.py'))
    # what report.py imports, and every figure registered once
    for name in ('figures', 'himeno_figure', 'cab_comm_table', 'remd_table', 'HIMENO_CLAIMS'):
        assert getattr(report, name) is getattr(figures, name)
    names = [fn.__name__ for fn, _, _ in figures.REGISTRY]
    assert len(names) == len(set(names)) == 16


def dlm_micro_repeats(system='local', placement=None):
    """Three repeats of R3 and R58 whose 1-thread times differ repeat by repeat."""
    out = []
    for engine, times in (('r3', [10.0, 12.0, 11.0]), ('r58', [27.0, 30.0, 26.0])):
        for i, t1 in enumerate(times):
            recs = [dict(r, value=r['value'] * t1 / 10.0) for r in micro('r3') if r['metric'] == 'time']
            tc = run_case(f'DlmMicro %engine={engine} %.repeat_no={i}', system=system, features=['mpi'],
                          facts={}, perf={'time_t1': t1}, placement=placement, records=recs)
            out.append(tc)
    return out


def bars_of(ax):
    return sorted((round(p.get_x() + p.get_width() / 2, 6), p.get_height()) for p in ax.patches
                  if p.get_width() > 0)


def test_figures_draw_the_medians_the_tables_print_with_min_max_bars(tmp_path):
    cases = V.load_cases([write_report(tmp_path / 'r.json', dlm_micro_repeats())])
    r3 = next(c for c in cases if c['params'] == {'engine': 'r3'})
    # one summary for tables and figures: the verdict module's spread of the repeats
    table = V.spread(r3['samples']['time_t1'])
    drawn = common.series(r3, 'time', by=('threads',))[(1,)]
    assert drawn == table == {'median': 11.0, 'min': 10.0, 'max': 12.0, 'n': 3}
    fig, ax = plt.subplots()
    panel = common.panels(cases, [('microbenchmark', ('DlmMicro',), {})])[0]
    assert p004._draw_dlm_micro(ax, panel)
    heights = [h for _, h in bars_of(ax)]
    assert 11.0 in heights and 27.0 in heights   # the medians, not the last repeat (11.0, 26.0)
    caps = [c for c in ax.containers if c.__class__.__name__ == 'ErrorbarContainer']
    segs = [seg for c in caps for seg in c.lines[2][0].get_segments()]
    assert any(abs(s[0][1] - 10.0) < 1e-9 and abs(s[1][1] - 12.0) < 1e-9 for s in segs)  # R3 at 1 thread
    plt.close(fig)


def test_indicative_points_are_hollow_with_a_legend(tmp_path):
    over = {'ranks': 5, 'threads': 1, 'cores': 2, 'cpus': 5}
    cases = V.load_cases([write_report(tmp_path / 'r.json', dlm_micro_repeats(placement=over))])
    panel = common.panels(cases, [('microbenchmark', ('DlmMicro',), {})])[0]
    fig, ax = plt.subplots()
    p004._draw_dlm_micro(ax, panel)
    labels = ax.get_legend_handles_labels()[1]
    assert common.HOLLOW_LABEL.replace('hollow', 'hatched, white') in labels
    assert all(p.get_facecolor()[:3] == (1.0, 1.0, 1.0) for p in ax.patches if p.get_width() > 0)
    plt.close(fig)
    # lines: white-faced markers
    fig, ax = plt.subplots()
    common.errline(ax, [(1, V.spread([1.0, 2.0])), (2, V.spread([2.0]))], 'x', True, color='#1f77b4')
    common.note_hollow(ax, True)
    assert ax.lines[0].get_markerfacecolor() == 'white'
    assert common.HOLLOW_LABEL in ax.get_legend_handles_labels()[1]
    plt.close(fig)
    # enough repeats, not oversubscribed: filled
    ok = V.load_cases([write_report(tmp_path / 's.json', dlm_micro_repeats())])
    assert not any(common.hollow(c) for c in ok)
    assert all(common.hollow(c) for c in cases)


def test_nothing_to_draw_is_one_line_in_the_report(tmp_path):
    tcs = [run_case('UmbModes', result='skip', reason='no GPU on this partition: none detected')]
    out = tmp_path / 'out'
    assert report.main(['--out', str(out), write_report(tmp_path / 'r.json', tcs)]) == 0
    md, page = (out / 'report.md').read_text(), (out / 'report.html').read_text()
    assert ('- umb_modes.png: no UmbModes / UmbAcc program_name=modes data to plot; UmbModes on miyabi: '
            'skipped: no GPU on this partition: none detected\n') in md
    assert '- vcuda_copy.png: no VcudaBench data to plot (not in these run reports)\n' in md
    assert 'Not drawn.' not in md and 'Not drawn.' not in page and not (out / 'umb_modes.png').exists()
    assert '<li><strong>umb_modes.png</strong>: no UmbModes' in page
    for f in figures.figures(V.load_cases([write_report(tmp_path / 'r.json', tcs)]), str(tmp_path)):
        assert '\n' not in f['note']


def test_a_case_with_nothing_gets_no_panel_only_the_note(tmp_path):
    cases = V.load_cases([write_report(tmp_path / 'r.json', dlm_micro_repeats() + [
        run_case('DlmStencil %engine=r3', system='local', features=['mpi'], facts={}, result='skip',
                 reason='component(s) dlm not in this build (UMSTUDY_COMPONENTS=himeno)')])])
    name, note = figures.dlm_stencil_figure(cases, str(tmp_path))
    assert name is None and note == ('no DlmStencil data to plot; DlmStencil engine=r3 on local: skipped: '
                                     'component(s) dlm not in this build (UMSTUDY_COMPONENTS=himeno)')


def test_cjk_text_never_reaches_a_png_without_a_cjk_font(tmp_path, monkeypatch):
    quote = 'R77 keeps 78% (約78%の性能)'
    assert common.png_text(quote, font='') == 'R77 keeps 78% ([…]78%[…])'
    assert common.png_text(quote, font='Noto Sans CJK JP') == quote
    assert common.png_text('plain', font='') == 'plain'
    monkeypatch.setattr(common, '_CJK_FONT', [None])
    fig, ax = plt.subplots()
    ax.set_title(quote)
    ax.plot([1, 2], [1, 2], label='約78%')
    ax.legend()
    common.save(fig, str(tmp_path / 'q.png'))
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, 'get_text'))]
    assert not any(common.CJK.search(t) for t in texts if isinstance(t, str))
    assert 'R77 keeps 78% ([…]78%[…])' in texts
    plt.close(fig)


def test_the_font_lookup_reads_what_matplotlib_has(monkeypatch):
    from matplotlib import font_manager
    monkeypatch.setattr(common, '_CJK_FONT', [])
    found = common.cjk_font()
    names = {f.name for f in font_manager.fontManager.ttflist}
    assert found is None or found in names
