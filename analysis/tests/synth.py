"""Synthetic ReFrame run reports for the analysis tests: test cases as ReFrame 4 writes
them (name with its %parameters, perfvalues keyed system:partition:var, the check's
recorded variables), repeated as `make run` repeats them (ReFrame --repeat)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'reframe', 'lib'))
from umstudy import data, verdicts as V  # noqa: E402,F401


def system_partition(system):
    """Features and facts a named system's first partition declares (the local system's
    facts come from detection, so tests name the others)."""
    desc = data.system(system)
    return desc['partitions'][0]['features'], desc.get('facts', {})


def run_case(name, system='miyabi', result='pass', perf=None, reason='', features=None, facts=None,
             size='quick', placement=None, records=None, fail_phase=None, placement_failure='',
             record_params=None):
    if features is None or facts is None:
        f, fa = system_partition(system) if system != 'local' else (['cpu'], {})
        features = f if features is None else features
        facts = fa if facts is None else facts
    return {
        'size': size, 'name': name, 'system': system, 'partition': 'gpu', 'result': result,
        'fixture': False, 'fail_phase': fail_phase or ('run' if result == 'fail' else None),
        'fail_reason': reason if result in ('fail', 'abort') else None,
        'skip_reason': reason if result == 'skip' else '',
        'perfvalues': {f'{system}:gpu:{k}': [v, 0, None, None, 'x', 'pass'] for k, v in (perf or {}).items()},
        'partition_info': {'features': features, 'facts': facts},
        'placement': placement or {},
        'placement_failure': placement_failure,
        'records_kept': records or [],
        'record_params': record_params or {},
    }


def repeated(name, perf, n=3, **kw):
    """n repeats of one case (ReFrame --repeat): perf values are numbers (the same in
    every repeat) or lists (one per repeat)."""
    out = []
    for i in range(n):
        vals = {k: (v[i] if isinstance(v, (list, tuple)) else v) for k, v in perf.items()}
        out.append(run_case(f'{name} %.repeat_no={i}', perf=vals, **kw))
    return out


def write_report(path, testcases, cmdline='reframe -r'):
    with open(path, 'w') as f:
        json.dump({'session_info': {'cmdline': cmdline}, 'runs': [{'testcases': testcases}]}, f)
    return str(path)


def judge(tmp_path, testcases, system='miyabi', name='run.json'):
    """{claim id: row} of one system for one synthetic run report."""
    path = write_report(tmp_path / name, testcases)
    cases = V.load_cases([path])
    return {r['id']: r for r in V.verdicts(cases, [system])}
