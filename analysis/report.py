#!/usr/bin/env python3
"""ReFrame run report(s) -> claim verdicts, tables, plots, report.md and report.html.

    python3 analysis/report.py --out DIR run-report.json [more.json ...]

Every claim and target of analysis/claims.yaml is judged on every system that ran:
reproduced / not reproduced / not applicable here / not run, each with its reason.
Expected values come from reframe/lib/umstudy/data.py (claims + system facts), the same
place ReFrame's references come from.
"""
import argparse
import html
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'reframe', 'lib'))
from umstudy import data  # noqa: E402

from figures import cab_comm_table, case_is, figures, himeno_figure, remd_table  # noqa: E402
from provenance import sidecar  # noqa: E402

REPRODUCED, NOT_REPRODUCED, NOT_APPLICABLE, NOT_RUN = (
    'reproduced', 'not reproduced', 'not applicable here', 'not run')


# ---- reading ReFrame reports ----------------------------------------------------------

def parse_name(name):
    """'HimenoCudaPerf %alloc=explicit' -> ('HimenoCudaPerf', {'alloc': 'explicit'})."""
    parts = name.split()
    params = dict(p[1:].split('=', 1) for p in parts[1:] if p.startswith('%') and '=' in p)
    return parts[0], params


def load_cases(paths):
    """Test cases of all reports; a later run of the same case at the same size replaces
    an earlier one (quick and paper runs of a check are different experiments)."""
    cases = {}
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        if '--dry-run' in report.get('session_info', {}).get('cmdline', '').split():
            continue  # generated job scripts, no measurements
        for run in report.get('runs', []):
            for tc in run.get('testcases', []):
                if tc.get('fixture'):
                    continue
                check, params = parse_name(tc['name'])
                perf = {key.rsplit(':', 1)[-1]: val[0]
                        for key, val in (tc.get('perfvalues') or {}).items()}
                case = {
                    'check': check, 'params': params, 'system': tc['system'],
                    'partition': tc['partition'], 'result': tc['result'], 'perf': perf,
                    'reason': tc.get('skip_reason') or tc.get('fail_reason') or '',
                    'info': tc.get('partition_info') or {},
                    'size': tc.get('size', 'quick'),
                    # Every measurement line the program printed (umbench keeps them for
                    # the figures: sweep points, per-rep traces) and its parameters.
                    'records': tc.get('records_kept') or [],
                    'record_params': tc.get('record_params') or {},
                }
                cases[(tc['system'], tc['partition'], tc['name'], case['size'])] = case
    return list(cases.values())


def find(cases, system, selector, size=None):
    """The case a selector names on a system: at `size` if given, else the paper-size
    run where there is one (the claims are about the papers' sizes)."""
    hits = [c for c in cases
            if c['system'] == system and case_is(c, selector['check'], selector.get('params') or {})]
    hits.sort(key=lambda c: (c['size'] != size if size else c['size'] != 'paper'))
    return hits[0] if hits else None


# ---- judging ------------------------------------------------------------------------

def within(measured, expected, tol):
    """measured agrees with expected (number or [lo, hi]) under {rel|abs} tolerance."""
    lo, hi = data.band(expected, tol)
    return lo <= measured <= hi


def _case(cases, system, selector, size_needed):
    """(case, None) or (None, (verdict, reason)) for the case a selector names."""
    case = find(cases, system, selector, size_needed)
    desc = selector['check'] + ''.join(f' {k}={v}' for k, v in (selector.get('params') or {}).items())
    if case is None:
        return None, (NOT_RUN, f'{desc} did not run on this system')
    if case['result'] == 'skip':
        return None, (NOT_APPLICABLE, f'{desc} skipped: {case["reason"] or "no reason recorded"}')
    if case['result'] != 'pass' and selector['var'] not in case['perf']:
        return None, (NOT_REPRODUCED, f'{desc} failed: {case["reason"]}')
    if case['perf'].get(selector['var']) is None:
        return None, (NOT_RUN, f'{desc} reported no {selector["var"]}')
    if size_needed and case['size'] != size_needed:
        return None, (NOT_APPLICABLE, f'{desc} ran at {case["size"]} size; the claim is about {size_needed} size')
    return case, None


