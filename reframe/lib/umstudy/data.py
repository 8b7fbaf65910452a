"""Systems, GPUs and claims as data, and what derives from them.

One place turns systems/<name>/system.yaml + systems/gpus.yaml + analysis/claims.yaml
into facts per system and evaluated bounds; umstudy.verdicts turns the claims into
ReFrame references and verdicts.  Nothing else in the repository holds a performance
number.
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
    if desc.get('emulation'):
        # the cluster in a box: what its link gave when it came up (.ci/cluster.sh)
        from . import cluster
        desc = cluster.complete(desc)
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
