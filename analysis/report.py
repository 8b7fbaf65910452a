#!/usr/bin/env python3
"""ReFrame run report(s) -> claim verdicts, tables, figures, report.md and report.html.

    python3 analysis/report.py --out DIR run-report.json [more.json ...]

The page opens with one screen that says what was measured on which machine (CPU,
cores, memory, GPU, as the run recorded them), how many rows (one per claim and system)
got each verdict, which rows were judged (named), and one line per reason for what was not
judged.  Then the paper claims (the claim, the paper's system and number, the measured
median with its spread, size and machine, the verdict and why), the artifact's
targets, what could not be judged here grouped by the hardware it needs, the figures,
tables and every test case.  Verdicts come from reframe/lib/umstudy/verdicts.py, the
module ReFrame's references come from.  The reference machine's run reports
(analysis/reference/) are judged the same way and shown beside this run's numbers.
"""
import argparse
import glob
import html
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'reframe', 'lib'))
from umstudy import data, verdicts as V  # noqa: E402

from figures import (HIMENO_CLAIMS, cab_comm_table, dlm_fault_table, figures, himeno_figure,  # noqa: E402
                     remd_table)
from provenance import sidecar  # noqa: E402

# The project's own reference runs: ReFrame run reports of the reference machine.
REFERENCE_DIR = os.path.join(HERE, 'reference')
KLASS = {V.REPRODUCED: 'ok', V.NOT_REPRODUCED: 'bad', V.INCONCLUSIVE: 'inc', V.INDICATIVE: 'ind',
         V.CONSISTENCY: 'con', V.NOT_APPLICABLE: 'na', V.FAILED: 'fail', V.NOT_RUN: 'nr'}
# The claim tables, in reading order: what a measurement decided, the artifact's
# failures, what is shown but not counted, what did not run.
TABLE_ORDER = V.COUNTED + (V.FAILED, V.INDICATIVE, V.NOT_RUN)
NO_REFERENCE_RUN = 'no reference-machine run of this check'
CJK_RUN = re.compile('([\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]+)')


# ---- formatting ---------------------------------------------------------------------

def num(v):
    """A number as a reader reads it (umstudy.verdicts.num); anything else as it is."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if v != v:
        return 'nan'
    return V.num(v) if isinstance(v, float) or abs(v) >= 1e4 else str(v)


def fmt(v):
    if v is None:
        return '-'
    if isinstance(v, dict):
        return '; '.join(f'{k}: {fmt(x)}' for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ', '.join(fmt(x) for x in v)
    return num(v)


def with_unit(text, unit):
    """'2.75' + 'ratio' -> '2.75×'; '78' + '%' -> '78%'; '9.2' + 'us' -> '9.2 us'."""
    if unit in (None, '', '1'):
        return text
    if unit == 'ratio':
        return text + '×'
    if unit == '%':
        return text + '%'
    return f'{text} {unit}'


def fmt_interval(lo_hi, unit):
    """[lo, hi] -> 'lo..hi unit', '≥ lo unit', '≤ hi unit'."""
    lo, hi = lo_hi
    if lo is not None and hi is not None:
        return with_unit(num(lo) if lo == hi else f'{num(lo)}..{num(hi)}', unit)
    if lo is not None:
        return '≥ ' + with_unit(num(lo), unit)
    if hi is not None:
        return '≤ ' + with_unit(num(hi), unit)
    return 'any value'


def fmt_paper_value(v, unit):
    """The paper's number(s) for one part: a value or a [low, high] range."""
    return fmt_interval(v if isinstance(v, (list, tuple)) else (v, v), unit)


def claim_parts(claim):
    """[(key, paper text)] of a claim: its values, then bounds of parts without a value."""
    value, bound = claim.get('value'), claim.get('bound') or {}
    out = []
    if isinstance(value, dict):
        out += [(k, fmt_paper_value(v, V.unit_of(claim, k))) for k, v in value.items()]
    elif value is not None:
        out.append((None, fmt_paper_value(value, V.unit_of(claim))))
    if 'lower' in bound or 'upper' in bound:
        if value is None:
            out.append((None, fmt_interval((bound.get('lower'), bound.get('upper')), V.unit_of(claim))))
    else:
        for k, b in bound.items():
            if not isinstance(value, dict) or k not in value:
                out.append((k, fmt_interval((b.get('lower'), b.get('upper')), V.unit_of(claim, k))))
    return out


