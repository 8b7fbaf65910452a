"""Systems and claims data, bound evaluation, references, detection, configuration."""
import os
import subprocess
import sys

import pytest

from umstudy import data, detect, verdicts

REPO = data.REPO
RFM_MAIN = 'import sys; sys.argv[0] = "reframe"; from reframe.frontend.cli import main; main()'
# Whatever systems/ holds: a system added with `make system` is checked like the others.
SYSTEMS = data.system_names()


def test_every_system_has_its_folder_and_facts():
    assert {'local', 'slurm'} <= set(SYSTEMS)   # the two profiles CI runs
    for name in SYSTEMS:
        desc = data.system(name)
        assert desc['partitions'] and desc['scheduler'] and desc['launcher']
        if desc.get('sources', {}).get('papers'):   # the papers' systems: their facts are complete
            f = desc['facts']
            assert f['gpu']['mem_bw_gbps'] > 0 and f['link']['h2d_gbps'] > 0
            assert f['host_memory']['bw_gbps'] > 0


def test_facts_follow_the_papers():
    assert data.facts('miyabi')['link']['h2d_gbps'] == 450          # P001: C2C 450 GB/s
    assert data.facts('miyabi')['gpu']['mem_bw_gbps'] == 4000      # P001: HBM3 4000 GB/s
    assert data.facts('pegasus')['link']['h2d_gbps'] == 64         # P001 table 5.4
    assert data.facts('pegasus')['host_memory']['bw_gbps'] == 282
    assert data.facts('tsubame')['gpu']['model'] == 'K20X'         # P003
    assert data.facts('cygnus')['gpu']['count'] == 4               # P000


def test_every_digest_claim_is_data():
    ids = {c['id'] for c in data.all_claims()}
    expected = ({f'P000-C{i}' for i in range(1, 7)} | {f'P001-C{i}' for i in range(1, 10)} |
                {f'P002-C{i}' for i in range(1, 7)} | {f'P003-C{i}' for i in range(1, 7)} |
                {f'P004-C{i}' for i in range(1, 6)})
    assert expected <= ids
    for c in data.all_claims():
        assert c['kind'] in ('value', 'ratio', 'difference', 'ordering', 'crossover', 'trend', 'bound')
        assert c.get('text') and 'unit' in c
        if c['origin'] == 'paper':
            assert c['tolerance'].get('reason'), c['id']


def test_evaluate_bounds_safely():
    facts = {'gpu': {'mem_bw_gbps': 2000}}
    assert data.evaluate('0.5 * gpu.mem_bw_gbps / 4', facts, {}) == 250
    assert data.evaluate(3, facts) == 3.0
    with pytest.raises(data.MissingFact):
        data.evaluate('link.h2d_gbps * 2', facts, {})
    with pytest.raises(ValueError):
        data.evaluate('__import__("os").system("true")', facts, {})


def test_references_come_from_claims():
    miyabi = data.system('miyabi')['partitions'][0]
    refs = verdicts.references('HimenoCudaPerf', {'alloc': 'explicit'}, 'miyabi', miyabi)
    assert refs['pct_roofline'] == (75.0, 0.0, None, '%')
    lo = refs['gflops_loop'][0]
    assert lo == pytest.approx(0.75 * 34 * 4000 * 0.85 / 56)
    # Managed has no bound target; a partition without a GPU gets no GPU reference.
    assert verdicts.references('HimenoCudaPerf', {'alloc': 'managed'}, 'miyabi', miyabi) == {}
    assert verdicts.references('HimenoCudaPerf', {'alloc': 'explicit'}, 'miyabi', {'features': ['cpu']}) == {}


def test_gpu_catalog_matches_driver_names():
    assert data.gpu_by_name('NVIDIA H100 80GB HBM3')['model'] == 'H100-SXM5-80GB'
    assert data.gpu_by_name('NVIDIA H100 PCIe')['mem_bw_gbps'] == 2000
    assert data.gpu_by_name('NVIDIA GH200 480GB')['model'] == 'GH200-96GB'
    assert data.gpu_by_name('Some Future GPU') is None


