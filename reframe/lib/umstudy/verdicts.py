"""The one place where claims meet measurements.

analysis/claims.yaml says what each paper claim and artifact target expects; this
module turns that into (a) ReFrame references per check (`references`), (b) the run
cases of ReFrame run reports (`load_cases`), and (c) one verdict per claim and system
(`judge`).  ReFrame checks and analysis/report.py both call it, so a band, the choice
of the run a claim is judged on and the verdict are computed once.

Verdicts mean what they say:
- reproduced / not reproduced: every part of the claim measured at the size the claim
  is about, on a placement that fits the machine, from >= MIN_REPEATS repeats whose
  spread lies entirely inside (or entirely outside) the expected interval;
- inconclusive: the repeats straddle a bound;
- indicative: measured, but at quick size for a paper-size claim, oversubscribed, or
  with fewer repeats than a verdict needs (shown, never counted);
- paper consistency: the paper checked against itself (a model fed only the paper's
  inputs); shown apart, never counted as reproduced;
- not applicable: this hardware cannot do it (with what it would need);
- not run: not built, skipped for another reason, aborted, run on another layout than
  its experiment needs (a placement failure: ranks packed onto one node, say), or absent
  from the runs.
"""
import gzip
import json
import math
import os
import re
import statistics
import sys

from . import data

REPRODUCED = 'reproduced'
NOT_REPRODUCED = 'not reproduced'
INCONCLUSIVE = 'inconclusive'
INDICATIVE = 'indicative'
CONSISTENCY = 'paper consistency'
NOT_APPLICABLE = 'not applicable'
NOT_RUN = 'not run'
ALL = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, INDICATIVE, CONSISTENCY, NOT_APPLICABLE, NOT_RUN)
# Repeats a performance verdict is made from (make run: REPEAT, ReFrame --repeat).
MIN_REPEATS = 3

DERIVED = ('over', 'minus', 'over_fact')  # selector keys that combine with something else
# A case whose run did not complete: it never replaces an earlier measurement.
_ABORT = re.compile(r'KeyboardInterrupt|aborted|cancel|time ?limit|timed? ?out|TIMEOUT|killed|'
                    r'Terminated|SIGTERM|SIGKILL', re.I)


# ---- claims: parts and the interval each must fall in ---------------------------------

def selectors(c):
    """(key, selector) pairs of a claim's `measure`; key is None for a single selector."""
    m = c.get('measure')
    if not m:
        return []
    if 'check' in m or 'derive' in m:
        return [(None, m)]
    return list(m.items())


def expected(c, key):
    """The paper's value for one key of a claim (a number or a [low, high] range)."""
    v = c.get('value')
    return v if key is None or not isinstance(v, dict) else v.get(key)


def band(value, tol):
    """[low, high] that a measurement must fall in: value (number or range) +- tolerance."""
    lo, hi = (value if isinstance(value, (list, tuple)) else (value, value))
    slack_lo = tol.get('abs', abs(lo) * tol.get('rel', 0.0))
    slack_hi = tol.get('abs', abs(hi) * tol.get('rel', 0.0))
    return [lo - slack_lo, hi + slack_hi]


def _bound_spec(c, key):
    b = c.get('bound')
    if not b:
        return None
    if 'lower' in b or 'upper' in b:
        return b
    return b.get(key)


def interval(c, key, facts):
    """[lower, upper] (either may be None) for one part of a claim on a system with
    these facts: the part's one- or two-sided bound, else the paper's value +- the
    claim's tolerance.  Raises data.MissingFact where a bound needs an absent fact."""
    spec = _bound_spec(c, key)
    if spec is not None:
        lo = data.evaluate(spec['lower'], facts) if 'lower' in spec else None
        hi = data.evaluate(spec['upper'], facts) if 'upper' in spec else None
        return [lo, hi]
    value = expected(c, key)
    if value is None:
        raise KeyError(f"{c['id']}: part {key!r} has neither a bound nor a value")
    return band(value, c.get('tolerance', {}))


