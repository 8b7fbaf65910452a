"""The cluster in a box (.ci/cluster.sh) as data and arithmetic: its link rate, how that
rate was chosen, what was measured over it, and the resource types its Grid Engine offers.

Link rate.  The papers' multi-node results depend on how fast a remote byte arrives
compared with a local copy, not on absolute speed; the box keeps that ratio.  Each
regime in systems/cluster/system.yaml (`emulation.regimes`) gives a paper's link and the
copy it competes with, both in GB/s (10^9 B/s):
- P004 (DLM): InfiniBand FDR 4x (56 Gbit/s signalling, 64b/66b: 6.82 GB/s of payload)
  against the compute node's DRAM (2 sockets x 4 channels DDR3-1600 = 102.4 GB/s of
  traffic; a copy reads and writes every byte, so 51.2 GB/s of copy): ratio 0.133, to be
  applied to this machine's copy rate with every core copying (`all_cores`).
- P003 (DS-CUDA): IB 3.2 GB/s against the PCIe Gen2 x16 copy to a local GPU, 8 GB/s:
  ratio 0.4, applied to one thread's memcpy (`one_thread`: one copy stream, as one
  cudaMemcpy).
The papers state peaks (signalling rates, DRAM and PCIe peaks), this machine's side is
measured (a copy with Python's bytearray slice assignment, a libc memcpy underneath):
the box's link is therefore, if anything, slower against its memory than the papers'.
`python3 -m umstudy.cluster --measure` measures and prints every regime's rate; the
chosen one was recorded in the system file as facts.network.gbit_s, which `up` uses.

Grid Engine resource types: TSUBAME4.0's (`#$ -l node_f=1`, ...) as consumables, with
how many of each one node of the box holds (`gridengine.resource_types`)."""
import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time

import yaml

from . import data

SYSTEM_FILE = os.path.join(data.SYSTEMS_DIR, 'cluster', 'system.yaml')


def system_file(path=SYSTEM_FILE):
    # Read directly, not through data.system(): that detects the machine (slow), and
    # the script only needs the data.
    with open(path) as f:
        return yaml.safe_load(f)


# ---- memory copy ------------------------------------------------------------------------

def _copy_rates(nbytes, reps, barrier=None, out=None):
    src = bytearray(b'\x01') * nbytes
    dst = bytearray(nbytes)
    s, d = memoryview(src), memoryview(dst)
    d[:] = s   # first touch of dst's pages, untimed
    rates = []
    for _ in range(reps):
        if barrier is not None:
            barrier.wait()
        t = time.perf_counter()
        d[:] = s
        rates.append(nbytes / (time.perf_counter() - t) / 1e9)
    if out is not None:
        out.put(rates)
    return rates


def measure_copy(nbytes=256 << 20, reps=7, procs=None):
    """This machine's memory copy rate in GB/s: one thread, and every core copying its
    own buffer at once (processes started together at each repetition; the sum of
    their rates).  Median and min..max of `reps` repetitions."""
    one = _copy_rates(nbytes, reps)
    procs = procs or os.cpu_count() or 1
    ctx = multiprocessing.get_context('fork')
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    workers = [ctx.Process(target=_copy_rates, args=(nbytes, reps, barrier, out)) for _ in range(procs)]
    for w in workers:
        w.start()
    per = [out.get() for _ in workers]
    for w in workers:
        w.join()
    total = [sum(r[i] for r in per) for i in range(reps)]

    def summary(xs):
        return {'median': round(statistics.median(xs), 2), 'min': round(min(xs), 2),
                'max': round(max(xs), 2), 'n': len(xs)}
    return {'one_thread_gbyte_s': summary(one), 'all_cores_gbyte_s': summary(total),
            'cores': procs, 'bytes': nbytes}


def regime_rates(desc, copy):
    """Each regime's ratio and the link rate (Gbit/s) it gives on a machine whose copy
    rates are `copy` (measure_copy's result)."""
    out = {}
    for name, r in desc['emulation']['regimes'].items():
        ratio = r['link_gbyte_s'] / r['copy_gbyte_s']
        box = copy[f"{r['box_copy']}_gbyte_s"]['median']
        out[name] = {'ratio': round(ratio, 4), 'box_copy': r['box_copy'], 'box_copy_gbyte_s': box,
                     'link_gbit': round(ratio * box * 8, 1)}
    return out


def default_gbit(desc):
    return float(desc['facts']['network']['gbit_s'])


# ---- the measurement at `up` --------------------------------------------------------------

def _stats(xs):
    return {'median': statistics.median(xs), 'min': min(xs), 'max': max(xs), 'n': len(xs)}


