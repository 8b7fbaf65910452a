"""What every figure of the report shares: matplotlib, the statistics of a case's
records over its repeats (the same median, min and max the tables print:
umstudy.verdicts.spread), the grid of panels, markers for indicative points, the one
line that stands in for a figure with nothing to draw, and text that renders without
CJK fonts."""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'reframe', 'lib'))
from umstudy import data, verdicts as V  # noqa: E402
from umstudy.verdicts import case_is  # noqa: E402
sys.path.insert(0, os.path.join(HERE, '..'))   # analysis/: remd_model, the P003 figures' model

NO_MATPLOTLIB = 'matplotlib is not installed: figure not drawn'
PAPER_STYLE = {'color': 'black', 'linestyle': '--', 'linewidth': 1.3}
MEASURED_STYLE = {'color': '#d62728', 'linestyle': ':', 'linewidth': 1.8}
MPI_STYLE = {'color': '#444444', 'linestyle': '--', 'linewidth': 1.3}  # the MPI baselines
# Panel order of parameter values (others sort by name; arrays by size).
PARAM_ORDER = {'alloc': ('system', 'managed'), 'problem': ('small', 'large')}
HOLLOW_LABEL = 'hollow: indicative (oversubscribed or < 3 repeats)'
DPI = 110


def pyplot():
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


# ---- statistics: one summary for tables and figures ---------------------------------

def series(case, metric, by=(), **match):
    """{key: spread} of one metric of a case over its measured repeats: the records whose
    fields match, grouped by the fields `by` (a sweep's x, a trace's rep; key () when
    none), each group summarised by umstudy.verdicts.spread (median, min, max, n) -
    the function the verdict and test-case tables print their numbers with."""
    values = {}
    for records in case.get('repeat_records') or []:
        for r in records:
            if r.get('metric') == metric and all(r.get(k) == v for k, v in match.items()) \
                    and all(k in r for k in by) and isinstance(r.get('value'), (int, float)):
                values.setdefault(tuple(r[k] for k in by), []).append(r['value'])
    return {k: V.spread(vs) for k, vs in values.items()}


def one(case, metric, **match):
    """The spread of a metric's single summary line (no `rep`), or None."""
    return series(case, metric, **match).get(())


def median(stat):
    return stat['median'] if stat else None


def records(case, metric, **match):
    """The records of the case's last measured repeat (fields other than values: a
    transport's name, a pattern's description)."""
    reps = case.get('repeat_records') or [[]]
    return [r for r in reps[-1] if r.get('metric') == metric and all(r.get(k) == v for k, v in match.items())]


def paper(claim_id):
    """(value, label) of a paper claim: the number(s) the figures mark."""
    c = data.claim(claim_id)
    system = c.get('system')
    return c['value'], f'paper ({system.capitalize()})' if system and system != 'any' else 'paper'



# ---- indicative points --------------------------------------------------------------

def hollow(case):
    """True where the case's points are only indicative (drawn hollow)."""
    return bool(V.indicative_case(case))


def marker_style(color, is_hollow, marker='o', size=4):
    return {'marker': marker, 'markersize': size, 'color': color, 'markeredgecolor': color,
            'markerfacecolor': 'white' if is_hollow else color}


def note_hollow(ax, drawn_hollow, bars=False):
    """One legend entry explaining hollow markers (hatched bars), where some were drawn."""
    if drawn_hollow and bars:
        from matplotlib.patches import Rectangle   # zero-sized: a legend entry, no data limits
        ax.add_patch(Rectangle((0, 0), 0, 0, facecolor='white', edgecolor='#555555', hatch='//',
                               label=HOLLOW_LABEL.replace('hollow', 'hatched, white')))
    elif drawn_hollow:
        ax.plot([], [], linestyle='none', label=HOLLOW_LABEL, **marker_style('#555555', True))


def errline(ax, pts, label, is_hollow=False, color='grey', marker='o', **style):
    """A line through the medians with min..max error bars: pts = [(x, spread)]."""
    pts = sorted((x, s) for x, s in pts if s)
    if not pts:
        return False
    xs = [x for x, _ in pts]
    meds = [s['median'] for _, s in pts]
    lo = [s['median'] - s['min'] for _, s in pts]
    hi = [s['max'] - s['median'] for _, s in pts]
    line = dict({'linewidth': 1.2}, **style)
    ax.errorbar(xs, meds, yerr=[lo, hi], label=label, capsize=2, elinewidth=0.8,
                **line, **marker_style(color, is_hollow, marker, 3.5))
    return True


def errband(ax, pts, label, color, **style):
    """A per-rep trace: the median over repeats as a line, min..max as a band."""
    pts = sorted((x, s) for x, s in pts if s)
    if not pts:
        return False
    xs = [x for x, _ in pts]
    ax.plot(xs, [s['median'] for _, s in pts], color=color, label=label, **dict({'linewidth': 1.2}, **style))
    if any(s['n'] > 1 for _, s in pts):
        ax.fill_between(xs, [s['min'] for _, s in pts], [s['max'] for _, s in pts], color=color, alpha=0.18,
                        linewidth=0)
    return True


