"""The one place where claims meet measurements.

analysis/claims.yaml says what each paper claim and artifact target expects; this
module turns that into (a) ReFrame references per check (`references`), (b) the run
cases of ReFrame run reports (`load_cases`), and (c) one verdict per claim and system
(`judge`).  ReFrame checks and analysis/report.py both call it, so a band, the choice
of the run a claim is judged on and the verdict are computed once.

Verdicts mean what they say:
- reproduced / not reproduced: every part of the claim measured at the size the claim
  is about, on a placement that fits the machine, from >= MIN_REPEATS repeats whose
  spread lies entirely inside (or entirely outside) the expected interval.  Nothing
  but a measurement outside the interval is ever "not reproduced";
- inconclusive: the repeats straddle a bound, or one repeat lies more than
  OUTLIER_FACTOR times from the median of its case (either way);
- indicative: measured, but at quick size for a paper-size claim, oversubscribed, or
  with fewer repeats than a verdict needs (shown, never counted);
- paper consistency: the paper checked against itself (a model fed only the paper's
  inputs); shown apart, never counted as reproduced;
- not applicable: this hardware cannot do it: the claim's own rule, or a skip whose
  reason says a piece of hardware or a feature is absent (`classify_skip`), with what
  it would need;
- failed: the artifact's own program or check failed (a crash, a sanity or
  verification failure, a failed build): its fault, never the paper's;
- not run: the infrastructure's failure or choice (not submitted, a scheduler error,
  aborted, killed at the time limit, ranks not started, run on another layout than its
  experiment needs), a skip for another reason (not built, paper size only, a raw
  driver error), or absent from the runs; always with the reason.
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
FAILED = 'failed'
NOT_RUN = 'not run'
ALL = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, INDICATIVE, CONSISTENCY, NOT_APPLICABLE, FAILED, NOT_RUN)
# Counted: what a measurement decided.  FAILED is counted apart (the artifact's fault).
COUNTED = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
# Repeats a performance verdict is made from (make run: REPEAT, ReFrame --repeat).
MIN_REPEATS = 3
# A repeat this many times above or below its case's median measured something else
# (a page-cache miss, a descheduled rank): the verdict is at most inconclusive.
OUTLIER_FACTOR = 3.0

DERIVED = ('over', 'minus', 'over_fact')  # selector keys that combine with something else

# ---- claims: parts and the interval each must fall in ---------------------------------

def selectors(c):
    """(key, selector) pairs of a claim's `measure`; key is None for a single selector."""
    m = c.get('measure')
    if not m:
        return []
    if 'check' in m or 'derive' in m:
        return [(None, m)]
    return list(m.items())


# Checks a named derivation reads (DERIVATIONS below).
DERIVED_FROM = {'remd_model_error': ['RemdLocal', 'RemdVcuda', 'VcudaBench'],
                'remd_balance_error': ['RemdLocal', 'RemdVcuda', 'VcudaBench']}


def checks_of(c):
    """The ReFrame checks a claim's measurement reads, in selector order."""
    out = []

    def walk(sel):
        if 'derive' in sel:
            out.extend(DERIVED_FROM.get(sel['derive'], []))
            return
        out.append(sel['check'])
        for k in ('over', 'minus'):
            if k in sel:
                walk(sel[k])
    for _, sel in selectors(c):
        walk(sel)
    return list(dict.fromkeys(out))


def expected(c, key):
    """The paper's value for one key of a claim (a number or a [low, high] range)."""
    v = c.get('value')
    return v if key is None or not isinstance(v, dict) else v.get(key)


def unit_of(c, key=None):
    """The unit of one part of a claim: its entry in the claim's `units`, else `unit`."""
    return (c.get('units') or {}).get(key) or c.get('unit')


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
    if 'gpu' in missing:   # without a GPU what else it lacks (CUDA, managed memory) is moot
        missing = ['gpu']
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
                                None if hi is None else hi / ref - 1.0, unit_of(c, key))
    return refs