def summarize_pingpong(lines, link_gbit, status=0, op='raw-get', small=8, large=4 << 20):
    """cab-pingpong's JSON lines from repeated runs -> what the link gave: latency of
    `small`-byte and bandwidth of `large`-byte messages for `op` (median, min..max over
    the runs); or measured: false with the reason."""
    recs = []
    for line in lines:
        line = line.strip()
        if line.startswith('{'):
            try:
                recs.append(json.loads(line))
            except ValueError:
                pass
    base = {'program': 'cab-pingpong', 'op': op, 'link_gbit': link_gbit}
    if status != 0:
        return {**base, 'measured': False, 'reason': f'cab-pingpong exited with status {status}'}
    mine = [r for r in recs if r.get('op') == op and r.get('verified', True)]
    lat = [r['value'] for r in mine if r.get('metric') == 'latency' and r.get('bytes') == small]
    bw = [r['value'] for r in mine if r.get('metric') == 'bandwidth' and r.get('bytes') == large]
    if not lat or not bw:
        return {**base, 'measured': False,
                'reason': f'no {op} latency at {small} B or bandwidth at {large} B in the output'}
    bws = _stats(bw)
    gbit = bws['median'] * 1e6 * 8 / 1e9
    return {**base, 'measured': True, 'between': ['umsnode1', 'umsnode2'],
            'latency_us': {'bytes': small, **_stats(lat)},
            'bandwidth_mb_s': {'bytes': large, **bws},
            'bandwidth_gbit': round(gbit, 3),
            'fraction_of_link': round(gbit / link_gbit, 3) if link_gbit else None}


def describe(measured):
    if not measured.get('measured'):
        return f"link {measured.get('link_gbit')} Gbit/s, not measured: {measured.get('reason')}"
    lat, bw = measured['latency_us'], measured['bandwidth_mb_s']
    return (f"link {measured['link_gbit']} Gbit/s shaped; MPI {measured['op']} umsnode1-umsnode2: "
            f"{lat['median']:.1f} us at {lat['bytes']} B ({lat['min']:.1f}..{lat['max']:.1f}), "
            f"{bw['median']:.0f} MB/s at {bw['bytes']} B ({bw['min']:.0f}..{bw['max']:.0f}), "
            f"median of {bw['n']}: {measured['fraction_of_link']:.0%} of the shaped rate")


def measured_state(environ=None):
    """What `up` measured ($UMSTUDY_CLUSTER_STATE/link.json), or None when no cluster is
    up in this environment."""
    environ = os.environ if environ is None else environ
    state = environ.get('UMSTUDY_CLUSTER_STATE')
    path = os.path.join(state, 'link.json') if state else None
    if not path or not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def complete(desc, environ=None):
    """The system's facts with what `up` measured over the link (facts.link_measured),
    where a cluster is up in this environment."""
    measured = measured_state(environ)
    if measured is not None:
        desc.setdefault('facts', {})['link_measured'] = measured
    return desc


def ge_resource_types(desc):
    """(name, per-node capacity) of every Grid Engine resource type the box defines."""
    return list(desc['gridengine']['resource_types'].items())


def main(argv=None):
    p = argparse.ArgumentParser(prog='python3 -m umstudy.cluster', description=__doc__.split('\n')[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument('--measure', action='store_true',
                   help="measure this machine's copy rates; print every regime's link rate (JSON)")
    g.add_argument('--default-gbit', action='store_true', help="the system file's link rate (Gbit/s)")
    g.add_argument('--ge-resource-types', action='store_true', help='Grid Engine resource types: NAME PER_NODE lines')
    g.add_argument('--summarize-pingpong', metavar='JSONL', help="cab-pingpong's output -> link.json")
    g.add_argument('--describe', metavar='JSON', help='one line about a link.json')
    p.add_argument('--gbit', action='store_true', help='with --measure: print only the chosen regime\'s rate')
    p.add_argument('--link-gbit', type=float, default=0.0)
    p.add_argument('--status', type=int, default=0)
    a = p.parse_args(argv)
    desc = system_file()
    if a.measure:
        copy = measure_copy()
        rates = regime_rates(desc, copy)
        chosen = desc['emulation']['chosen']
        if a.gbit:
            print(rates[chosen]['link_gbit'])
        else:
            print(json.dumps({'copy': copy, 'regimes': rates, 'chosen': chosen}, indent=1))
    elif a.default_gbit:
        print(default_gbit(desc))
    elif a.ge_resource_types:
        for name, n in ge_resource_types(desc):
            print(name, n)
    elif a.summarize_pingpong:
        with open(a.summarize_pingpong) as f:
            print(json.dumps(summarize_pingpong(f, a.link_gbit, a.status)))
    elif a.describe:
        with open(a.describe) as f:
            print(describe(json.load(f)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