def _facts(case, system):
    # The facts recorded with the run (what detection saw then) win over today's.
    info = case['info']
    return info['facts'] if 'facts' in info else data.facts(system)


def _measure(cases, system, selector, size_needed=None):
    """(value, None) or (None, (verdict, reason)): a selector's value, combined with
    its `over` / `minus` selector or divided by `over_fact`."""
    case, problem = _case(cases, system, selector, size_needed)
    if problem:
        return None, problem
    value = case['perf'][selector['var']]
    for key in ('over', 'minus'):
        if key in selector:
            other, problem = _measure(cases, system, selector[key], size_needed)
            if problem:
                return None, problem
            value = value - other if key == 'minus' else (value / other if other else float('nan'))
    if 'over_fact' in selector:
        try:
            value /= data.evaluate(selector['over_fact'], _facts(case, system))
        except data.MissingFact as e:
            return None, (NOT_APPLICABLE, f'system facts do not state {e.args[0]}')
    return value, None


def judge(claim, system, cases):
    """One row of the verdict table."""
    row = {'id': claim['id'], 'text': claim['text'], 'system': system,
           'paper_system': claim.get('system') or 'artifact target', 'paper': claim.get('value'),
           'unit': claim.get('unit'), 'measured': None, 'expected': None}
    sels = data.selectors(claim)
    if not sels:
        return dict(row, verdict=NOT_RUN,
                    reason=f"component '{claim.get('component')}' is not in this build yet")
    feats = next((c['info'].get('features', []) for c in cases if c['system'] == system and c['info']), [])
    ok, why = data.applies(claim, system, feats)
    if not ok:
        # A claim about another system is not judged here, but what this system
        # measured for it is shown beside the paper's value.
        here = {key: _measure(cases, system, sel, claim.get('size'))[0] for key, sel in sels}
        if any(v is not None for v in here.values()):
            return dict(row, verdict=NOT_APPLICABLE, reason=why + ' (measured here for comparison)',
                        measured=here[None] if list(here) == [None] else here)
        return dict(row, verdict=NOT_APPLICABLE, reason=why)

    if claim['kind'] == 'bound':
        measure = sels[0][1]
        value, problem = _measure(cases, system, measure, claim.get('size'))
        if problem:
            return dict(row, verdict=problem[0], reason=problem[1])
        case = find(cases, system, measure, claim.get('size'))
        facts = _facts(case, system)
        b = claim['bound']
        try:
            lo = data.evaluate(b['lower'], facts) if 'lower' in b else None
            hi = data.evaluate(b['upper'], facts) if 'upper' in b else None
        except data.MissingFact as e:
            return dict(row, measured=value, verdict=NOT_APPLICABLE,
                        reason=f'system facts do not state {e.args[0]}')
        good = (lo is None or value >= lo) and (hi is None or value <= hi)
        return dict(row, measured=value, expected=[lo, hi],
                    verdict=REPRODUCED if good else NOT_REPRODUCED,
                    reason='within the bound' if good else 'outside the bound')

    # Every other kind: each key's measurement within the paper's value +- tolerance.
    measured, expected, verdicts = {}, {}, []
    for key, sel in sels:
        value, problem = _measure(cases, system, sel, claim.get('size'))
        if problem:
            return dict(row, verdict=problem[0], reason=problem[1])
        want = data.expected(claim, key)
        measured[key] = value
        expected[key] = data.band(want, claim['tolerance'])
        verdicts.append(within(value, want, claim['tolerance']))
    if list(measured) == [None]:
        measured, expected = measured[None], expected[None]
    good = all(verdicts)
    return dict(row, measured=measured, expected=expected,
                verdict=REPRODUCED if good else NOT_REPRODUCED,
                reason=f"tolerance {claim['tolerance'].get('reason', '')}")