# ---- why a case measured nothing ----------------------------------------------------
#
# A ReFrame test case either measured (its performance variables, whether or not they
# met ReFrame's references), or it says why not.  Whose fault that is decides the
# verdict: a skip whose reason says hardware or a feature is absent -> not applicable;
# the artifact's own failure (a crash, a sanity or verification failure, a failed build)
# -> failed; the infrastructure's (not submitted, a scheduler error, aborted, a time
# limit, ranks not started, wrong placement) and every other skip -> not run.

MEASURED, SKIPPED = 'measured', 'skipped'


class Why:
    """What a case that measured nothing says: the verdict it leads to, a short group
    (what the report's first screen counts by) and the full reason."""

    def __init__(self, verdict, group, reason):
        self.verdict, self.group, self.reason = verdict, group, reason

    def __repr__(self):
        return f'Why({self.verdict!r}, {self.group!r}, {self.reason!r})'


# Skip reasons (reframe/*.py skip_unless, reframe/lib/umstudy/checks.py, and the
# programs' own exit-77 reasons, src/*: ums_unsupported) that say this machine lacks a
# piece of hardware or a feature: (pattern, what a system would need).  Only these are
# "not applicable"; a raw driver or runtime error says something is broken, not absent.
ABSENT = [
    (r'^no GPU on this partition: (none detected|the CUDA driver reports no devices)$', 'an NVIDIA GPU'),
    # no driver library at all: nothing NVIDIA is installed, so no GPU can be used here
    (r'^no GPU on this partition: no CUDA driver \(libcuda\.so\.1: .*cannot open shared object file',
     'an NVIDIA GPU'),
    (r'^no CUDA device( available)? \((0 devices|no CUDA-capable device is detected)\)', 'an NVIDIA GPU'),
    (r'^no CUDA toolchain on this partition$', 'the CUDA toolkit'),
    (r'no pageable memory access \(no HMM/ATS\)|cudaDevAttrPageableMemoryAccess=0 \(no HMM/ATS\)',
     'pageable memory access (HMM or ATS)'),
    (r'^no OpenACC compiler on this partition$', 'an OpenACC compiler'),
    (r'^no OpenACC accelerator is available', 'a GPU the OpenACC runtime can use'),
    (r'^no MPI on this partition$', 'MPI'),
    (r'^this case needs \d+ GPUs; the partition has \d+$', 'several GPUs in one node'),
    (r'^--gpus \d+ asked for, \d+ present', 'several GPUs in one node'),
    (r'^\d+ ranks on \d+ cores of one machine would say nothing$', 'more cores or several nodes'),
    (r"^P003's layout needs a client node plus server nodes", 'several GPU nodes'),
]
# Other skips group by what they say (first match); the rest keep their own words.
OTHER_SKIPS = [
    (r'not in this build \(UMSTUDY_COMPONENTS=', 'left out of this build (UMSTUDY_COMPONENTS)'),
    (r'backend not built|was not built|binary was built|built without|no server started .*built without',
     'not built here'),
    (r'^at quick size|runs at paper size', 'paper size only'),
    (r'userfaultfd is not permitted', 'userfaultfd not permitted here (vm.unprivileged_userfaultfd)'),
    (r'\bretired\b', 'the system is retired'),
    (r'^no GPU on this partition: cuInit failed', 'the CUDA driver failed to start (cuInit)'),
    (r'^no GPU on this partition: ', 'no usable GPU (driver error)'),
    (r'^no CUDA device', 'the CUDA runtime found no usable device (driver or runtime error)'),
    (r'GiB (on the GPU|of GPU memory|of accelerator memory) but .* GiB are free|\) failed$|cannot allocate',
     'not enough free memory'),
]


def classify_skip(reason):
    """Why of a skipped case from its reason: not applicable only where the reason says
    the hardware or a feature is absent (ABSENT), not run otherwise."""
    reason = (reason or '').strip() or 'skipped, no reason recorded'
    for pattern, need in ABSENT:
        if re.search(pattern, reason):
            return Why(NOT_APPLICABLE, need, reason)
    group = next((g for p, g in OTHER_SKIPS if re.search(p, reason)), reason)
    return Why(NOT_RUN, group, reason)


