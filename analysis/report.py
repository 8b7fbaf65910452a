#!/usr/bin/env python3
"""ReFrame run report(s) -> claim verdicts, tables, figures, report.md and report.html.

    python3 analysis/report.py --out DIR run-report.json [more.json ...]

The page leads with the paper claims (the claim, the paper's system and number, the
measured median with its spread, size and machine, the verdict and why), then the
artifact's targets, then what could not be judged here grouped by the hardware it
needs.  Verdicts come from reframe/lib/umstudy/verdicts.py, the module ReFrame's
references come from.  The reference machine's run reports (analysis/reference/) are
judged the same way and shown beside this run's numbers.
"""
import argparse
import glob
import html
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'reframe', 'lib'))
from umstudy import data, verdicts as V  # noqa: E402

from figures import cab_comm_table, dlm_fault_table, figures, himeno_figure, remd_table  # noqa: E402
from provenance import sidecar  # noqa: E402

# The project's own reference runs: ReFrame run reports of the reference machine.
REFERENCE_DIR = os.path.join(HERE, 'reference')
KLASS = {V.REPRODUCED: 'ok', V.NOT_REPRODUCED: 'bad', V.INCONCLUSIVE: 'inc', V.INDICATIVE: 'ind',
         V.CONSISTENCY: 'con', V.NOT_APPLICABLE: 'na', V.NOT_RUN: 'nr'}
# The claims the Himeno figure (P001 fig. 5.8) shows.
HIMENO_CLAIMS = ('P001-C8', 'HIM-T1', 'HIM-T2')
# The report's tables, in reading order: what was judged comes first.
JUDGED = (V.REPRODUCED, V.NOT_REPRODUCED, V.INCONCLUSIVE, V.INDICATIVE)


# ---- formatting ---------------------------------------------------------------------