def is_performance(c):
    return c.get('performance', True)


def applies(c, system_name, partition_features):
    """Whether claim/target c can be tested on this system's partition, and if not why
    (the hardware it needs, as the claim states it)."""
    rule = c.get('applies', 'paper')
    if rule == 'all':
        return True, ''
    if rule == 'paper':
        ok = c.get('system') in (system_name, 'any')
        return ok, '' if ok else c.get('needs') or f"needs the paper's system ({c.get('system')})"
    missing = [f for f in rule.get('features', []) if f not in partition_features]
    if not missing:
        return True, ''
    return False, c.get('needs') or ' and '.join(FEATURE_NEEDS.get(f, f) for f in missing)


# What a missing partition feature means in hardware (how "not applicable" rows group).
FEATURE_NEEDS = {'gpu': 'an NVIDIA GPU', 'cuda': 'the CUDA toolkit', 'multigpu': 'several GPUs in one node',
                 'um': 'CUDA managed memory', 'sam': 'pageable memory access (HMM or ATS)',
                 'ats': 'ATS (a coherent CPU-GPU link)', 'openacc': 'an OpenACC compiler',
                 'mpi': 'MPI'}


def _params_match(want, have):
    return all(str(have.get(k)) == str(v) for k, v in (want or {}).items())


def references(check_name, params, system_name, partition, size='quick'):
    """ReFrame `reference` entries for one check on one partition, from the claims.

    A part whose selector names this check directly (nothing derived) becomes a
    reference wherever the claim applies and at the size the claim is about; quantities
    derived from several checks are judged by `judge` only.  The partition's own facts
    (a CPU partition's nodes) win over the system's, as they do in `judge`."""
    feats = partition.get('features', [])
    facts = {**data.facts(system_name), **(partition.get('facts') or {})}
    refs = {}
    for c in data.all_claims():
        if c.get('size', size) != size or not applies(c, system_name, feats)[0]:
            continue
        for key, sel in selectors(c):
            if sel.get('check') != check_name or any(k in sel for k in DERIVED + ('derive', 'only_if')):
                continue  # derived or conditional quantities are judged by `judge` only
            if sel['var'] in refs and c.get('origin') == 'target':
                continue  # the paper's own number is the sharper reference on its system
            if not _params_match(sel.get('params'), params):
                continue
            try:
                lo, hi = interval(c, key, facts)
            except data.MissingFact:
                continue
            value = expected(c, key) if _bound_spec(c, key) is None else None
            mid = (sum(value) / 2 if isinstance(value, (list, tuple)) else value) if value is not None else None
            ref = next((v for v in (mid, lo, hi) if v not in (None, 0)), None)
            if ref is None:
                continue
            refs[sel['var']] = (ref, None if lo is None else lo / ref - 1.0,
                                None if hi is None else hi / ref - 1.0, c.get('unit'))
    return refs


# ---- run reports -> cases -------------------------------------------------------------

def parse_name(name):
    """'HimenoCudaPerf %alloc=explicit %.repeat_no=1' -> ('HimenoCudaPerf', {'alloc':
    'explicit'}): ReFrame's own generated parameters (repeats, distribution) dropped."""
    parts = name.split()
    params = dict(p[1:].split('=', 1) for p in parts[1:] if p.startswith('%') and '=' in p)
    return parts[0], {k: v for k, v in params.items() if not k.startswith('.')}


def _repeat_no(name):
    m = re.search(r'%\.repeat_no=(\d+)', name)
    return int(m.group(1)) if m else 0


def read_report(path):
    """A ReFrame run report, as written or gzip-compressed (the shipped reference runs)."""
    opener = gzip.open if str(path).endswith('.gz') else open
    with opener(path, 'rt') as f:
        return json.load(f)