def fmt_paper(r):
    """The paper's number(s) and system; 'artifact target' for the artifact's own."""
    if r['origin'] == 'target':
        return 'artifact target'
    claim = data.claim(r['id'])
    parts = claim_parts(claim)
    body = '; '.join((f'{k}: ' if k else '') + t for k, t in parts) or 'stated in words'
    system = r['paper_system']
    return f"{body} ({'any system' if system == 'any' else system})"


def fmt_expected(r):
    exp = r.get('expected')
    if exp is None:
        return '-'
    if isinstance(exp, dict):
        return '; '.join(f'{k}: {fmt_interval(v, V.unit_of(data.claim(r["id"]), k))}' for k, v in exp.items())
    return fmt_interval(exp, V.unit_of(data.claim(r['id'])))


def fmt_measured(r):
    """'median unit (min..max, n=3) [size, machine]' per part; a far repeat flagged."""
    def one(key, p):
        s = p['spread']
        text = with_unit(fmt(p['measured']), p.get('unit'))
        if s and s['n'] > 1:
            text += f" ({fmt(s['min'])}..{fmt(s['max'])}, n={s['n']})"
        elif s:
            text += ' (n=1)'
        if p.get('outliers'):
            text += ' ⚠ a repeat > 3x from the median'
        return (f'{key}: ' if key != 'None' else '') + text
    parts = r.get('parts') or {}
    if not parts:
        if r['measured'] is None:
            return '-'
        claim = data.claim(r['id'])
        if isinstance(r['measured'], dict):
            return '; '.join(f'{k}: {with_unit(fmt(v), V.unit_of(claim, k))}' for k, v in r['measured'].items())
        return with_unit(fmt(r['measured']), V.unit_of(claim))
    body = '; '.join(one(k, p) for k, p in parts.items())
    where = ', '.join(x for x in (r.get('size') and f"{r['size']} size", r.get('machine')) if x)
    return body + (f' [{where}]' if where else '')


def romanised(text):
    """The romanised or English parts of a field that pairs Japanese with them in
    parentheses ('吉田 智 (Satoshi Yoshida)' -> 'Satoshi Yoshida'); the field itself
    where it has no Japanese."""
    if not re.search('[\u3000-\u9fff]', text or ''):
        return text or ''
    return ', '.join(re.findall(r'[\u3000-\u9fff][^()]*\(([^)]+)\)', text))


def citation(r):
    """'P001 fig. 5.1 (Satoshi Yoshida, 2024)': the quote's source in Latin letters
    (readable without CJK fonts): the paper, where in it, its first author and year as
    analysis/claims.yaml records them."""
    paper = data.claims_data().get('papers', {}).get(r.get('paper_id')) or {}
    authors = romanised(paper.get('authors', '').split(';')[0])   # after ';': advisors
    first = '' if 'not in the text' in authors else re.split(r',| and ', authors)[0].split(' (')[0].strip()
    year = re.search(r'\b(19|20)\d\d\b', paper.get('date', ''))
    who = ', '.join(x for x in (first + (' et al.' if first and re.search(r',| and ', authors) else ''),
                                year.group(0) if year else '') if x)
    return f"{r.get('paper_id')} {data.claim(r['id']).get('where', '')}".strip() + (f' ({who})' if who else '')


def claim_text(r):
    """The claim in English; where the paper's own sentence is quoted, its citation and
    the quote follow (the English above is its gloss)."""
    if not r.get('quote'):
        return r['text']
    return f"{r['text']} — quoted from {citation(r)}: “{r['quote']}”"


# ---- the machines, the counts and what was not judged (the first screen) ----------

def gpu_absent(reason):
    """Detection's reason for no GPU without the loader's raw message."""
    return re.sub(r'\s*\((libcuda[^()]*|[^()]*cannot open shared object[^()]*)\)', '', reason or '').strip()


