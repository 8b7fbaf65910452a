"""Systems, GPUs and claims as data, and what derives from them.

One place turns systems/<name>/system.yaml + systems/gpus.yaml + analysis/claims.yaml
into (a) facts per system, (b) ReFrame references per check, (c) expected bounds for
the report.  Nothing else in the repository holds a performance number.
"""
import ast
import functools
import operator
import os
import re

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
SYSTEMS_DIR = os.path.join(REPO, 'systems')
CLAIMS_FILE = os.path.join(REPO, 'analysis', 'claims.yaml')


def _load_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f)


@functools.lru_cache(maxsize=None)
def gpu_catalog():
    return _load_yaml(os.path.join(SYSTEMS_DIR, 'gpus.yaml'))


def gpu_by_name(name):
    """The catalog entry whose `match` regex matches a driver-reported name, or None."""
    for entry in gpu_catalog():
        if re.search(entry['match'], name or ''):
            return entry
    return None


def gpu_by_model(model):
    for entry in gpu_catalog():
        if entry['model'] == model:
            return entry
    return None


def system_names():
    return sorted(d for d in os.listdir(SYSTEMS_DIR)
                  if os.path.isfile(os.path.join(SYSTEMS_DIR, d, 'system.yaml')))


@functools.lru_cache(maxsize=None)
def system(name):
    """A system's description; `local` is completed by detection."""
    path = os.path.join(SYSTEMS_DIR, name, 'system.yaml')
    if not os.path.isfile(path):
        raise KeyError(f'no system {name!r}: expected {path} (known: {", ".join(system_names())})')
    desc = _load_yaml(path)
    if desc.get('detect'):
        from . import detect
        desc = detect.complete(desc)
    gpu = desc.get('facts', {}).get('gpu')
    if gpu and gpu.get('model'):
        # Catalog figures fill whatever the system file leaves out.
        desc['facts']['gpu'] = {**(gpu_by_model(gpu['model']) or {}), **gpu}
    return desc


def facts(name):
    return system(name).get('facts', {})


@functools.lru_cache(maxsize=None)
def claims_data():
    return _load_yaml(CLAIMS_FILE)


def all_claims():
    """Paper claims and artifact targets, each tagged with its origin."""
    data = claims_data()
    return ([dict(c, origin='paper') for c in data['claims']] +
            [dict(t, origin='target') for t in data.get('targets', [])])


def claim(claim_id):
    for c in all_claims():
        if c['id'] == claim_id:
            return c
    raise KeyError(claim_id)


# ---- bounds: numbers or expressions over facts -------------------------------------

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.Pow: operator.pow, ast.USub: operator.neg}


class MissingFact(LookupError):
    """A bound needs a fact this system does not state."""


def _lookup(path, env):
    node = env
    for part in path.split('.'):
        if not isinstance(node, dict) or node.get(part) is None:
            raise MissingFact(path)
        node = node[part]
    return node


def evaluate(expr, facts_, constants=None):
    """Evaluates a bound: a number, or arithmetic over dotted fact names and constants.

    Only + - * / ** and parentheses are accepted, so the data cannot run code."""
    if isinstance(expr, (int, float)):
        return float(expr)
    env = dict(constants if constants is not None else claims_data().get('constants', {}))
    env.update(facts_)

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.operand))
        if isinstance(node, (ast.Name, ast.Attribute)):
            return float(_lookup(ast.unparse(node), env))
        raise ValueError(f'unsupported element {ast.dump(node)} in bound {expr!r}')

    return walk(ast.parse(str(expr), mode='eval'))


def applies(c, system_name, partition_features):
    """Whether claim/target c can be tested on this system's partition, and if not why."""
    rule = c.get('applies', 'paper')
    if rule == 'all':
        return True, ''
    if rule == 'paper':
        ok = c.get('system') in (system_name, 'any')
        return ok, '' if ok else f"measured on {c.get('system')} in the paper"
    missing = [f for f in rule.get('features', []) if f not in partition_features]
    return (not missing), ('' if not missing else
                           'the partition lacks feature(s) ' + ', '.join(missing))


def bound_for(c, system_name, partition_features):
    """(lower, upper) of a bound claim on a system, or None with the reason."""
    ok, why = applies(c, system_name, partition_features)
    if not ok:
        return None, why
    b = c.get('bound', {})
    try:
        lo = evaluate(b['lower'], facts(system_name)) if 'lower' in b else None
        hi = evaluate(b['upper'], facts(system_name)) if 'upper' in b else None
    except MissingFact as e:
        return None, f'system facts do not state {e.args[0]}'
    return (lo, hi), ''


def _params_match(want, have):
    return all(str(have.get(k)) == str(v) for k, v in (want or {}).items())


def selectors(c):
    """(key, selector) pairs of a claim's `measure`; key is None for a single selector."""
    m = c.get('measure')
    if not m:
        return []
    if 'check' in m:
        return [(None, m)]
    return list(m.items())


def expected(c, key):
    """The paper's value for one key of a claim (a number or a [low, high] range)."""
    v = c.get('value')
    return v if key is None else (v or {}).get(key)


def band(value, tol):
    """[low, high] that a measurement must fall in: value (number or range) +- tolerance."""
    lo, hi = (value if isinstance(value, (list, tuple)) else (value, value))
    slack_lo = tol.get('abs', abs(lo) * tol.get('rel', 0.0))
    slack_hi = tol.get('abs', abs(hi) * tol.get('rel', 0.0))
    return [lo - slack_lo, hi + slack_hi]


DERIVED = ('over', 'minus', 'over_fact')  # selector keys that combine with something else


def references(check_name, params, system_name, partition, size='quick'):
    """ReFrame `reference` entries for one check on one partition, from the claims.

    Bounds become one-sided (or two-sided) references wherever the claim applies; a
    paper's value becomes value +- tolerance on the paper's system (at the paper's size
    when the claim says `size: paper`).  Quantities derived
    from several checks (over/minus) are judged by analysis/report.py instead."""
    feats = partition.get('features', [])
    refs = {}
    for c in all_claims():
        for key, sel in selectors(c):
            if sel.get('check') != check_name or any(k in sel for k in DERIVED):
                continue
            if sel['var'] in refs and c.get('origin') == 'target':
                continue  # the paper's own number is the sharper reference on its system
            if not _params_match(sel.get('params'), params):
                continue
            if c.get('size', size) != size:
                continue  # e.g. a time at the paper's array size says nothing at quick size
            if c.get('kind') == 'bound':
                bounds, _ = bound_for(c, system_name, feats)
                if bounds is None:
                    continue
                lo, hi = bounds
            else:
                value = expected(c, key)
                if value is None or not applies(c, system_name, feats)[0]:
                    continue
                lo, hi = band(value, c.get('tolerance', {}))
                mid = sum(value) / 2 if isinstance(value, (list, tuple)) else value
                if mid:
                    refs[sel['var']] = (mid, lo / mid - 1.0, hi / mid - 1.0, c.get('unit'))
                continue
            ref = lo if lo is not None else hi
            if ref in (None, 0):
                continue
            lower = 0.0 if lo is not None else None
            upper = (hi / ref - 1.0) if hi is not None else None
            refs[sel['var']] = (ref, lower, upper, c.get('unit'))
    return refs