def is_dry_run(report):
    return '--dry-run' in report.get('session_info', {}).get('cmdline', '').split()


def _aborted(tc):
    if tc.get('result') == 'abort':
        return True
    return (tc.get('result') == 'fail' and not tc.get('perfvalues')
            and bool(_ABORT.search(tc.get('fail_reason') or '')))


def _perf(tc):
    return {key.rsplit(':', 1)[-1]: val[0] for key, val in (tc.get('perfvalues') or {}).items()
            if val and val[0] is not None}


def _merge(key, tcs):
    """One case from every complete repeat/rerun of a test case in one run report."""
    tcs = sorted(tcs, key=lambda t: (t.get('run_index', 0), _repeat_no(t['name'])))
    last = tcs[-1]
    check, params = parse_name(last['name'])
    samples = {}
    for tc in tcs:
        for var, v in _perf(tc).items():
            samples.setdefault(var, []).append(v)
    # A repeat whose ranks ran on another layout than the experiment needs measured
    # something else: the case is a placement failure, whatever the other repeats did.
    misplaced = [t for t in tcs if t.get('placement_failure')]
    broken = [t for t in tcs if t.get('result') == 'fail' and t.get('fail_phase') != 'performance']
    measured = [t for t in tcs if _perf(t)]
    result = ('placement' if misplaced else 'fail' if broken else
              'skip' if all(t.get('result') == 'skip' for t in tcs) else 'pass')
    src = misplaced[-1] if misplaced else broken[-1] if broken else (measured[-1] if measured else last)
    return {
        'check': check, 'params': params, 'name': key[2], 'system': last['system'],
        'partition': last['partition'], 'size': key[3], 'result': result, 'aborted': False,
        'perf': {var: statistics.median(vs) for var, vs in samples.items()},
        'samples': samples, 'repeats': len(tcs),
        'reason': (src.get('placement_failure') or src.get('skip_reason') or src.get('fail_reason')
                   or ''),
        # where each rank ran ({rank, host[, gpus]}), as the check recorded it
        'rank_hosts': src.get('rank_hosts') or [],
        'info': src.get('partition_info') or {},
        'placement': src.get('placement') or {},
        # Every measurement line the program printed (umbench keeps them for the
        # figures: sweep points, per-rep traces) and its parameters, of the last repeat.
        'records': (measured[-1] if measured else src).get('records_kept') or [],
        'record_params': (measured[-1] if measured else src).get('record_params') or {},
    }


def load_cases(paths):
    """Test cases of all run reports, oldest first.  Within a report every repeat and
    rerun of a case is pooled; a later report's complete case replaces an earlier one
    (quick and paper runs of a check are different experiments).  An aborted case never
    replaces a measured one: it is kept only where nothing else ran.  Dry-run reports
    hold job scripts, not measurements, and are ignored (see `measurement_reports`)."""
    cases = {}
    for path in paths:
        report = read_report(path)
        if is_dry_run(report):
            continue
        groups = {}
        for run in report.get('runs', []):
            for tc in run.get('testcases', []):
                if tc.get('fixture'):
                    continue
                check, params = parse_name(tc['name'])
                base = ' '.join([check] + [f'%{k}={v}' for k, v in sorted(params.items())])
                key = (tc['system'], tc['partition'], base, tc.get('size', 'quick'))
                groups.setdefault(key, []).append(tc)
        for key, tcs in groups.items():
            done = [t for t in tcs if not _aborted(t)]
            if done:
                cases[key] = _merge(key, done)
            elif key not in cases:
                tc = tcs[-1]
                check, params = parse_name(tc['name'])
                cases[key] = {'check': check, 'params': params, 'name': key[2], 'system': tc['system'],
                              'partition': tc['partition'], 'size': key[3], 'result': 'abort',
                              'aborted': True, 'perf': {}, 'samples': {}, 'repeats': 0,
                              'reason': tc.get('fail_reason') or 'aborted', 'placement': {}, 'rank_hosts': [],
                              'info': tc.get('partition_info') or {}, 'records': [], 'record_params': {}}
    return list(cases.values())