def describe_machine(facts):
    """'CPU: AMD EPYC 9654, 16 cores; memory: 128 GiB; GPU: 1x NVIDIA H200 (139.8 GiB)'
    from the facts a run recorded (detection on `local`, the profile elsewhere)."""
    cpu, gpu = facts.get('cpu') or {}, facts.get('gpu') or {}
    mem = (facts.get('host_memory') or {}).get('gib') or (facts.get('probe') or {}).get('memory_gib')
    model = cpu.get('model') or (facts.get('probe') or {}).get('cpu_model')
    text = [f"CPU: {model or 'model not recorded'}" + (f", {cpu['cores']} cores" if cpu.get('cores') else '')]
    text.append(f'memory: {mem:g} GiB' if mem else 'memory: not recorded')
    if gpu:
        name = gpu.get('name') or gpu.get('model')
        text.append(f"GPU: {gpu.get('count', 1)}x {name}" + (f" ({gpu['memory_gib']:g} GiB)"
                                                             if gpu.get('memory_gib') else ''))
    else:
        why = facts.get('gpu_reason') or (facts.get('probe') or {}).get('gpu_reason')
        text.append('GPU: none' + (f' ({gpu_absent(why)})' if why else ''))
    return '; '.join(text)


def machines(cases):
    """[(system, host, description, number of cases, run reports)] of the cases' machines."""
    seen = {}
    for c in cases:
        facts = V.machine_facts(c.get('info'))
        if not facts and not c.get('info'):
            continue
        key = (c['system'], c.get('host') or '', describe_machine(facts))
        entry = seen.setdefault(key, [0, []])
        entry[0] += 1
        src = os.path.basename(c.get('source') or '')
        if src and src not in entry[1]:
            entry[1].append(src)
    return [(s, h, d, n, srcs) for (s, h, d), (n, srcs) in seen.items()]


def not_judged(rows, cases):
    """[(verdict, group, [rows], number of test cases)] of the rows no measurement
    decided (not applicable, not run), one per reason, largest first."""
    groups = {}
    for r in rows:
        if r['verdict'] in (V.NOT_APPLICABLE, V.NOT_RUN):
            key = (r['verdict'], r.get('group') or r.get('needs') or r['reason'])
            groups.setdefault(key, []).append(r)
    case_count = {}
    for c in cases:
        if c['status'] != V.MEASURED:
            case_count[c.get('group') or c['reason']] = case_count.get(c.get('group') or c['reason'], 0) + 1
    out = [(v, g, rs, case_count.get(g, 0)) for (v, g), rs in groups.items()]
    return sorted(out, key=lambda x: (x[0] != V.NOT_APPLICABLE, -len(x[2]), x[1]))


def label(r):
    return f"{r['id']} ({r['system']})"


def first_screen(rows, cases):
    """What the page says before any table: {machines, counts, judged, failed, shown,
    not_judged} (see render_first_screen)."""
    counts = {v: sum(1 for r in rows if r['verdict'] == v) for v in V.ALL}
    judged = [(v, [r for r in rows if r['verdict'] == v]) for v in V.COUNTED]
    return {'machines': machines(cases), 'counts': counts,
            'judged': [(v, rs) for v, rs in judged if rs],
            'failed': [r for r in rows if r['verdict'] == V.FAILED],
            'shown': [(v, [r for r in rows if r['verdict'] == v]) for v in (V.INDICATIVE, V.CONSISTENCY)
                      if any(r['verdict'] == v for r in rows)],
            'not_judged': not_judged(rows, cases)}


def screen_lines(screen):
    """The first screen as (kind, text) lines; kind says how the HTML marks a line."""
    lines = []
    for system, host, desc, n, srcs in screen['machines']:
        lines.append(('machine', f"Machine ({system}{', host ' + host if host else ''}): {desc} — "
                                 f"{n} test cases from {', '.join(srcs)}"))
    if not screen['machines']:
        lines.append(('machine', 'Machine: not recorded by these run reports'))
    c = screen['counts']
    counted = sum(c[v] for v in V.COUNTED)
    lines.append(('counts', f"{c[V.REPRODUCED]} of {counted} judged rows reproduced (one row per claim and "
                            f"system); rows per verdict: " + ', '.join(f'{v}: {c[v]}' for v in V.ALL)))
    several = len({r.get('machine') for _, rs in screen['judged'] for r in rs}) > 1
    for v, rs in screen['judged']:
        lines.append((KLASS[v], f'{v}: ' + ', '.join(
            label(r) + (f" [{r['machine']}]" if several and r.get('machine') else '') for r in rs)))
    if screen['failed']:
        lines.append(('fail', "failed (the artifact's own failure, counted apart): "
                              + '; '.join(f"{label(r)}: {r['reason']}" for r in screen['failed'])))
    for v, rs in screen['shown']:
        lines.append((KLASS[v], f'{v} (shown, never counted): ' + ', '.join(label(r) for r in rs)))
    for v, group, rs, ncases in screen['not_judged']:
        head = f'needs {group}' if v == V.NOT_APPLICABLE else group
        what = f"{len(rs)} row{'s' if len(rs) != 1 else ''} {v}"
        did = 'skipped' if v == V.NOT_APPLICABLE else 'affected'
        tail = f"; {ncases} test case{'s' if ncases != 1 else ''} {did}" if ncases else ''
        lines.append(('na' if v == V.NOT_APPLICABLE else 'nr',
                      f"{head}: {what}{tail} ({', '.join(label(r) for r in rs)})"))
    return lines