_SCHEDULER_TOOLS = r'sbatch|srun|salloc|squeue|scontrol|sacct|qsub|qstat|qdel|qacct|qrsh|pbsnodes'
_SCHEDULER_LINE = re.compile(rf'^\s*((?:{_SCHEDULER_TOOLS}): .*\S)\s*$', re.M)
_ABORTED = re.compile(r'KeyboardInterrupt|ForceExitError|aborted', re.I)
_TIME_LIMIT = re.compile(r'timed out|time ?limit|TIMEOUT|maximum pending time', re.I)
# Exit statuses of a job (128 + signal, as a shell and the scontrol backend report them).
_OUTSIDE = {137: 'SIGKILL', 143: 'SIGTERM'}   # sent by the scheduler or a person
_CRASH = {132: 'SIGILL', 134: 'SIGABRT', 135: 'SIGBUS', 136: 'SIGFPE', 139: 'SIGSEGV'}


def _text(tc):
    """Everything a failed case says about its failure (ReFrame cuts fail_reason short;
    fail_info holds the whole exception)."""
    info = tc.get('fail_info') if isinstance(tc.get('fail_info'), dict) else {}
    return '\n'.join(x for x in (tc.get('fail_reason'), info.get('exc_value')) if x)


def _first_line(text):
    return next((ln.strip() for ln in (text or '').splitlines() if ln.strip() and not ln.startswith('---')), '')


def _scheduler_error(tc):
    """The scheduler's own error line (sbatch: fatal: ...) where the job was refused or
    the scheduler did not answer, else None."""
    text = _text(tc)
    info = tc.get('fail_info') if isinstance(tc.get('fail_info'), dict) else {}
    lines = _SCHEDULER_LINE.findall(text)
    if not lines and info.get('exc_type') != 'JobSchedulerError':
        return None
    worst = ([ln for ln in lines if re.search(r'\bfatal\b', ln, re.I)] or
             [ln for ln in lines if re.search(r'\berror\b', ln, re.I)] or lines)
    return worst[-1] if worst else _first_line(text)


def _exitcode(tc):
    code = tc.get('job_exitcode')
    return code if isinstance(code, int) else None


def classify_failure(tc, fixtures=None):
    """Why of a case that failed before measuring anything (its result 'fail' outside
    the performance stage, 'abort' or 'fail_deps'): failed where the artifact's program or
    check failed, not run where the infrastructure did.  `fixtures` maps the unique
    names of the report's fixtures (the build) to their test cases."""
    text, phase, code = _text(tc), tc.get('fail_phase'), _exitcode(tc)
    if tc.get('placement_failure'):
        return Why(NOT_RUN, 'placement failure (ranks on another layout than the experiment needs)',
                   f"placement failure: {tc['placement_failure']}")
    if tc.get('result') == 'abort' or (_ABORTED.search(text) and not _perf(tc)):
        said = _first_line(text)
        return Why(NOT_RUN, 'aborted (the run was stopped)',
                   said if 'abort' in said.lower() else 'aborted' + (f': {said}' if said else ''))
    if tc.get('result') in ('fail_deps', 'skip'):
        dep = _dependency(tc, fixtures)
        return dep[1] if dep else Why(NOT_RUN, 'a dependency did not run', 'a dependency (the build) did not complete')
    sched = _scheduler_error(tc)
    if sched:
        return Why(NOT_RUN, f'scheduler error: {sched}',
                   ('not submitted: ' if phase in ('run', 'compile') else 'scheduler error: ') + sched)
    if _TIME_LIMIT.search(text):
        return Why(NOT_RUN, 'time limit', 'killed at its time limit: ' + _first_line(text))
    if code in _OUTSIDE:
        return Why(NOT_RUN, f'killed from outside ({_OUTSIDE[code]}: time limit, memory or a person)',
                   f'exit {code} ({_OUTSIDE[code]}): killed from outside the program')
    if phase in ('run', 'run_wait'):
        return Why(NOT_RUN, 'the job did not run', _first_line(text) or f'failed in {phase}')
    if tc.get('layout') and not tc.get('rank_hosts') and code not in (None, 0) and code not in _CRASH:
        return Why(NOT_RUN, 'ranks not started (the launcher failed)',
                   f"no rank started (launcher exit {code}; {tc['layout'].get('nodes')} node(s) x "
                   f"{tc['layout'].get('per_node')} asked for)")
    if code in (126, 127):
        return Why(NOT_RUN, 'program missing or not executable', f'exit {code}: the program could not be started')
    if code in _CRASH:
        return Why(FAILED, f'crashed ({_CRASH[code]})', f'the program crashed: exit {code} ({_CRASH[code]})')
    if phase == 'sanity':
        return Why(FAILED, 'failed its sanity or verification check', _first_line(text))
    if phase in ('compile', 'compile_wait'):
        return Why(FAILED, 'build failed', _first_line(text) or 'build failed')
    return Why(FAILED, f'the check failed ({phase or "unknown stage"})', _first_line(text) or 'failed')