def measurement_reports(paths):
    """The run reports that hold measurements (dry runs left out), in the given order."""
    return [p for p in paths if not is_dry_run(read_report(p))]


def case_is(case, check, params):
    return case['check'] == check and _params_match(params, case['params'])


def find(cases, system, selector, size=None):
    """The case a selector names on a system: at `size` if given, else the paper-size
    run where there is one (the claims are about the papers' sizes)."""
    hits = [c for c in cases
            if c['system'] == system and case_is(c, selector['check'], selector.get('params') or {})]
    hits.sort(key=lambda c: (c['aborted'], c['size'] != (size or 'paper')))
    return hits[0] if hits else None


def emulated_link(case):
    """The emulated network a case ran over (the cluster in a box: its facts.network.type
    says `emulated: ...`), described, or None for a real one."""
    facts = (case.get('info') or {}).get('facts') or {}
    net = facts.get('network') or {}
    if not str(net.get('type', '')).startswith('emulated'):
        return None
    got = facts.get('link_measured') or {}
    mpi = (f", MPI {got['bandwidth_mb_s']['median']:.0f} MB/s measured"
           if got.get('measured') else '')
    return f"emulated interconnect ({net.get('gbit_s')} Gbit/s shaped{mpi}, nodes sharing one machine)"


def oversubscribed(case):
    """Ranks x threads beyond the machine's cores (recorded by the check when it ran)."""
    p = case.get('placement') or {}
    need = p.get('cpus') or (p.get('ranks') or 1) * (p.get('threads') or 1)
    return bool(p.get('cores')) and need > p['cores'], need, p.get('cores')


# ---- measuring one part -----------------------------------------------------------------

class Problem(Exception):
    """A part that cannot be judged: (verdict, reason)."""

    def __init__(self, verdict, reason, cause=None):
        super().__init__(reason)
        self.verdict, self.reason, self.cause = verdict, reason, cause or reason


def _describe(selector):
    return selector['check'] + ''.join(f' {k}={v}' for k, v in (selector.get('params') or {}).items())


def _facts(case, system):
    # The facts recorded with the run (what detection saw then) win over today's.
    info = case['info']
    return info['facts'] if 'facts' in info else data.facts(system)


class Measured:
    """Samples of one part (one per repeat), the case they come from and the other
    cases they were combined with (each can make the part only indicative)."""

    def __init__(self, samples, case, notes=(), others=()):
        self.samples = [float(v) for v in samples]
        self.case = case
        self.notes = list(notes)
        self.others = list(others)

    @property
    def median(self):
        return statistics.median(self.samples)

    def combine(self, other, op):
        # Repeats are paired by repeat number (runs of one session, side by side).
        n = min(len(self.samples), len(other.samples))
        vals = [op(a, b) for a, b in zip(self.samples[:n], other.samples[:n])]
        return Measured(vals, self.case, self.notes + other.notes,
                        self.others + [other.case] + other.others)


def _case(cases, system, selector):
    case = find(cases, system, selector)
    desc = _describe(selector)
    if case is None:
        raise Problem(NOT_RUN, f'{desc} did not run on this system')
    if case['aborted']:
        raise Problem(NOT_RUN, f'{desc} aborted: {case["reason"]}')
    if case['result'] == 'placement':
        raise Problem(NOT_RUN, f'{desc}: placement failure: {case["reason"]}')
    if case['result'] == 'skip':
        reason = case['reason'] or 'no reason recorded'
        built = re.search(r'not in this build|was not built|not built', reason)
        raise Problem(NOT_RUN if built else NOT_APPLICABLE, f'{desc} skipped: {reason}', reason)
    if selector['var'] not in case['samples']:
        if case['result'] == 'fail':
            raise Problem(NOT_REPRODUCED, f'{desc} failed: {case["reason"]}')
        raise Problem(NOT_RUN, f'{desc} reported no {selector["var"]}')
    for var, want in (selector.get('only_if') or {}).items():
        if case['perf'].get(var) != want:
            raise Problem(NOT_RUN, f'{desc}: {selector.get("only_if_reason", f"{var} != {want}")}')
    return case