def verdicts(cases):
    systems = sorted({c['system'] for c in cases})
    return [judge(claim, s, cases) for claim in data.all_claims() for s in systems]


# ---- output -------------------------------------------------------------------------

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


def beside(fig, rows):
    """The verdict rows of the claims a figure's checks measure: the paper's numbers
    shown next to the figure."""
    checks = set(fig.get('checks', []))

    def uses(claim):
        def walk(sel):
            return sel.get('check') in checks or any(walk(sel[k]) for k in ('over', 'minus') if k in sel)
        return any(walk(sel) for _, sel in data.selectors(claim))
    ids = {c['id'] for c in data.all_claims() if uses(c)}
    return [r for r in rows if r['id'] in ids]


def write(rows, cases, out_dir, sources):
    os.makedirs(out_dir, exist_ok=True)
    fig, fig_note = himeno_figure(cases, out_dir)
    figs = figures(cases, out_dir)
    tables = [cab_comm_table(cases), remd_table(cases)]
    counts = {}
    for r in rows:
        counts[r['verdict']] = counts.get(r['verdict'], 0) + 1
    prov = provenance(sources)
    with open(os.path.join(out_dir, 'verdicts.json'), 'w') as f:
        json.dump({'sources': sources, 'provenance': prov, 'counts': counts, 'verdicts': rows},
                  f, indent=1, default=str)
    prov_rows = [[os.path.basename(p['report']), p['bundle'] or 'none (run without analysis/provenance.py)',
                  p['sha256'] or '-', ', '.join(p.get('not_recorded') or []) or '-'] for p in prov]
    prov_headers = ['run report', 'provenance bundle', 'SHA-256 of its SHA256SUMS', 'not recorded']

    headers = ['claim', 'system', 'paper (on)', 'measured', 'expected', 'verdict', 'reason']

    def cells(r):
        return [r['id'], r['system'], f"{fmt(r['paper'])} {r['unit'] or ''} ({r['paper_system']})",
                fmt(r['measured']), fmt(r['expected']), r['verdict'], r['reason']]

    md = ['# umstudy report', '', 'Sources: ' + ', '.join(sources), '',
          '## Summary', ''] + [f'- {k}: {v}' for k, v in sorted(counts.items())] + [
          '', '## Claims x systems', '', '| ' + ' | '.join(headers) + ' |',
          '|' + '---|' * len(headers)]
    md += ['| ' + ' | '.join(str(c).replace('|', '/') for c in cells(r)) + ' |' for r in rows]
    md += ['', '## Himeno', '', f'![Himeno]({fig})' if fig else f'_{fig_note}_', '', '## Figures', '']
    for f in figs:
        md += [f"### {f['name']}", '', f['caption'], '']
        md += [f"![{f['name']}]({f['file']})", ''] if f['file'] else ['_Not drawn._', '']
        md += [f"_Note: {f['note']}_", ''] if f['note'] else []
        near = beside(f, rows)
        if near:
            md += ['| claim | system | paper (on) | measured | verdict |', '|---|---|---|---|---|']
            md += ['| ' + ' | '.join(str(c).replace('|', '/') for c in
                                     (r['id'], r['system'], cells(r)[2], fmt(r['measured']), r['verdict'])) + ' |'
                   for r in near] + ['']
    na = [r for r in rows if r['verdict'] == NOT_APPLICABLE]
    md += ['## Not applicable here', '']
    md += [f"- {r['id']} on {r['system']}: {r['reason']}" for r in na] or ['- none']
    md += ['']
    md += ['## Tables', '']
    for t in tables:
        md += [f"### {t['title']}", '', t['caption'], '']
        for tab in t['tables']:
            md += [f"#### {tab['heading']}", '', '| ' + ' | '.join(tab['headers']) + ' |',
                   '|' + '---|' * len(tab['headers'])] + ['| ' + ' | '.join(r) + ' |' for r in tab['rows']] + ['']
        md += [f"_Note: {t['note']}_", ''] if t['note'] else []
    md += ['## Provenance', '', '| ' + ' | '.join(prov_headers) + ' |', '|' + '---|' * len(prov_headers)]
    md += ['| ' + ' | '.join(r) + ' |' for r in prov_rows] + ['']
    md += ['## Test cases', '', '| check | system | result | reason |', '|---|---|---|---|']
    md += [f"| {c['check']} {' '.join(f'{k}={v}' for k, v in c['params'].items())} | "
           f"{c['system']}:{c['partition']} | {c['result']} | {c['reason'] or ''} |" for c in cases]
    with open(os.path.join(out_dir, 'report.md'), 'w') as f:
        f.write('\n'.join(md) + '\n')

    esc = html.escape
    klass = {REPRODUCED: 'ok', NOT_REPRODUCED: 'bad', NOT_APPLICABLE: 'na', NOT_RUN: 'nr'}
    rows_html = '\n'.join(
        '<tr class="{}">{}</tr>'.format(klass[r['verdict']],
                                        ''.join(f'<td>{esc(str(c))}</td>' for c in cells(r)))
        for r in rows)
    cases_html = '\n'.join(
        f"<tr><td>{esc(c['check'])} {esc(' '.join(f'{k}={v}' for k, v in c['params'].items()))}</td>"
        f"<td>{esc(c['system'])}:{esc(c['partition'])}</td><td>{esc(c['result'])}</td>"
        f"<td>{esc(c['reason'] or '')}</td><td>{esc(fmt(c['perf']))}</td></tr>" for c in cases)
    def near_html(f):
        near = beside(f, rows)
        if not near:
            return ''
        return ('<table class="beside"><tr><th>claim</th><th>system</th><th>paper (on)</th>'
                '<th>measured</th><th>verdict</th></tr>' + ''.join(
                    f"<tr class=\"{klass[r['verdict']]}\"><td>{esc(r['id'])}</td><td>{esc(r['system'])}</td>"
                    f"<td>{esc(cells(r)[2])}</td><td>{esc(fmt(r['measured']))}</td><td>{esc(r['verdict'])}</td></tr>"
                    for r in near) + '</table>')

    figs_html = '\n'.join(
        f"<figure id=\"{esc(f['name'])}\"><div class=\"pair\">"
        + (f"<img src=\"{esc(f['file'])}\" alt=\"{esc(f['caption'])}\">" if f['file']
           else '<p><em>Not drawn.</em></p>')
        + near_html(f) + '</div>'
        + f"<figcaption><strong>{esc(f['name'])}</strong>: {esc(f['caption'])}"
        + (f"<br><em>Note: {esc(f['note'])}</em>" if f['note'] else '') + '</figcaption></figure>'
        for f in figs)
    na_html = ''.join(f"<li>{esc(r['id'])} on {esc(r['system'])}: {esc(r['reason'])}</li>"
                      for r in rows if r['verdict'] == NOT_APPLICABLE) or '<li>none</li>'
    tables_html = '\n'.join(
        f"<h3>{esc(t['title'])}</h3><p>{esc(t['caption'])}</p>" + ''.join(
            f"<h4>{esc(tab['heading'])}</h4><table><tr>{''.join(f'<th>{esc(h)}</th>' for h in tab['headers'])}</tr>"
            + ''.join('<tr>' + ''.join(f'<td>{esc(c)}</td>' for c in r) + '</tr>' for r in tab['rows'])
            + '</table>' for tab in t['tables'])
        + (f"<p><em>Note: {esc(t['note'])}</em></p>" if t['note'] else '')
        for t in tables)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>umstudy report</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }} table {{ border-collapse: collapse; font-size: 0.85em; }}