def errbars(ax, xs, stats, width, colors, labels=None, hollows=None):
    """Bars at the medians with min..max error bars; hollow bars (white, hatched) for
    indicative cases."""
    for i, (x, s) in enumerate(zip(xs, stats)):
        if not s:
            continue
        h = bool(hollows and hollows[i])
        c = colors[i] if isinstance(colors, (list, tuple)) else colors
        ax.bar(x, s['median'], width, color='white' if h else c, edgecolor=c, hatch='//' if h else None,
               label=labels[i] if labels else None)
        if s['n'] > 1:
            ax.errorbar([x], [s['median']], yerr=[[s['median'] - s['min']], [s['max'] - s['median']]],
                        color='black', capsize=3, elinewidth=0.9, linestyle='none')


def paper_level(ax, value, label, color='black'):
    """The paper's level (a number, or a [lo, hi] range) as a dashed line / band."""
    style = dict(PAPER_STYLE, color=color)
    if isinstance(value, (list, tuple)):
        ax.axhspan(value[0], value[1], color=color, alpha=0.12, label=label)
        for v in value:
            ax.axhline(v, **dict(style, linewidth=0.8))
    else:
        ax.axhline(value, label=label, **style)


def paper_tick(ax, x, y, width, label=None):
    """The paper's value for one bar: a dashed segment across it."""
    ax.hlines(y, x - width / 2, x + width / 2, label=label, **PAPER_STYLE)


def legend(ax, **kw):
    """Legend right of the panel, where it hides no data."""
    ax.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.01, 1.0), borderaxespad=0, **kw)


def plain_formatter():
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda v, _: f'{v:g}')


def bytes_formatter():
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda v, _: next(f'{v / 1024 ** k:g}{unit}' for k, unit in
                                           ((2, 'M'), (1, 'K'), (0, '')) if v >= 1024 ** k or not k))


# ---- which cases, laid out how ---------------------------------------------------------

def to_bytes(text):
    """'4G' -> 4 * 2**30 (sort key of array sizes)."""
    m = re.fullmatch(r'([\d.]+)\s*([KMGT]?)i?B?', str(text or ''), re.I)
    return float(m.group(1)) * 1024 ** ' KMGT'.index(m.group(2).upper() or ' ') if m else 0.0


def gib(case):
    n = case['record_params'].get('size_bytes')
    return f'{n / 2**30:g} GiB array' if n else ''


def why_empty(case):
    """Why a case has nothing to plot ('' when it has)."""
    if 'members' in case:  # a panel of several cases (panels): empty when all of them are
        whys = [why_empty(m) for m in case['members']]
        return '' if not all(whys) else '; '.join(dict.fromkeys(whys))
    if case['status'] == V.SKIPPED:
        return 'skipped: ' + case['reason']
    if case['status'] == V.FAILED:
        return 'failed: ' + case['reason']
    if case['status'] == V.NOT_RUN:
        return 'not run: ' + case['reason']
    if not any(case.get('repeat_records') or []):
        return 'ran but kept no records'
    return ''


def describe(case):
    return ' '.join([case['check']] + [f'{k}={v}' for k, v in case['params'].items()]) + f" on {case['system']}"


def size_label(cases):
    sizes = sorted({c['size'] for c in cases if not why_empty(c)})
    return ' + '.join(sizes) + ' size' if sizes else ''


def rank(case, param):
    order, value = PARAM_ORDER[param], case['params'].get(param)
    return order.index(value) if value in order else len(order)


def matching(cases, sources):
    """Cases of the (check, params) sources, in source order, then by system and params."""
    out = []
    for check, params in sources:
        out += sorted((c for c in cases if case_is(c, check, params)),
                      key=lambda c: (c['system'], rank(c, 'alloc'), to_bytes(c['params'].get('array')),
                                     rank(c, 'problem'), sorted(c['params'].items())))
    return out


def grid(picked):
    """Layout: a row per system (x allocator), a column per check, size mode, array size and problem."""
    def row(c):
        return c['system'], rank(c, 'alloc')

    def col(c):
        rest = sorted((k, str(v)) for k, v in c['params'].items() if k not in ('alloc', 'array', 'problem'))
        # paper-size runs first: quick and paper runs of one case sit side by side
        return (c.get('order', 0), c['check'], c['size'] != 'paper', to_bytes(c['params'].get('array')),
                rank(c, 'problem'), rest)
    rows = sorted({row(c) for c in picked})
    cols = sorted({repr(col(c)): col(c) for c in picked}.values())
    return [[next((c for c in picked if row(c) == r and col(c) == k), None) for k in cols] for r in rows]