def measure(cases, system, selector):
    """The Measured of a selector: its variable, combined with its `over` / `minus`
    selector (repeat by repeat) or divided by `over_fact`, or a named derivation."""
    if 'derive' in selector:
        return DERIVATIONS[selector['derive']](cases, system, selector)
    case = _case(cases, system, selector)
    m = Measured(case['samples'][selector['var']], case)
    for key in ('over', 'minus'):
        if key in selector:
            other = measure(cases, system, selector[key])
            if key == 'minus':
                m = m.combine(other, lambda a, b: a - b)
            else:
                m = m.combine(other, lambda a, b: a / b if b else float('nan'))
    if 'over_fact' in selector:
        try:
            f = data.evaluate(selector['over_fact'], _facts(case, system))
        except data.MissingFact as e:
            raise Problem(NOT_APPLICABLE, f'system facts do not state {e.args[0]}')
        m = Measured([v / f for v in m.samples], case, m.notes, m.others)
    return m


def _qualify(m, claim, size_needed):
    """Why a measured part can only be indicative (None where it can be judged)."""
    cases = [m.case] + m.others
    if size_needed and any(c['size'] != size_needed for c in cases):
        return f'{size_needed}-size claim measured at {m.case["size"]} size'
    for c in cases:
        over, need, cores = oversubscribed(c)
        if over:
            return f'oversubscribed ({need} busy ranks x threads on {cores} cores)'
        link = emulated_link(c)
        if link:
            return link
    if is_performance(claim) and len(m.samples) < MIN_REPEATS:
        return (f'{len(m.samples)} repeat(s); a performance verdict needs >= {MIN_REPEATS} '
                '(make run REPEAT=3)')
    return None


def judge_samples(samples, lo, hi):
    """reproduced if every repeat is inside [lo, hi], not reproduced if none is,
    inconclusive if the spread straddles a bound."""
    inside = [not math.isnan(v) and (lo is None or v >= lo) and (hi is None or v <= hi) for v in samples]
    if all(inside):
        return REPRODUCED
    if not any(inside):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def spread(samples):
    return {'median': statistics.median(samples), 'min': min(samples), 'max': max(samples),
            'n': len(samples)}


# ---- derivations: quantities computed from several checks by a model --------------------

def _analysis_module(name):
    path = os.path.join(data.REPO, 'analysis')
    if path not in sys.path:
        sys.path.insert(0, path)
    return __import__(name)