# ---- the reference machine ------------------------------------------------------------

def load_reference(paths=None):
    """Rows judged on the reference machine's shipped run reports, by claim id, plus
    the checks those reports ran ('_checks')."""
    paths = paths if paths is not None else sorted(glob.glob(os.path.join(REFERENCE_DIR, '*.json*')))
    if not paths:
        return {}, []
    # Each report judged on its own (its machine's repeats are never pooled with another
    # machine's); a claim takes the first report, in name order, that judged it (a claim
    # one machine cannot run, e.g. on several GPUs, comes from the one that could).
    def judged(r):
        return r['verdict'] not in (V.NOT_RUN, V.NOT_APPLICABLE)
    by_id, checks = {}, set()
    for path in paths:
        cases = V.load_cases([path])
        checks |= {c['check'] for c in cases}
        for r in V.verdicts(cases):
            old = by_id.get(r['id'])
            if old is None or (not judged(old) and (judged(r) or old['verdict'] == V.NOT_RUN)):
                by_id[r['id']] = r
    by_id['_checks'] = checks
    return by_id, paths


def ref_machines(ref_rows):
    """The reference machines the rows were judged on, in first-seen order."""
    return list(dict.fromkeys(r['machine'] for k, r in ref_rows.items() if k != '_checks' and r.get('machine')))


def ref_cell(r, ref_rows):
    got = ref_rows.get(r['id'])
    ran = set(V.checks_of(data.claim(r['id']))) & ref_rows.get('_checks', set())
    if not ran:
        return NO_REFERENCE_RUN
    if got is None:
        return NO_REFERENCE_RUN
    if got['verdict'] in (V.NOT_RUN, V.NOT_APPLICABLE, V.FAILED):
        return f"{got['verdict']}: {got['reason']}"
    cell = f"{fmt_measured(got)}: {got['verdict']}" if got.get('parts') else got['verdict']
    if len(ref_machines(ref_rows)) > 1 and got.get('machine') and got['machine'] not in cell:
        cell += f" ({got['machine']})"
    return cell


def beside(fig, rows):
    """The verdict rows of the claims a figure's checks measure."""
    checks = set(fig.get('checks', []))
    ids = {c['id'] for c in data.all_claims() if checks & set(V.checks_of(c))}
    return [r for r in rows if r['id'] in ids]


def provenance(sources):
    """Per run report: its provenance bundle and hash (analysis/provenance.py), or None."""
    out = []
    for src in sources:
        try:
            with open(sidecar(src)) as f:
                out.append(dict(json.load(f), report=src))
        except (OSError, json.JSONDecodeError):
            out.append({'report': src, 'bundle': None, 'sha256': None, 'not_recorded': []})
    return out


def group_not_applicable(rows):
    """Not-applicable rows collapsed by the hardware they need: [(need, [rows])]."""
    groups = {}
    for r in rows:
        if r['verdict'] == V.NOT_APPLICABLE:
            groups.setdefault(r.get('group') or r.get('needs') or r['reason'], []).append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


# ---- test cases ------------------------------------------------------------------------

def case_outcome(c):
    """What a test case did, in words: never 'pass' beside a missed reference."""
    if c['status'] == V.MEASURED:
        return 'measured, missed a ReFrame reference' if c['missed'] else 'measured'
    if c['status'] == V.SKIPPED:
        return f"skipped ({c['verdict']})"
    return c['status']


_MISS = re.compile(r'(\w+)=(\S+) (\S+), expected \S+ \(l=(\S+), u=([^)]+)\)')