def fmt(v):
    if v is None:
        return '-'
    if isinstance(v, dict):
        return '; '.join(f'{k}: {fmt(x)}' for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return '[' + ', '.join(fmt(x) for x in v) + ']'
    if isinstance(v, float):
        return f'{v:.4g}'
    return str(v)


def fmt_measured(r):
    """'median (min-max, n=3) [size, machine]' per part."""
    def one(p):
        s = p['spread']
        text = fmt(p['measured'])
        if s and s['n'] > 1:
            text += f" ({fmt(s['min'])}..{fmt(s['max'])}, n={s['n']})"
        elif s:
            text += ' (n=1)'
        return text
    parts = r.get('parts') or {}
    if not parts:
        return fmt(r['measured'])
    if list(parts) == ['None']:
        body = one(parts['None'])
    else:
        body = '; '.join(f'{k}: {one(p)}' for k, p in parts.items())
    where = ', '.join(x for x in (r.get('size') and f"{r['size']} size", r.get('machine')) if x)
    return body + (f' [{where}]' if where else '')


def fmt_paper(r):
    return f"{fmt(r['paper'])} {r['unit'] or ''} ({r['paper_system']})"


def load_reference(paths=None):
    """Rows judged on the reference machine's shipped run reports, by claim id."""
    paths = paths if paths is not None else sorted(glob.glob(os.path.join(REFERENCE_DIR, '*.json*')))
    if not paths:
        return {}, []
    # Each report judged on its own (its machine's repeats are never pooled with another
    # machine's); a claim takes the first report, in name order, that judged it (a claim
    # one machine cannot run, e.g. on several GPUs, comes from the one that could).
    def judged(r):
        return r['verdict'] not in (V.NOT_RUN, V.NOT_APPLICABLE)
    by_id = {}
    for path in paths:
        for r in V.verdicts(V.load_cases([path])):
            old = by_id.get(r['id'])
            if old is None or (not judged(old) and (judged(r) or old['verdict'] == V.NOT_RUN)):
                by_id[r['id']] = r
    return by_id, paths


def beside(fig, rows):
    """The verdict rows of the claims a figure's checks measure."""
    checks = set(fig.get('checks', []))

    def uses(claim):
        def walk(sel):
            return sel.get('check') in checks or any(walk(sel[k]) for k in ('over', 'minus') if k in sel)
        return any(walk(sel) for _, sel in V.selectors(claim))
    ids = {c['id'] for c in data.all_claims() if uses(c)}
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


def group_not_judged(rows):
    """Not-applicable rows collapsed by the hardware they need: [(need, [rows])]."""
    groups = {}
    for r in rows:
        if r['verdict'] == V.NOT_APPLICABLE:
            need = r.get('needs') or r['reason'].split(' (measured here')[0]
            groups.setdefault(need, []).append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


# ---- the page -----------------------------------------------------------------------

HEADERS = ['id', 'claim', 'system', 'paper (on)', 'measured (median, min..max, n)', 'expected',
           'verdict', 'reason']


def cells(r, ref=None):
    c = [r['id'], r['text'], r['system'], fmt_paper(r), fmt_measured(r), fmt(r['expected']),
         r['verdict'], r['reason']]
    if ref is not None:
        got = ref.get(r['id'])
        cell = '-' if not got else f"{fmt_measured(got)}: {got['verdict']}" if got.get('parts') else got['verdict']
        if got and len(ref_machines(ref)) > 1 and got.get('machine'):
            cell += f" ({got['machine']})"
        c.append(cell)
    return c


def ref_machines(ref_rows):
    """The reference machines the rows were judged on, in first-seen order."""
    return list(dict.fromkeys(r['machine'] for r in ref_rows.values() if r.get('machine')))


def write(rows, cases, out_dir, sources, reference=None):
    reference = reference if reference is not None else {}
    ref_rows, ref_paths = reference.get('rows', {}), reference.get('paths', [])
    os.makedirs(out_dir, exist_ok=True)
    fig, fig_note = himeno_figure(cases, out_dir)
    figs = figures(cases, out_dir)
    for f in figs:
        f['claims'] = sorted({r['id'] for r in beside(f, rows)})
    tables = [cab_comm_table(cases), remd_table(cases), dlm_fault_table(cases)]
    counts = {v: 0 for v in V.ALL}
    for r in rows:
        counts[r['verdict']] += 1
    prov = provenance(sources)
    with open(os.path.join(out_dir, 'verdicts.json'), 'w') as f:
        json.dump({'sources': sources, 'reference_sources': ref_paths, 'provenance': prov,
                   'counts': counts, 'verdicts': rows}, f, indent=1, default=str)

    order = JUDGED + (V.NOT_RUN,)  # what was measured first, then what did not run

    def table_rows(origin):
        return sorted((r for r in rows if r['origin'] == origin and r['verdict'] in order),
                      key=lambda r: order.index(r['verdict']))  # stable: claim order within a verdict
    paper, targets = table_rows('paper'), table_rows('target')
    consistency = [r for r in rows if r['verdict'] == V.CONSISTENCY]
    na_groups = group_not_judged(rows)
    ref_machine = '; '.join(ref_machines(ref_rows))
    headers = HEADERS + ([f"reference machine ({ref_machine})" if ref_machine else 'reference machine']
                         if ref_rows else [])
    ref = ref_rows if ref_rows else None
    summary = [f'{k}: {v}' for k, v in counts.items() if v]
    counted = counts[V.REPRODUCED] + counts[V.NOT_REPRODUCED] + counts[V.INCONCLUSIVE]
    lead = (f'{counts[V.REPRODUCED]} of {counted} judged claim x system rows reproduced '
            f'({counts[V.INDICATIVE]} indicative and {counts[V.CONSISTENCY]} paper-consistency rows are '
            'shown but never counted)')
    prov_rows = [[os.path.basename(p['report']), p['bundle'] or 'none (run without analysis/provenance.py)',
                  p['sha256'] or '-', ', '.join(p.get('not_recorded') or []) or '-'] for p in prov]
    prov_headers = ['run report', 'provenance bundle', 'SHA-256 of its SHA256SUMS', 'not recorded']

    # -- Markdown
    def md_table(hdr, body):
        return (['| ' + ' | '.join(hdr) + ' |', '|' + '---|' * len(hdr)] +
                ['| ' + ' | '.join(str(c).replace('|', '/').replace('\n', ' ') for c in row) + ' |'
                 for row in body])

    md = ['# umstudy report', '', lead, '', 'Sources: ' + ', '.join(sources)]
    if ref_paths:
        md += ['', 'Reference machine runs: ' + ', '.join(os.path.basename(p) for p in ref_paths)]
    md += ['', '## Paper claims', ''] + md_table(headers, [cells(r, ref) for r in paper])
    md += ['', '## Artifact targets', ''] + md_table(headers, [cells(r, ref) for r in targets])
    md += ['', '## Paper consistency (not reproductions)', '']
    md += md_table(['claim', 'system', 'paper (on)', 'value', 'reason'],
                   [[r['id'], r['system'], fmt_paper(r), fmt(r['measured']), r['reason']]
                    for r in consistency]) if consistency else ['- none']
    md += ['', '## Not applicable here', '']
    for need, members in na_groups:
        md += [f"- **{need}**: " + ', '.join(sorted({f"{r['id']} ({r['system']})" for r in members}))]
    md += ['- none'] if not na_groups else []
    md += ['', '## Summary', ''] + [f'- {s}' for s in summary]
    md += ['', '## Himeno', '', f'![Himeno]({fig})' if fig else f'_{fig_note}_', '',
           f"P001 fig. 5.8. Claims: {', '.join(HIMENO_CLAIMS)}.", '', '## Figures', '']
    for f in figs:
        md += [f"### {f['name']}", '', f['caption'] + (f" Claims: {', '.join(f['claims'])}." if f['claims'] else ''), '']
        md += [f"![{f['name']}]({f['file']})", ''] if f['file'] else ['_Not drawn._', '']
        md += [f"_Note: {f['note']}_", ''] if f['note'] else []
    md += ['## Tables', '']
    for t in tables:
        md += [f"### {t['title']}", '', t['caption'], '']
        for tab in t['tables']:
            md += [f"#### {tab['heading']}", ''] + md_table(tab['headers'], tab['rows']) + ['']
        md += [f"_Note: {t['note']}_", ''] if t['note'] else []
    md += ['## Provenance', ''] + md_table(prov_headers, prov_rows) + ['']
    md += ['## Test cases', ''] + md_table(
        ['check', 'system', 'result', 'repeats', 'reason'],
        [[f"{c['check']} {' '.join(f'{k}={v}' for k, v in c['params'].items())}", f"{c['system']}:{c['partition']}",
          c['result'], c['repeats'], c['reason'] or ''] for c in cases])
    with open(os.path.join(out_dir, 'report.md'), 'w') as f:
        f.write('\n'.join(md) + '\n')

    # -- HTML
    esc = html.escape

    def table(hdr, body, klass_of=None, cls=''):
        out = [f'<table class="{cls}"><tr>' + ''.join(f'<th>{esc(h)}</th>' for h in hdr) + '</tr>']
        for i, row in enumerate(body):
            k = f' class="{klass_of(i)}"' if klass_of else ''
            out.append(f'<tr{k}>' + ''.join(f'<td>{esc(str(c))}</td>' for c in row) + '</tr>')
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
        f"<figure id=\"{esc(f['name'])}\">"
        + (f"<img src=\"{esc(f['file'])}\" alt=\"{esc(f['caption'])}\">" if f['file']
           else '<p><em>Not drawn.</em></p>')
        + f"<figcaption><strong>{esc(f['name'])}</strong>: {esc(f['caption'])}"
        + (f" <strong>Claims: {esc(', '.join(f['claims']))}.</strong>" if f['claims'] else '')
        + (f"<br><em>Note: {esc(f['note'])}</em>" if f['note'] else '') + '</figcaption>'
        + near_html(f) + '</figure>'
        for f in figs)
    na_html = ''.join(
        f"<li><strong>{esc(need)}</strong>: {esc(', '.join(sorted({r['id'] + ' (' + r['system'] + ')' for r in members})))}</li>"
        for need, members in na_groups) or '<li>none</li>'
    cons_html = table(['claim', 'system', 'paper (on)', 'value', 'reason'],
                      [[r['id'], r['system'], fmt_paper(r), fmt(r['measured']), r['reason']] for r in consistency],
                      lambda i: 'con', 'claims') if consistency else '<p>none</p>'
    tables_html = '\n'.join(
        f"<h3>{esc(t['title'])}</h3><p>{esc(t['caption'])}</p>" + ''.join(
            f"<h4>{esc(tab['heading'])}</h4>" + table(tab['headers'], tab['rows']) for tab in t['tables'])
        + (f"<p><em>Note: {esc(t['note'])}</em></p>" if t['note'] else '')
        for t in tables)
    cases_html = table(['check', 'system', 'result', 'repeats', 'reason', 'performance (median)'],
                       [[f"{c['check']} {' '.join(f'{k}={v}' for k, v in c['params'].items())}",
                         f"{c['system']}:{c['partition']}", c['result'], c['repeats'], c['reason'] or '',
                         fmt(c['perf'])] for c in cases])
    ref_note = (f"<p>Last column: the same claim judged on the reference machine's runs "
                f"({esc(', '.join(os.path.basename(p) for p in ref_paths))}), shipped in analysis/reference/.</p>"
                if ref_paths else '')
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>umstudy report</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; max-width: 1600px; }}
table {{ border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }}
td, th {{ border: 1px solid #ccc; padding: 3px 6px; vertical-align: top; text-align: left; }}
tr.ok td {{ background: #e6f4e6; }} tr.bad td {{ background: #f8dddd; }}
tr.inc td {{ background: #fff4d6; }} tr.ind td {{ background: #eef3fb; }}
tr.con td {{ background: #f3ecf8; }} tr.na td {{ background: #f4f4f4; color: #555; }} tr.nr td {{ color: #888; }}
table.claims td:nth-child(2) {{ max-width: 28em; }}
figure {{ margin: 2em 0; }} figure img {{ max-width: 100%; height: auto; display: block; }}
figcaption {{ font-size: 0.95em; margin: 0.4em 0; }}
</style></head><body>
<h1>umstudy report</h1>
<p><strong>{esc(lead)}</strong></p>
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
<section id="summary"><h2>Summary</h2><ul>{''.join(f'<li>{esc(s)}</li>' for s in summary)}</ul></section>
<section id="himeno"><h2>Himeno</h2>
{f'<img src="{fig}" alt="Himeno GFLOPS per variant and system" style="max-width:100%">' if fig else f'<p><em>{esc(fig_note)}</em></p>'}
<p>P001 fig. 5.8: GFLOPS per variant and system. <strong>Claims: {esc(', '.join(HIMENO_CLAIMS))}.</strong></p>
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
    (a build, a crash, a wrong result) or the session was cut short (aborted cases)."""
    with open(path) as f:
        report = json.load(f)
    tcs = [tc for run in report.get('runs', []) for tc in run.get('testcases', [])]
    aborted = [tc['name'] for tc in tcs if V._aborted(tc)]
    if aborted:
        print(f'report: {len(aborted)} case(s) aborted (the session was cancelled or timed out): '
              f'{", ".join(aborted[:5])}{" ..." if len(aborted) > 5 else ""}', file=sys.stderr)
        return 1
    failed = [tc for tc in tcs if tc.get('result') == 'fail']
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