def test_local_detection_from_a_saved_probe(tmp_path, monkeypatch):
    probe = {'gpus': [{'ordinal': 0, 'name': 'NVIDIA H100 80GB HBM3', 'memory_gib': 79.2,
                       'cc_major': 9, 'cc_minor': 0, 'managed_memory': 1,
                       'pageable_memory_access': 0, 'concurrent_managed_access': 1,
                       'pageable_uses_host_page_tables': 0, 'arch': '90', 'pcie': [5, 16]}],
             'gpu_reason': '', 'nvcc': '/usr/local/cuda/bin/nvcc', 'mpi': True,
             'openacc': ['gcc-nvptx'], 'cores': 16}
    path = tmp_path / 'probe.json'
    path.write_text(__import__('json').dumps(probe))
    monkeypatch.setenv('UMSTUDY_LOCAL_PROBE', str(path))
    desc = detect.complete(data._load_yaml(os.path.join(REPO, 'systems', 'local', 'system.yaml')))
    feats = desc['partitions'][0]['features']
    assert {'gpu', 'cuda', 'um', 'mpi', 'openacc'} <= set(feats) and 'sam' not in feats
    assert desc['facts']['gpu']['mem_bw_gbps'] == 3350
    assert desc['facts']['link']['h2d_gbps'] == 63.0  # Gen5 x16: 16 x 3.938 GB/s
    probe['gpus'][0]['pageable_memory_access'] = 1
    probe['gpus'][0]['pageable_uses_host_page_tables'] = 1  # GH200: C2C, not PCIe
    path.write_text(__import__('json').dumps(probe))
    desc = detect.complete(data._load_yaml(os.path.join(REPO, 'systems', 'local', 'system.yaml')))
    assert 'sam' in desc['partitions'][0]['features']
    assert 'link' not in desc['facts']


def test_this_machine_probe_runs():
    p = detect.probe()
    assert isinstance(p['gpus'], list) and (p['gpus'] or p['gpu_reason'])


def test_generated_configuration_validates_for_every_system():
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, 'reframe', 'lib'))
    for name in SYSTEMS:
        r = subprocess.run([sys.executable, '-c', RFM_MAIN, '-C',
                            os.path.join(REPO, 'reframe', 'config', 'umstudy.py'),
                            '-c', os.path.join(REPO, 'reframe'), '--system', name, '-l'],
                           capture_output=True, text=True, env=env, cwd=REPO)
        assert r.returncode == 0, r.stdout + r.stderr
        assert 'HimenoCudaPerf %alloc=explicit' in r.stdout and 'HimenoCpuPerf' in r.stdout


def test_paper_values_become_references_on_their_system_only():
    gh200 = {'features': ['gpu', 'cuda', 'sam', 'um']}
    refs = verdicts.references('UmbBaseline', {'array': '4G'}, 'miyabi', gh200)
    assert refs['gpu_copy'][0] == 3200 and abs(refs['gpu_copy'][1] + 0.1) < 1e-9  # paper, not UMB-T3
    assert refs['h2d'][0] == 410
    lo, hi = refs['cpu_copy'][1:3]
    assert abs(335 * (1 + lo) - 279) < 1e-6 and abs(335 * (1 + hi) - 396) < 1e-6
    pegasus = verdicts.references('UmbBaseline', {'array': '4G'}, 'pegasus', {'features': ['gpu', 'cuda']})
    assert pegasus['h2d'][0] == 64  # P001-C9 on its own system
    # Paper-size values are not references at quick size; bounds still are.
    cyg = {'features': ['gpu', 'cuda', 'um', 'mpi']}
    assert 'flat_managed_ms' not in verdicts.references('UmbStride', {}, 'cygnus', cyg, 'quick')
    assert verdicts.references('UmbStride', {}, 'cygnus', cyg, 'paper')['flat_managed_ms'][0] == 2600
    # Derived quantities (over/minus, P001-C4/C6) are never ReFrame references.
    sam4 = verdicts.references('UmbPatterns', {'alloc': 'system', 'array': '4G'}, 'miyabi', gh200, 'paper')
    assert set(sam4) == {'p5_settled', 'p6_settled', 'p7_settled'} and sam4['p5_settled'][0] == 3000
    sam8 = verdicts.references('UmbPatterns', {'alloc': 'system', 'array': '8G'}, 'miyabi', gh200, 'paper')
    assert sam8['p6_settled'][0] == 2400


def test_a_partitions_own_facts_set_its_references():
    """A partition's `facts:` (the nodes of a CPU partition, say) win over the system's in
    ReFrame's references, as in the judged report (recorded partition facts)."""
    gpu = {'features': ['gpu', 'cuda']}
    system = verdicts.references('UmbBaseline', {'array': '4G'}, 'cygnus', gpu)['h2d']
    assert abs(system[0] - 0.8 * data.facts('cygnus')['link']['h2d_gbps']) < 1e-9   # UMB-T1
    slower = dict(gpu, facts={'link': {'type': 'PCIe Gen3 x16', 'h2d_gbps': 10, 'd2h_gbps': 10}})
    assert abs(verdicts.references('UmbBaseline', {'array': '4G'}, 'cygnus', slower)['h2d'][0] - 8.0) < 1e-9