def remd_model_error(cases, system, selector):
    """P003-C4 on measured data: |R0(n) - R1(n)| in efficiency points at every n this
    system ran, locally (RemdLocal, n >= 2) and through vcuda (RemdVcuda, n >= 1), with
    the model fed this system's own measurements: tGPU0, tCLT and Tlocal(1) of the
    one-GPU local run, and the copy/launch fit of vcuda-bench for the same path
    (transport `local` or `vcuda`).  The samples are the largest error over n, repeat
    by repeat."""
    rm = _analysis_module('remd_model')
    atoms = selector.get('atoms', 2048)
    one = {'check': 'RemdLocal', 'params': {'atoms': atoms, 'gpus': 1, 'kernel': 'fast'}}
    local = measure(cases, system, dict(one, var='interval_time'))
    tgpu0 = measure(cases, system, dict(one, var='t_gpu0')).median
    tclt = measure(cases, system, dict(one, var='t_clt')).median
    errs, notes, used, missing = None, [], [], []
    for check, count, transport in (('RemdLocal', 'gpus', 'local'), ('RemdVcuda', 'servers', 'vcuda')):
        runs = [c for c in cases if c['system'] == system and c['check'] == check and not c['aborted']
                and str(c['params'].get('atoms')) == str(atoms) and 'gpu_seconds' in c['samples']
                and (check == 'RemdVcuda' or int(c['params'].get(count, 1)) > 1)
                and c['params'].get('kernel', 'fast') == 'fast']
        if not runs:
            missing.append(f'{check} atoms={atoms} (n > 1 for local)')
            continue
        bench = {'check': 'VcudaBench', 'params': {'transport': transport}}
        try:
            fit = {k: measure(cases, system, dict(bench, var=k)).median * f
                   for k, f in (('BH', 1e6), ('BD', 1e6), ('LH', 1e-6), ('LD', 1e-6), ('LK', 1e-6))}
        except Problem as p:
            missing.append(f'the {transport} copy fit ({p.reason})')
            continue
        p = rm.Params(**fit, tCLT=tclt, tGPU0=tgpu0, tlocal1=local.median)
        for run in runs:
            n = int(run['params'][count])
            r0 = rm.R(p, n)
            r1 = [t1 / gs for t1, gs in zip(local.samples, run['samples']['gpu_seconds'])]
            e = [abs(r0 - x) * 100 for x in r1]
            errs = e if errs is None else [max(a, b) for a, b in zip(errs, e)]
            notes.append(f'{transport} n={n}: model {r0:.3f}, measured {statistics.median(r1):.3f}')
            used.append(run)
    if errs is None:
        raise Problem(NOT_RUN, 'no measured R(n) to compare the model with: ' + '; '.join(missing))
    return Measured(errs, local.case, notes, used)


def remd_balance_error(cases, system, selector):
    """REMD-T8/T9: |R_model(n) - R(n)| in efficiency points at n = 2 and 4 (those that ran),
    locally (RemdLocal) or through vcuda (RemdVcuda, 2 ms keep-alive), with the balance
    model (analysis/remd_balance_model.py) fitted on one GPU alone: the one-GPU fast run's
    ladder profile, waves and occupancy (its records), its tGPU(1), Tlocal(1) and tCLT,
    and vcuda-bench's copy fit of the same path.  Each n-GPU run is predicted with the
    placement and host loop it ran with (its parameters).  The samples are the largest
    error over n, repeat by repeat."""
    bm = _analysis_module('remd_balance_model')
    atoms, via = selector.get('atoms', 2048), selector.get('via', 'local')
    one_sel = {'check': 'RemdLocal', 'params': {'atoms': atoms, 'gpus': 1, 'kernel': 'fast'}}
    one_case = _case(cases, system, dict(one_sel, var='interval_time'))
    local = measure(cases, system, dict(one_sel, var='interval_time'))
    summary = {'interval_time': local.median, 't_gpu': measure(cases, system, dict(one_sel, var='t_gpu')).median,
               't_clt': measure(cases, system, dict(one_sel, var='t_clt')).median}
    try:
        one = bm.from_records(one_case['records'], summary, one_case['record_params'])
    except (ValueError, KeyError) as e:
        raise Problem(NOT_RUN, f'{_describe(one_sel)}: no balance-model inputs ({e})')
    bench = {'check': 'VcudaBench', 'params': {'transport': via}}
    try:
        fit = {k: measure(cases, system, dict(bench, var=k)).median * f
               for k, f in (('BH', 1e6), ('BD', 1e6), ('LH', 1e-6), ('LD', 1e-6), ('LK', 1e-6))}
    except Problem as p:
        raise Problem(p.verdict, f'the {via} copy fit: {p.reason}')
    check, count = ('RemdLocal', 'gpus') if via == 'local' else ('RemdVcuda', 'servers')
    runs = [c for c in cases if c['system'] == system and c['check'] == check and not c['aborted']
            and str(c['params'].get('atoms')) == str(atoms) and 'gpu_seconds' in c['samples']
            and int(c['params'].get(count, 1)) in (2, 4) and c['params'].get('kernel', 'fast') == 'fast'
            and str(c['params'].get('keepalive_ms', 2)) == '2']
    if not runs:
        raise Problem(NOT_RUN, f'no {check} run of {atoms} atoms on 2 or 4 GPUs to compare the model with')
    errs, notes = None, []
    for run in sorted(runs, key=lambda c: int(c['params'][count])):
        n, rp = int(run['params'][count]), run.get('record_params') or {}
        placement, host_loop = rp.get('placement', 'contiguous'), rp.get('host_loop', 'serial')
        r0 = bm.predict(one, fit, n, placement, host_loop)['R']
        r1 = [t1 / gs for t1, gs in zip(local.samples, run['samples']['gpu_seconds'])]
        e = [abs(r0 - x) * 100 for x in r1]
        errs = e if errs is None else [max(a, b) for a, b in zip(errs, e)]
        notes.append(f'{via} n={n} ({placement}, {host_loop}): model {r0:.3f}, measured {statistics.median(r1):.3f}')
    if not any(int(r['params'][count]) == 4 for r in runs):
        notes.append('n=4 did not run: judged on n=2 alone')
    return Measured(errs, local.case, notes, runs)