def _dependency(tc, fixtures):
    """(status, Why) of a case ReFrame did not run because its fixture (the build) failed
    or was skipped: the fixture's own why, or None where no fixture of the report explains it."""
    for dep in tc.get('dependencies_actual') or []:
        fixture = (fixtures or {}).get(dep[0])
        if fixture is None or fixture.get('result') == 'pass':
            continue
        name = parse_name(fixture['name'])[0]
        if fixture.get('result') == 'skip':
            why = classify_skip(fixture.get('skip_reason') or fixture.get('fail_reason'))
            return SKIPPED, Why(why.verdict, why.group, f'{name} (the build) was skipped: {why.reason}')
        why = classify_failure(fixture)
        return why.verdict, Why(why.verdict, why.group, f'{name} (the build) failed: {why.reason}')
    return None


def _perf(tc):
    return {key.rsplit(':', 1)[-1]: val[0] for key, val in (tc.get('perfvalues') or {}).items()
            if val and val[0] is not None}


def _units(tc):
    """{variable: unit} as ReFrame recorded it ([value, ref, lower, upper, unit, result])."""
    return {key.rsplit(':', 1)[-1]: val[4] for key, val in (tc.get('perfvalues') or {}).items()
            if isinstance(val, (list, tuple)) and len(val) > 4 and val[4]}


def _missed(tc):
    """ReFrame's words for the references a measured case missed ('' where it met them)."""
    if tc.get('result') != 'fail' or tc.get('fail_phase') != 'performance':
        return ''
    text = ' '.join((tc.get('fail_reason') or '').split())
    return text.split('reference(s):', 1)[-1].strip()


def num(v):
    """A number in a reason: 4 significant digits, thousands separated, no exponent below 1e12."""
    return f'{v:,.0f}' if 1e4 <= abs(v) < 1e12 else f'{v:.4g}'


def outliers(samples, factor=OUTLIER_FACTOR):
    """Repeats more than `factor` times above or below the median of their repeats.
    Only for positive quantities (a factor between signed values says nothing)."""
    vals = [float(v) for v in samples if v is not None and not math.isnan(float(v))]
    if len(vals) < 2 or min(vals) <= 0:
        return []
    med = statistics.median(vals)
    return [v for v in vals if v > med * factor or v < med / factor]


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
    """A case the session never finished (make run: the report is not a clean run)."""
    return tc.get('result') == 'abort' or (tc.get('result') == 'fail' and not _perf(tc)
                                            and bool(_ABORTED.search(_text(tc))))


def _why(tc, fixtures):
    """(MEASURED, None) or (SKIPPED | FAILED | NOT_RUN, Why) of one repeat."""
    if tc.get('result') == 'skip':
        said = tc.get('skip_reason') or tc.get('fail_reason')
        return (None if said else _dependency(tc, fixtures)) or (SKIPPED, classify_skip(said))
    if tc.get('placement_failure'):
        return NOT_RUN, classify_failure(tc, fixtures)
    if tc.get('result') == 'pass' or (_perf(tc) and tc.get('fail_phase') in ('performance', 'cleanup')):
        return MEASURED, None
    why = classify_failure(tc, fixtures)
    return why.verdict, why