def fmt_missed(messages):
    """ReFrame's reference misses of every repeat, one entry per variable:
    'put_lat8_over_raw = 4.044, 3.93, 3.642× (3 repeats), expected ≤ 1.2×'."""
    by_var = {}
    for msg in messages:
        for var, value, unit, lo, hi in _MISS.findall(msg):
            def bound(x):
                return None if x.strip() in ('-inf', 'inf', 'None') else float(x)
            entry = by_var.setdefault(var, {'values': [], 'unit': unit, 'bound': (bound(lo), bound(hi))})
            entry['values'].append(float(value))
    if not by_var:
        return '; '.join(messages)
    return '; '.join(f"{var} = {with_unit(', '.join(num(v) for v in e['values']), e['unit'])} "
                     f"({len(e['values'])} repeat{'s' if len(e['values']) > 1 else ''}), "
                     f"expected {fmt_interval(e['bound'], e['unit'])}" for var, e in by_var.items())


def case_reason(c):
    parts = []
    if c['missed']:
        parts.append('missed ReFrame\'s reference: ' + fmt_missed(c['missed']))
    if c['reason']:
        parts.append(c['reason'])
    for var, vals in c.get('outliers', {}).items():
        med = c['perf'].get(var)
        parts.append(f"⚠ {var}: a repeat at {', '.join(num(v) for v in vals)} against a median of {num(med)} "
                     f'(more than {V.OUTLIER_FACTOR:g}x apart)')
    for later in c.get('later', []):
        parts.append(f"a later run ({later['source']}) measured nothing: {later['status']}: {later['reason']}")
    return '; '.join(parts)


def case_perf(c):
    return ', '.join(f"{k}={with_unit(num(v), c.get('units', {}).get(k))}" for k, v in c['perf'].items()) or '-'


def case_rows(cases):
    return [[' '.join([c['check']] + [f'{k}={v}' for k, v in c['params'].items()]),
             f"{c['system']}:{c['partition']}", case_outcome(c),
             f"{c['measured_repeats']} of {c['repeats']}", case_reason(c), case_perf(c)] for c in cases]


CASE_HEADERS = ['check', 'system', 'outcome', 'repeats measured', 'reason', 'performance (median)']


# ---- the page -----------------------------------------------------------------------

HEADERS = ['id', 'claim', 'system', 'paper (on)', 'measured (median, min..max, n)', 'expected',
           'verdict', 'reason']


def cells(r, ref=None):
    c = [r['id'], claim_text(r), r['system'], fmt_paper(r), fmt_measured(r), fmt_expected(r),
         r['verdict'], r['reason']]
    if ref is not None:
        c.append(ref_cell(r, ref))
    return c