td, th {{ border: 1px solid #ccc; padding: 3px 6px; vertical-align: top; }}
tr.ok td {{ background: #e6f4e6; }} tr.bad td {{ background: #f8dddd; }}
tr.na td {{ background: #f4f4f4; color: #555; }} tr.nr td {{ color: #888; }}
figure {{ margin: 1.5em 0; }} figure img {{ max-width: 60%; }} figcaption {{ font-size: 0.9em; }}
.pair {{ display: flex; gap: 1em; align-items: flex-start; }} table.beside {{ font-size: 0.8em; }}
</style></head><body>
<h1>umstudy report</h1>
<p>Sources: {esc(', '.join(sources))}</p>
<section id="summary"><h2>Summary</h2><ul>{''.join(f'<li>{esc(k)}: {v}</li>' for k, v in sorted(counts.items()))}</ul></section>
<section id="claims"><h2>Claims &times; systems</h2>
<table><tr>{''.join(f'<th>{h}</th>' for h in headers)}</tr>
{rows_html}
</table></section>
<section id="himeno"><h2>Himeno</h2>
{f'<img src="{fig}" alt="Himeno GFLOPS per variant and system">' if fig else f'<p><em>{esc(fig_note)}</em></p>'}
</section>
<section id="figures"><h2>Figures</h2>
{figs_html}
</section>
<section id="not-applicable"><h2>Not applicable here</h2>
<ul>{na_html}</ul></section>
<section id="tables"><h2>Tables</h2>
{tables_html}
</section>
<section id="provenance"><h2>Provenance</h2>
<p>Check a bundle with <code>sha256sum SHA256SUMS</code> (the hash below) and <code>sha256sum -c SHA256SUMS</code> inside it.</p>
<table><tr>{''.join(f'<th>{esc(h)}</th>' for h in prov_headers)}</tr>
{''.join('<tr>' + ''.join(f'<td>{esc(c)}</td>' for c in r) + '</tr>' for r in prov_rows)}
</table></section>
<section id="cases"><h2>Test cases</h2>
<table><tr><th>check</th><th>system</th><th>result</th><th>reason</th><th>performance</th></tr>
{cases_html}
</table></section>
</body></html>
"""
    with open(os.path.join(out_dir, 'report.html'), 'w') as f:
        f.write(page)
    return os.path.join(out_dir, 'report.html')


def failures_are_verdicts(path):
    """0 if every failed case of a run report failed only its performance references
    (a measured "not reproduced", which the report judges), 1 if anything else failed
    (a build, a crash, a wrong result)."""
    with open(path) as f:
        report = json.load(f)
    failed = [tc for run in report.get('runs', []) for tc in run.get('testcases', [])
              if tc.get('result') == 'fail']
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
    ap.add_argument('reports', nargs='+', help='ReFrame run report JSON files')
    ap.add_argument('--out', help='output directory')
    ap.add_argument('--failures-are-verdicts', action='store_true',
                    help='only check one run report: exit 0 if its failures are all missed '
                         'performance references, 1 otherwise (make run uses this)')
    args = ap.parse_args(argv)
    if args.failures_are_verdicts:
        return failures_are_verdicts(args.reports[0])
    if not args.out:
        ap.error('--out is required')
    missing = [p for p in args.reports if not os.path.isfile(p)]
    if missing:
        print(f'report: no such run report: {", ".join(missing)}', file=sys.stderr)
        return 2
    try:
        cases = load_cases(args.reports)
    except (json.JSONDecodeError, KeyError) as e:
        print(f'report: not a ReFrame run report ({e})', file=sys.stderr)
        return 2
    rows = verdicts(cases)
    path = write(rows, cases, args.out, [os.path.abspath(p) for p in args.reports])
    print(path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