def machine_facts(info):
    """The facts a case recorded about its machine (partition_info.facts), as run."""
    return (info or {}).get('facts') or {}


def _merge(key, tcs, fixtures, session):
    """One case from every repeat/rerun of a test case in one run report.  A repeat on
    the wrong layout makes the whole case a placement failure (it measured something
    else); a repeat the artifact failed makes it failed (shown, never hidden); repeats
    that did not run are left out of the samples and named in the reason."""
    tcs = sorted(tcs, key=lambda t: (t.get('run_index', 0), _repeat_no(t['name'])))
    last = tcs[-1]
    check, params = parse_name(last['name'])
    graded = [(tc, *_why(tc, fixtures)) for tc in tcs]
    measured = [tc for tc, status, _ in graded if status == MEASURED]
    samples = {}
    for tc in measured:
        for var, v in _perf(tc).items():
            samples.setdefault(var, []).append(v)
    worst = (next(((tc, w) for tc, s, w in graded if tc.get('placement_failure')), None) or
             next(((tc, w) for tc, s, w in graded if s == FAILED), None))
    skipped = [(tc, w) for tc, s, w in graded if s == SKIPPED]
    not_run = [(tc, w) for tc, s, w in graded if s == NOT_RUN]
    if worst:
        src, why = worst
        status = why.verdict
    elif measured:
        src, why, status = measured[-1], None, MEASURED
    elif skipped:
        (src, why), status = skipped[-1], SKIPPED
    else:
        (src, why), status = not_run[-1], NOT_RUN
    reason = why.reason if why else ''
    bad = [(tc, w) for tc, s, w in graded if s != MEASURED]
    if measured and bad:
        others = '; '.join(dict.fromkeys(w.reason for _, w in bad))
        reason = (reason + '; ' if reason else '') + f'{len(bad)} of {len(tcs)} repeats measured nothing: {others}'
    missed = list(dict.fromkeys(m for m in (_missed(tc) for tc in measured) if m))
    return {
        'check': check, 'params': params, 'name': key[2], 'system': last['system'],
        'partition': last['partition'], 'size': key[3], 'status': status,
        'verdict': why.verdict if why else None, 'group': why.group if why else '', 'reason': reason,
        'missed': missed,
        'perf': {var: statistics.median(vs) for var, vs in samples.items()},
        'samples': samples, 'units': {k: v for tc in measured for k, v in _units(tc).items()},
        'repeats': len(tcs), 'measured_repeats': len(measured),
        'outliers': {var: o for var, vs in samples.items() if (o := outliers(vs))},
        # where each rank ran ({rank, host[, gpus]}), as the check recorded it
        'rank_hosts': src.get('rank_hosts') or [],
        'info': src.get('partition_info') or {},
        'placement': src.get('placement') or {},
        # Every measurement line the program printed (sweep points, per-rep traces), one
        # list per measured repeat, and their parameters: figures take medians over them.
        'repeat_records': [tc.get('records_kept') or [] for tc in measured],
        'record_params': next((tc.get('record_params') for tc in reversed(measured) if tc.get('record_params')),
                              None) or {},
        'host': session.get('hostname'), 'later': [],
    }


def load_cases(paths):
    """Test cases of all run reports, oldest first.  Within a report every repeat and
    rerun of a case is pooled; a later report's measured case replaces an earlier one
    (quick and paper runs of a check are different experiments).  A case that measured
    nothing (failed, not run, skipped) never hides an earlier measurement of the same
    check and parameters: it is kept only where nothing measured, and otherwise noted
    under the measurement ('later').  Dry-run reports hold job scripts, not
    measurements, and are ignored (see `measurement_reports`)."""
    cases = {}
    for path in paths:
        report = read_report(path)
        if is_dry_run(report):
            continue
        groups, fixtures = {}, {}
        for run in report.get('runs', []):
            for tc in run.get('testcases', []):
                if tc.get('fixture'):
                    fixtures[tc.get('unique_name')] = tc
                    continue
                check, params = parse_name(tc['name'])
                base = ' '.join([check] + [f'%{k}={v}' for k, v in sorted(params.items())])
                key = (tc['system'], tc['partition'], base, tc.get('size', 'quick'))
                groups.setdefault(key, []).append(tc)
        for key, tcs in groups.items():
            new = dict(_merge(key, tcs, fixtures, report.get('session_info') or {}), source=str(path))
            old = cases.get(key)
            if old is not None and old['status'] == MEASURED and new['status'] != MEASURED:
                old['later'].append({'status': new['status'], 'reason': new['reason'],
                                     'source': os.path.basename(str(path))})
                continue
            cases[key] = new
    return list(cases.values())