def write(rows, cases, out_dir, sources, reference=None):
    reference = reference if reference is not None else {}
    ref_rows, ref_paths = reference.get('rows', {}), reference.get('paths', [])
    os.makedirs(out_dir, exist_ok=True)
    fig, fig_note = himeno_figure(cases, out_dir)
    figs = figures(cases, out_dir)
    for f in figs:
        f['claims'] = sorted({r['id'] for r in beside(f, rows)})
    tables = [cab_comm_table(cases), remd_table(cases), dlm_fault_table(cases)]
    screen = first_screen(rows, cases)
    counts = screen['counts']
    prov = provenance(sources)
    with open(os.path.join(out_dir, 'verdicts.json'), 'w') as f:
        json.dump({'sources': sources, 'reference_sources': ref_paths, 'provenance': prov,
                   'counts': counts, 'verdicts': rows}, f, indent=1, default=str)

    def table_rows(origin):
        return sorted((r for r in rows if r['origin'] == origin and r['verdict'] in TABLE_ORDER),
                      key=lambda r: TABLE_ORDER.index(r['verdict']))  # stable: claim order within a verdict
    paper, targets = table_rows('paper'), table_rows('target')
    consistency = [r for r in rows if r['verdict'] == V.CONSISTENCY]
    na_groups = group_not_applicable(rows)
    ref_machine = '; '.join(ref_machines(ref_rows))
    headers = HEADERS + ([f"reference machine ({ref_machine})" if ref_machine else 'reference machine']
                         if ref_rows else [])
    ref = ref_rows if ref_rows else None
    lines = screen_lines(screen)
    prov_rows = [[os.path.basename(p['report']), p['bundle'] or 'none (run without analysis/provenance.py)',
                  p['sha256'] or '-', ', '.join(p.get('not_recorded') or []) or '-'] for p in prov]
    prov_headers = ['run report', 'provenance bundle', 'SHA-256 of its SHA256SUMS', 'not recorded']
    drawn = [f for f in figs if f['file']]
    undrawn = [f for f in figs if not f['file']]

    # -- Markdown
    def md_table(hdr, body):
        return (['| ' + ' | '.join(hdr) + ' |', '|' + '---|' * len(hdr)] +
                ['| ' + ' | '.join(str(c).replace('|', '/').replace('\n', ' ') for c in row) + ' |'
                 for row in body])

    md = ['# umstudy report', ''] + [f'- {text}' for _, text in lines]
    md += ['', 'Sources: ' + ', '.join(sources)]
    if ref_paths:
        md += ['', 'Reference machine runs: ' + ', '.join(os.path.basename(p) for p in ref_paths)]
    md += ['', '## Paper claims', ''] + md_table(headers, [cells(r, ref) for r in paper])
    md += ['', '## Artifact targets', ''] + md_table(headers, [cells(r, ref) for r in targets])
    md += ['', '## Paper consistency (not reproductions)', '']
    md += md_table(['claim', 'system', 'paper (on)', 'value', 'reason'],
                   [[r['id'], r['system'], fmt_paper(r), fmt_measured(r), r['reason']]
                    for r in consistency]) if consistency else ['- none']
    md += ['', '## Not applicable here', '']
    for need, members in na_groups:
        md += [f"- **{need}**: " + ', '.join(sorted({label(r) for r in members}))]
    md += ['- none'] if not na_groups else []
    md += ['', '## Summary', ''] + [f'- {v}: {n}' for v, n in counts.items() if n]
    md += ['', '## Himeno', '', f'![Himeno]({fig})' if fig else f'_Not drawn: {fig_note}_', '',
           f"P001 fig. 5.8. Claims: {', '.join(HIMENO_CLAIMS)}.", '', '## Figures', '']
    for f in drawn:
        md += [f"### {f['name']}", '', f['caption'] + (f" Claims: {', '.join(f['claims'])}." if f['claims'] else ''), '']
        md += [f"![{f['name']}]({f['file']})", '']
        md += [f"_Note: {f['note']}_", ''] if f['note'] else []
    if undrawn:
        md += ['### Not drawn', ''] + [f"- {f['name']}: {f['note']}" for f in undrawn] + ['']
    md += ['## Tables', '']
    for t in tables:
        md += [f"### {t['title']}", '', t['caption'], '']
        for tab in t['tables']:
            md += [f"#### {tab['heading']}", ''] + md_table(tab['headers'], tab['rows']) + ['']
        md += [f"_Note: {t['note']}_", ''] if t['note'] else []
    md += ['## Provenance', ''] + md_table(prov_headers, prov_rows) + ['']
    md += ['## Test cases', ''] + md_table(CASE_HEADERS, case_rows(cases))
    with open(os.path.join(out_dir, 'report.md'), 'w') as f:
        f.write('\n'.join(md) + '\n')

    # -- HTML
    def esc(text):
        """Escaped, with every run of Japanese marked as such (the browser picks a font for
        it; the English beside it reads without one)."""
        return CJK_RUN.sub(r'<span lang="ja">\1</span>', html.escape(str(text)))

    def table(hdr, body, klass_of=None, cls=''):
        out = [f'<table class="{cls}"><tr>' + ''.join(f'<th>{esc(h)}</th>' for h in hdr) + '</tr>']
        for i, row in enumerate(body):
            k = f' class="{klass_of(i)}"' if klass_of else ''
            out.append(f'<tr{k}>' + ''.join(f'<td>{esc(c)}</td>' for c in row) + '</tr>')
        return '\n'.join(out) + '</table>'

    def claims_table(rs):
        if not rs:
            return '<p>none</p>'
        return table(headers, [cells(r, ref) for r in rs], lambda i: KLASS[rs[i]['verdict']], 'claims')

    def near_html(f):
        near = beside(f, rows)
        if not near:
            return ''
        return table(['claim', 'system', 'paper (on)', 'measured', 'verdict'],
                     [[r['id'], r['system'], fmt_paper(r), fmt_measured(r), r['verdict']] for r in near],
                     lambda i: KLASS[near[i]['verdict']], 'beside')

    figs_html = '\n'.join(
        f"<figure id=\"{esc(f['name'])}\"><img src=\"{esc(f['file'])}\" alt=\"{esc(f['caption'])}\">"
        + f"<figcaption><strong>{esc(f['name'])}</strong>: {esc(f['caption'])}"
        + (f" <strong>Claims: {esc(', '.join(f['claims']))}.</strong>" if f['claims'] else '')
        + (f"<br><em>Note: {esc(f['note'])}</em>" if f['note'] else '') + '</figcaption>'
        + near_html(f) + '</figure>'
        for f in drawn)
    if undrawn:
        figs_html += ('<h3>Not drawn</h3><ul class="undrawn">'
                      + ''.join(f"<li><strong>{esc(f['name'])}</strong>: {esc(f['note'])}</li>" for f in undrawn)
                      + '</ul>')
    na_html = ''.join(
        f"<li><strong>{esc(need)}</strong>: {esc(', '.join(sorted({label(r) for r in members})))}</li>"
        for need, members in na_groups) or '<li>none</li>'
    cons_html = table(['claim', 'system', 'paper (on)', 'value', 'reason'],
                      [[r['id'], r['system'], fmt_paper(r), fmt_measured(r), r['reason']] for r in consistency],
                      lambda i: 'con', 'claims') if consistency else '<p>none</p>'
    tables_html = '\n'.join(
        f"<h3>{esc(t['title'])}</h3><p>{esc(t['caption'])}</p>" + ''.join(
            f"<h4>{esc(tab['heading'])}</h4>" + table(tab['headers'], tab['rows']) for tab in t['tables'])
        + (f"<p><em>Note: {esc(t['note'])}</em></p>" if t['note'] else '')
        for t in tables)
    case_klass = {V.MEASURED: 'ok', V.SKIPPED: 'na', V.FAILED: 'fail', V.NOT_RUN: 'nr'}
    cases_html = table(CASE_HEADERS, case_rows(cases),
                       lambda i: 'bad' if cases[i]['missed'] else case_klass[cases[i]['status']], 'cases')
    ref_note = (f"<p>Last column: the same claim judged on the reference machine's runs "
                f"({esc(', '.join(os.path.basename(p) for p in ref_paths))}), shipped in analysis/reference/.</p>"
                if ref_paths else '')
    screen_html = '<ul class="screen">' + ''.join(f'<li class="{k}">{esc(t)}</li>' for k, t in lines) + '</ul>'
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>umstudy report</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; max-width: 1600px; }}
table {{ border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }}
td, th {{ border: 1px solid #ccc; padding: 3px 6px; vertical-align: top; text-align: left; }}
tr.ok td {{ background: #e6f4e6; }} tr.bad td {{ background: #f8dddd; }}
tr.inc td {{ background: #fff4d6; }} tr.ind td {{ background: #eef3fb; }}
tr.con td {{ background: #f3ecf8; }} tr.na td {{ background: #f4f4f4; color: #555; }} tr.nr td {{ color: #888; }}
tr.fail td {{ background: #e03131; color: #fff; }}
ul.screen {{ list-style: none; padding-left: 0; }} ul.screen li {{ margin: 0.25em 0; padding: 2px 6px; }}
li.machine {{ font-weight: bold; }} li.counts {{ font-weight: bold; font-size: 1.1em; }}
li.ok {{ background: #e6f4e6; }} li.bad {{ background: #f8dddd; }} li.inc {{ background: #fff4d6; }}
li.fail {{ background: #e03131; color: #fff; font-weight: bold; }} li.ind {{ background: #eef3fb; }}
li.con {{ background: #f3ecf8; }} li.na {{ color: #555; }} li.nr {{ color: #777; }}
table.claims td:nth-child(2) {{ max-width: 28em; }}
figure {{ margin: 2em 0; }} figure img {{ max-width: 100%; height: auto; display: block; }}
figcaption {{ font-size: 0.95em; margin: 0.4em 0; }}
</style></head><body>
<h1>umstudy report</h1>
<section id="first-screen">{screen_html}</section>
<p>Sources: {esc(', '.join(sources))}</p>
{ref_note}
<section id="claims"><h2>Paper claims</h2>
{claims_table(paper)}
</section>
<section id="targets"><h2>Artifact targets</h2>
{claims_table(targets)}
</section>
<section id="consistency"><h2>Paper consistency (not reproductions)</h2>
{cons_html}
</section>
<section id="not-applicable"><h2>Not applicable here</h2>
<ul>{na_html}</ul></section>
<section id="summary"><h2>Summary</h2><ul>{''.join(f'<li>{esc(v)}: {n}</li>' for v, n in counts.items() if n)}</ul></section>
<section id="himeno"><h2>Himeno</h2>
{f'<img src="{fig}" alt="Himeno GFLOPS per variant and system" style="max-width:100%">' if fig else f'<p><em>Not drawn: {esc(fig_note)}</em></p>'}
<p>P001 fig. 5.8: GFLOPS per variant and system (median of the repeats, min..max). <strong>Claims: {esc(', '.join(HIMENO_CLAIMS))}.</strong></p>
</section>
<section id="figures"><h2>Figures</h2>
{figs_html}
</section>
<section id="tables"><h2>Tables</h2>
{tables_html}
</section>
<section id="provenance"><h2>Provenance</h2>
<p>Check a bundle with <code>sha256sum SHA256SUMS</code> (the hash below) and <code>sha256sum -c SHA256SUMS</code> inside it.</p>
{table(prov_headers, prov_rows)}
</section>
<section id="cases"><h2>Test cases</h2>
{cases_html}
</section>
</body></html>
"""
    with open(os.path.join(out_dir, 'report.html'), 'w') as f:
        f.write(page)
    return os.path.join(out_dir, 'report.html')


def failures_are_verdicts(path):
    """0 if every failed case of a run report failed only its performance references
    (a measured "not reproduced", which the report judges), 1 if anything else failed
    (a build, a crash, a wrong result, a job the scheduler refused) or the session was
    cut short (aborted cases)."""
    with open(path) as f:
        report = json.load(f)
    tcs = [tc for run in report.get('runs', []) for tc in run.get('testcases', [])]
    aborted = [tc['name'] for tc in tcs if V._aborted(tc)]
    if aborted:
        print(f'report: {len(aborted)} case(s) aborted (the session was cancelled or timed out): '
              f'{", ".join(aborted[:5])}{" ..." if len(aborted) > 5 else ""}', file=sys.stderr)
        return 1
    failed = [tc for tc in tcs if tc.get('result') in ('fail', 'fail_deps')]
    other = [tc['name'] for tc in failed if tc.get('fail_phase') != 'performance']
    if other:
        print(f'report: {len(other)} check(s) failed outside performance: {", ".join(other)}', file=sys.stderr)
        return 1
    if failed:
        print(f'report: {len(failed)} check(s) missed performance references; the report judges them',
              file=sys.stderr)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('reports', nargs='+', help='ReFrame run report JSON files, oldest first')
    ap.add_argument('--out', help='output directory')
    ap.add_argument('--reference', action='append', metavar='REPORT', default=None,
                    help='a run report of the reference machine, shown beside this run (repeatable; '
                         'default: analysis/reference/*.json)')
    ap.add_argument('--failures-are-verdicts', action='store_true',
                    help='only check one run report: exit 0 if its failures are all missed '
                         'performance references, 1 otherwise (make run uses this)')
    args = ap.parse_args(argv)
    if args.failures_are_verdicts:
        return failures_are_verdicts(args.reports[0])
    if not args.out:
        ap.error('--out is required')
    missing = [p for p in args.reports + (args.reference or []) if not os.path.isfile(p)]
    if missing:
        print(f'report: no such run report: {", ".join(missing)}', file=sys.stderr)
        return 2
    try:
        sources = V.measurement_reports(args.reports)
        cases = V.load_cases(sources)
        ref_rows, ref_paths = load_reference(args.reference)
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        print(f'report: not a ReFrame run report ({e})', file=sys.stderr)
        return 2
    if not sources:
        print('report: only dry-run reports given: no measurements to judge', file=sys.stderr)
        return 2
    rows = V.verdicts(cases)
    path = write(rows, cases, args.out, [os.path.abspath(p) for p in sources],
                 {'rows': ref_rows, 'paths': ref_paths})
    print(path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