def panel_title(case, with_check):
    params = ' '.join(f'{k}={v}' for k, v in case['params'].items())
    parts = [case['system']] + ([case['check']] if with_check else []) + ([params] if params else [])
    return ' · '.join(parts) + f" ({case['size']} size)"


def notes(picked):
    """'UmbX a=1 on s, UmbX a=2 on s: skipped: why' for the cases with nothing to plot."""
    by_reason = {}
    for c in picked:
        if why_empty(c):
            by_reason.setdefault(why_empty(c), []).append(describe(c))
    return [f"{', '.join(who)}: {why}" for why, who in by_reason.items()]


def panels(picked, specs):
    """Panels that draw several cases each: a pseudo-case per system, size and spec
    (label, checks, fields) holding the picked cases of those checks as its 'members'
    ('order' keeps the specs' column order; the fields tell the drawer what to draw)."""
    out = []
    for system, size in sorted({(c['system'], c['size']) for c in picked}):
        for order, (label, checks, fields) in enumerate(specs):
            members = [c for c in picked if (c['system'], c['size']) == (system, size) and c['check'] in checks]
            if members:
                out.append(dict(fields, check=label, params={}, system=system, size=size, status=V.MEASURED,
                                reason='', repeat_records=[], record_params={}, members=members, order=order))
    return out


def figure(cases, out_dir, name, title, sources, draw, panel=(7.0, 3.8), panel_specs=None):
    """One PNG with a panel per case of the sources, or per pseudo-case of
    panels(panel_specs) (draw(ax, case) fills it and returns whether it drew anything).
    Cases and panels with nothing to draw get no panel: the note names them in one line.
    -> (file or None, note)."""
    picked = matching(cases, sources)
    said = notes(picked)
    if all(why_empty(c) for c in picked):
        what = ' / '.join(check + ''.join(f' {k}={v}' for k, v in params.items()) for check, params in sources)
        return None, '; '.join([f'no {what} data to plot' + ('' if picked else ' (not in these run reports)')]
                               + said)
    plt = pyplot()
    if plt is None:
        return None, NO_MATPLOTLIB
    if panel_specs:
        picked = panels(picked, panel_specs)
    picked = [c for c in picked if not why_empty(c)]
    layout = grid(picked)
    nrows, ncols = len(layout), max(len(row) for row in layout)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel[0] * ncols, panel[1] * nrows + 0.5),
                             squeeze=False, layout='constrained')
    with_check = len({c['check'] for c in picked}) > 1
    empty = []
    for i in range(nrows):
        for j in range(ncols):
            ax, case = axes[i][j], layout[i][j] if j < len(layout[i]) else None
            if case is None:
                ax.axis('off')
                continue
            ax.set_title(panel_title(case, with_check), fontsize=9)
            if not draw(ax, case):
                ax.remove()
                empty.append(panel_title(case, with_check))
    if len(empty) == len(picked):
        plt.close(fig)
        return None, '; '.join(['no records of the kind this figure plots'] + said)
    fig.suptitle(title, fontsize=11)
    save(fig, os.path.join(out_dir, name))
    plt.close(fig)
    return name, '; '.join(said + [f'{e}: no records of the kind this figure plots' for e in empty])


# ---- text that renders without CJK fonts ---------------------------------------------

CJK = re.compile('[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]+')
_CJK_FONT = []


def cjk_font():
    """The name of an installed font matplotlib can draw Japanese with, or None (looked
    up once, at run time: a PNG must never show boxes for missing glyphs)."""
    if not _CJK_FONT:
        found = None
        try:
            from matplotlib import font_manager
            for f in font_manager.fontManager.ttflist:
                if re.search(r'CJK|Noto Sans JP|IPA|TakaoP?Gothic|VL Gothic|Source Han|Hiragino|MS Gothic',
                             f.name, re.I):
                    found = f.name
                    break
        except ImportError:
            pass
        _CJK_FONT.append(found)
    return _CJK_FONT[0]


def png_text(text, font=None):
    """Text for a PNG: as it is where a CJK font is installed; otherwise every run of
    CJK characters becomes '[…]' (the English gloss beside it stays readable)."""
    font = cjk_font() if font is None else font
    if not text or font or not CJK.search(text):
        return text
    return CJK.sub('[…]', text)


def save(fig, path):
    """Writes the PNG, with every text readable on this machine (png_text); where a CJK
    font exists the texts that need it are set in it."""
    font = cjk_font()
    for t in fig.findobj(lambda a: hasattr(a, 'get_text') and hasattr(a, 'set_text')):
        text = t.get_text()
        if isinstance(text, str) and CJK.search(text):
            if font:
                t.set_fontfamily([font, 'DejaVu Sans'])
            else:
                t.set_text(png_text(text, font=''))
    fig.savefig(path, dpi=DPI)