def measurement_reports(paths):
    """The run reports that hold measurements (dry runs left out), in the given order."""
    return [p for p in paths if not is_dry_run(read_report(p))]


def case_is(case, check, params):
    return case['check'] == check and _params_match(params, case['params'])


def find(cases, system, selector, size=None):
    """The case a selector names on a system: a measured one before one that measured
    nothing, at `size` if given, else the paper-size run where there is one (the claims
    are about the papers' sizes)."""
    hits = [c for c in cases
            if c['system'] == system and case_is(c, selector['check'], selector.get('params') or {})]
    hits.sort(key=lambda c: (c['status'] != MEASURED, c['size'] != (size or 'paper')))
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


def indicative_case(case):
    """Why a measured case can only be indicative whatever claim reads it (oversubscribed,
    over an emulated link, too few repeats), or ''.  Figures draw such points hollow."""
    over, need, cores = oversubscribed(case)
    if over:
        return f'oversubscribed ({need} busy ranks x threads on {cores} cores)'
    if emulated_link(case):
        return emulated_link(case)
    if case.get('measured_repeats', 0) < MIN_REPEATS:
        return f"{case.get('measured_repeats', 0)} repeat(s)"
    return ''


# ---- measuring one part -----------------------------------------------------------------

class Problem(Exception):
    """A part that cannot be judged: (verdict, reason); group is what the report counts
    it under (for a not-applicable part: the hardware it needs)."""

    def __init__(self, verdict, reason, group=None):
        super().__init__(reason)
        self.verdict, self.reason, self.group = verdict, reason, group or reason


def _describe(selector):
    return selector['check'] + ''.join(f' {k}={v}' for k, v in (selector.get('params') or {}).items())


def _facts(case, system):
    # The facts recorded with the run (what detection saw then) win over today's.
    info = case['info']
    return info['facts'] if 'facts' in info else data.facts(system)


class Measured:
    """Samples of one part (one per repeat), the case they come from, the other cases
    they were combined with (each can make the part only indicative) and the repeats of
    any of them that lie far from their median (`outliers`)."""

    def __init__(self, samples, case, notes=(), others=(), flags=()):
        self.samples = [float(v) for v in samples]
        self.case = case
        self.notes = list(notes)
        self.others = list(others)
        self.flags = list(flags)

    @property
    def median(self):
        return statistics.median(self.samples)

    def combine(self, other, op):
        # Repeats are paired by repeat number (runs of one session, side by side).
        n = min(len(self.samples), len(other.samples))
        vals = [op(a, b) for a, b in zip(self.samples[:n], other.samples[:n])]
        return Measured(vals, self.case, self.notes + other.notes,
                        self.others + [other.case] + other.others, self.flags + other.flags)


NOT_IN_RUNS = 'not in these run reports'


def _case(cases, system, selector):
    case = find(cases, system, selector)
    desc = _describe(selector)
    if case is None:
        raise Problem(NOT_RUN, f'{desc} did not run on this system', NOT_IN_RUNS)
    if case['status'] == SKIPPED:
        raise Problem(case['verdict'], f'{desc} skipped: {case["reason"]}', case['group'])
    if case['status'] == FAILED:
        raise Problem(FAILED, f'{desc} failed: {case["reason"]}', case['group'])
    if case['status'] == NOT_RUN:
        raise Problem(NOT_RUN, f'{desc} did not run: {case["reason"]}', case['group'])
    if selector['var'] not in case['samples']:
        raise Problem(NOT_RUN, f'{desc} reported no {selector["var"]}',
                      'the check ran but did not report the value the claim reads')
    for var, want in (selector.get('only_if') or {}).items():
        if case['perf'].get(var) != want:
            why = selector.get('only_if_reason', f'{var} != {want}')
            raise Problem(NOT_RUN, f'{desc}: {why}', why)
    return case