DERIVATIONS = {'remd_model_error': remd_model_error, 'remd_balance_error': remd_balance_error}


# ---- judging one claim on one system ----------------------------------------------------

def _row(claim, system):
    return {'id': claim['id'], 'origin': claim.get('origin'), 'paper_id': claim.get('paper'),
            'text': claim['text'], 'quote': claim.get('quote'), 'system': system,
            'paper_system': claim.get('system') or 'artifact target', 'paper': claim.get('value'),
            'unit': claim.get('unit'), 'needs': claim.get('needs'), 'measured': None,
            'spread': None, 'expected': None, 'size': None, 'machine': None, 'parts': {}}


def _machine(case):
    facts = (case.get('info') or {}).get('facts') or {}
    gpu = (facts.get('gpu') or {}).get('name') or (facts.get('gpu') or {}).get('model')
    cpu = (facts.get('cpu') or {}).get('cores')
    return ', '.join(x for x in (gpu, f'{cpu} cores' if cpu else None) if x) or None


def _features(cases, system):
    return next((c['info'].get('features', []) for c in cases if c['system'] == system and c['info']), [])


def _consistency(claim, system, cases, row, because):
    """The paper checked against itself (e.g. the model fed the paper's inputs): shown
    where the real measurement is missing, never counted as reproduced."""
    spec = claim.get('consistency')
    if not spec:
        return None
    sels = [(None, spec)] if 'check' in spec else list(spec.items())
    measured, holds = {}, []
    for key, sel in sels:
        try:
            m = measure(cases, system, sel)
            lo, hi = interval(claim, key if isinstance(claim.get('value'), dict) else None, {})
        except (Problem, data.MissingFact):
            return None
        measured[key] = m.median
        holds.append(judge_samples(m.samples, lo, hi) == REPRODUCED)
    shown = measured[None] if list(measured) == [None] else measured
    return dict(row, measured=shown, verdict=CONSISTENCY,
                reason=f"{because}; fed only the paper's own inputs the model "
                       f"{'agrees with' if all(holds) else 'does not meet'} the claim "
                       '(the paper checked against itself, not a reproduction)')


