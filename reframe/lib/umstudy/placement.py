"""Where the ranks of a run ran, against the layout its experiment needs.

A multi-node experiment runs `per_node` ranks on each of `nodes` distinct nodes (one
per node, as the papers ran them).  A run whose ranks landed otherwise (packed onto the
first node, a node missing, a rank that never said where it was) measured something
else: it is a placement failure with the reason, never a measurement.
"""
from collections import Counter


def _ranks(ranks):
    """'0-3,7' for [0, 1, 2, 3, 7]."""
    runs = []
    for r in sorted(ranks):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ','.join(f'{a}' if a == b else f'{a}-{b}' for a, b in runs)


def check_layout(hosts, nodes, per_node):
    """(ok, reason) for `hosts`, the host name of each rank in rank order, against
    `nodes` distinct nodes with `per_node` ranks on each."""
    if nodes < 1 or per_node < 1:
        raise ValueError(f'a layout needs nodes >= 1 and per_node >= 1, not {nodes} x {per_node}')
    want = nodes * per_node
    if len(hosts) != want:
        return False, (f'{len(hosts)} rank(s) said where they ran, the layout has {want} '
                       f'({nodes} node(s) x {per_node})')
    unknown = [r for r, h in enumerate(hosts) if not h]
    if unknown:
        return False, f'rank(s) {_ranks(unknown)} did not say which node they ran on'
    on = {}
    for rank, host in enumerate(hosts):
        on.setdefault(host, []).append(rank)
    where = '; '.join(f'{h}: rank(s) {_ranks(rs)}' for h, rs in sorted(on.items(), key=lambda kv: kv[1][0]))
    if len(on) != nodes:
        return False, f'ranks on {len(on)} distinct node(s), the layout needs {nodes} ({where})'
    counts = Counter(hosts)
    if any(n != per_node for n in counts.values()):
        return False, f'ranks per node differ from the {per_node} the layout needs ({where})'
    return True, f'{want} rank(s) on {nodes} distinct node(s), {per_node} per node'