def _flags(case, var, values):
    """'DlmStencil engine=r3 mflops_in_memory: 1.78 against a median of 1,890' for
    each repeat more than OUTLIER_FACTOR from the median of the case's repeats."""
    far = outliers(values)
    if not far:
        return []
    med = statistics.median(values)
    desc = ' '.join([case['check']] + [f'{k}={v}' for k, v in case['params'].items()])
    return [f"{desc} {var}: a repeat at {', '.join(num(v) for v in far)} against a median of "
            f'{num(med)} (more than {OUTLIER_FACTOR:g}x apart)']


def measure(cases, system, selector):
    """The Measured of a selector: its variable, combined with its `over` / `minus`
    selector (repeat by repeat) or divided by `over_fact`, or a named derivation."""
    if 'derive' in selector:
        return DERIVATIONS[selector['derive']](cases, system, selector)
    case = _case(cases, system, selector)
    values = case['samples'][selector['var']]
    m = Measured(values, case, flags=_flags(case, selector['var'], values))
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
            raise Problem(NOT_APPLICABLE, f'system facts do not state {e.args[0]}',
                          f'a system that states {e.args[0]} in its facts')
        m = Measured([v / f for v in m.samples], case, m.notes, m.others, m.flags)
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
        runs = [c for c in cases if c['system'] == system and c['check'] == check and c['status'] == MEASURED
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
        raise Problem(NOT_RUN, 'no measured R(n) to compare the model with: ' + '; '.join(missing),
                      'no multi-GPU R(n) measured')
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
        one = bm.from_records((one_case['repeat_records'] or [[]])[-1], summary, one_case['record_params'])
    except (ValueError, KeyError) as e:
        raise Problem(NOT_RUN, f'{_describe(one_sel)}: no balance-model inputs ({e})',
                      'the one-GPU run was not profiled (balance-model inputs missing)')
    bench = {'check': 'VcudaBench', 'params': {'transport': via}}
    try:
        fit = {k: measure(cases, system, dict(bench, var=k)).median * f
               for k, f in (('BH', 1e6), ('BD', 1e6), ('LH', 1e-6), ('LD', 1e-6), ('LK', 1e-6))}
    except Problem as p:
        raise Problem(p.verdict, f'the {via} copy fit: {p.reason}', p.group)
    check, count = ('RemdLocal', 'gpus') if via == 'local' else ('RemdVcuda', 'servers')
    runs = [c for c in cases if c['system'] == system and c['check'] == check and c['status'] == MEASURED
            and str(c['params'].get('atoms')) == str(atoms) and 'gpu_seconds' in c['samples']
            and int(c['params'].get(count, 1)) in (2, 4) and c['params'].get('kernel', 'fast') == 'fast'
            and str(c['params'].get('keepalive_ms', 2)) == '2']
    if not runs:
        raise Problem(NOT_RUN, f'no {check} run of {atoms} atoms on 2 or 4 GPUs to compare the model with',
                      'no multi-GPU R(n) measured')
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
    return dict(row, measured=shown, verdict=CONSISTENCY, group='',
                reason=f"{because}; fed only the paper's own inputs the model "
                       f"{'agrees with' if all(holds) else 'does not meet'} the claim "
                       '(the paper checked against itself, not a reproduction)')


def judge(claim, system, cases):
    """One row of the verdict table: the claim on one system.  Rows that are not judged
    carry `group`: what the report counts them under (the hardware a not-applicable row
    needs, the cause of a failed or not-run one)."""
    row = dict(_row(claim, system), group='', outliers=[])
    sels = selectors(claim)
    if not sels:
        why = f"component '{claim.get('component')}' has no measurement"
        return dict(row, verdict=NOT_RUN, group=why, reason=why)
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
        return dict(row, verdict=NOT_APPLICABLE, group=why, measured=shown,
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
            problems.append((key, Problem(NOT_APPLICABLE, f'system facts do not state {e.args[0]}',
                                          f'a system that states {e.args[0]} in its facts')))
            continue
        flags = list(m.flags)
        if m.others:   # a ratio or difference of several cases: its own repeats too
            far = outliers(m.samples)
            if far:
                flags.append(f"the combined value: a repeat at {', '.join(num(v) for v in far)} against a "
                             f'median of {num(m.median)} (more than {OUTLIER_FACTOR:g}x apart)')
        why_not = _qualify(m, claim, size_needed)
        verdict = INDICATIVE if why_not else judge_samples(m.samples, lo, hi)
        if flags and verdict in (REPRODUCED, NOT_REPRODUCED):
            verdict = INCONCLUSIVE   # one far repeat cannot carry a verdict either way
        parts[key] = {'measured': m.median, 'spread': spread(m.samples), 'expected': [lo, hi],
                      'verdict': verdict, 'why': why_not, 'notes': m.notes, 'outliers': flags,
                      'unit': unit_of(claim, key), 'size': m.case['size'], 'machine': _machine(m.case)}
        if why_not:
            indicative.append(why_not)

    def label(key):
        return '' if key is None else f'{key}: '

    single = list(parts) == [None] and not problems
    row.update(measured=(parts[None]['measured'] if single else {k: p['measured'] for k, p in parts.items()}) or None,
               spread=parts[None]['spread'] if single else None,
               expected=(parts[None]['expected'] if single else {k: p['expected'] for k, p in parts.items()}) or None,
               parts={str(k): p for k, p in parts.items()},
               outliers=[f for p in parts.values() for f in p['outliers']])
    first = next(iter(parts.values()), None)
    if first:
        row.update(size=first['size'], machine=first['machine'])
    same = {}   # parts that failed for one reason (one case) say it once
    for k, p in problems:
        same.setdefault(p.reason, []).append(k)
    unjudged = '; '.join((', '.join(str(k) for k in keys) + ': ' if keys != [None] else '') + reason
                         for reason, keys in same.items())
    far = ('; a repeat far from its median: ' + '; '.join(row['outliers'])) if row['outliers'] else ''

    failed = [k for k, p in parts.items() if p['verdict'] == NOT_REPRODUCED]
    if failed:
        return dict(row, verdict=NOT_REPRODUCED,
                    reason='outside the expected interval' + _which(failed) + _tol_reason(claim)
                    + (f'; not measured: {unjudged}' if unjudged else ''))
    if problems:
        # A part that cannot be measured decides the verdict (the artifact's failure first).
        order = [FAILED, NOT_RUN, NOT_APPLICABLE]
        problems.sort(key=lambda kp: order.index(kp[1].verdict) if kp[1].verdict in order else 9)
        verdict, group = problems[0][1].verdict, problems[0][1].group
        if verdict in (NOT_RUN, NOT_APPLICABLE):
            cons = _consistency(claim, system, cases, row, unjudged)
            if cons:
                return cons
        if verdict == NOT_APPLICABLE and not row['needs']:
            row['needs'] = '; '.join(dict.fromkeys(p.group for _, p in problems if p.verdict == NOT_APPLICABLE))
        return dict(row, verdict=verdict, group=group, reason=unjudged)
    if indicative:
        return dict(row, verdict=INDICATIVE, reason='; '.join(sorted(set(indicative))) + far)
    if any(p['verdict'] == INCONCLUSIVE for p in parts.values()):
        straddle = [str(k) for k, p in parts.items() if p['verdict'] == INCONCLUSIVE and not p['outliers']]
        why = []
        if straddle:
            why.append('the repeats straddle the bound' + _which(straddle) + _tol_reason(claim))
        if row['outliers']:
            why.append('a repeat lies more than {:g}x from its median: '.format(OUTLIER_FACTOR)
                       + '; '.join(row['outliers']))
        return dict(row, verdict=INCONCLUSIVE, reason='; '.join(why))
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