def judge(claim, system, cases):
    """One row of the verdict table: the claim on one system."""
    row = _row(claim, system)
    sels = selectors(claim)
    if not sels:
        return dict(row, verdict=NOT_RUN, reason=f"component '{claim.get('component')}' has no measurement")
    ok, why = applies(claim, system, _features(cases, system))
    if not ok:
        # Not judged here, but what this system measured is shown beside the paper's value.
        here = {}
        for key, sel in sels:
            try:
                here[key] = measure(cases, system, sel).median
            except (Problem, KeyError):
                pass
        shown = here.get(None) if list(here) == [None] else (here or None)
        return dict(row, verdict=NOT_APPLICABLE, measured=shown,
                    reason=why + (' (measured here for comparison)' if here else ''))

    size_needed = claim.get('size')
    parts, problems, indicative = {}, [], []
    for key, sel in sels:
        try:
            m = measure(cases, system, sel)
            facts = _facts(m.case, system)
            lo, hi = interval(claim, key, facts)
        except Problem as p:
            problems.append((key, p))
            continue
        except data.MissingFact as e:
            problems.append((key, Problem(NOT_APPLICABLE, f'system facts do not state {e.args[0]}')))
            continue
        why_not = _qualify(m, claim, size_needed)
        verdict = INDICATIVE if why_not else judge_samples(m.samples, lo, hi)
        parts[key] = {'measured': m.median, 'spread': spread(m.samples), 'expected': [lo, hi],
                      'verdict': verdict, 'why': why_not, 'notes': m.notes,
                      'size': m.case['size'], 'machine': _machine(m.case)}
        if why_not:
            indicative.append(why_not)

    def label(key):
        return '' if key is None else f'{key}: '

    single = list(parts) == [None] and not problems
    row.update(measured=(parts[None]['measured'] if single else {k: p['measured'] for k, p in parts.items()}) or None,
               spread=parts[None]['spread'] if single else None,
               expected=(parts[None]['expected'] if single else {k: p['expected'] for k, p in parts.items()}) or None,
               parts={str(k): p for k, p in parts.items()})
    first = next(iter(parts.values()), None)
    if first:
        row.update(size=first['size'], machine=first['machine'])

    failed = [k for k, p in parts.items() if p['verdict'] == NOT_REPRODUCED]
    if failed:
        return dict(row, verdict=NOT_REPRODUCED,
                    reason='outside the expected interval' + _which(failed) + _tol_reason(claim))
    if problems:
        # A part that cannot be measured decides the verdict (worst first).
        order = [NOT_REPRODUCED, NOT_RUN, NOT_APPLICABLE]
        problems.sort(key=lambda kp: order.index(kp[1].verdict) if kp[1].verdict in order else 9)
        verdict = problems[0][1].verdict
        reason = '; '.join(f'{label(k)}{p.reason}' for k, p in problems)
        if verdict in (NOT_RUN, NOT_APPLICABLE):
            cons = _consistency(claim, system, cases, row, reason)
            if cons:
                return cons
        if verdict == NOT_APPLICABLE and not row['needs']:
            row['needs'] = '; '.join(dict.fromkeys(p.cause for _, p in problems if p.verdict == NOT_APPLICABLE))
        return dict(row, verdict=verdict, reason=reason)
    if indicative:
        return dict(row, verdict=INDICATIVE, reason='; '.join(sorted(set(indicative))))
    if any(p['verdict'] == INCONCLUSIVE for p in parts.values()):
        keys = [str(k) for k, p in parts.items() if p['verdict'] == INCONCLUSIVE]
        return dict(row, verdict=INCONCLUSIVE,
                    reason='the repeats straddle the bound' + _which(keys) + _tol_reason(claim))
    return dict(row, verdict=REPRODUCED, reason='every repeat inside the expected interval' + _tol_reason(claim))


def _which(keys):
    named = [str(k) for k in keys if k not in (None, 'None')]
    return ': ' + ', '.join(named) if named else ''


def _tol_reason(claim):
    why = (claim.get('tolerance') or {}).get('reason')
    return f' ({why})' if why else ''


def verdicts(cases, systems=None):
    systems = systems or sorted({c['system'] for c in cases})
    return [judge(claim, s, cases) for claim in data.all_claims() for s in systems]
