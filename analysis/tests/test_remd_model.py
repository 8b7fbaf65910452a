"""P003's efficiency model (analysis/remd_model.py): with the paper's own parameters it
reproduces table 2 (T0 to the ms, R0 as printed: cut to two decimals), the latency
share and the what-ifs of sec. 5.2; the vcuda-bench and remd loaders accept what they
should and reject what they should."""
import json
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import remd_model as m  # noqa: E402

# Two printed T0 exceed the sum of the paper's own printed columns by about 1 ms
# (2,048 atoms: n = 1 columns sum to 482,381.8, printed 482,383; n = 64: 7,554.3,
# printed 7,555), so no single parameter set yields them; they are held to 1.5 ms.
PAPER_ROUNDING = {(2048, 1), (2048, 64)}
CASES = [(natom, n) for natom, rows in m.P003_TABLE2.items() for n in rows]


@pytest.mark.parametrize('natom,n', CASES)
def test_table2_T0_to_the_ms(natom, n):
    t0_ms = m.T(m.p003(natom), n) * 1e3
    printed = m.P003_TABLE2[natom][n][0]
    if (natom, n) in PAPER_ROUNDING:
        assert abs(t0_ms - printed) <= 1.5
    else:
        assert round(t0_ms) == printed


@pytest.mark.parametrize('natom,n', CASES)
def test_table2_R0_as_printed(natom, n):
    r0 = m.R(m.p003(natom), n)
    printed = m.P003_TABLE2[natom][n][1]
    if printed == '>0.99':
        assert r0 > 0.99
    else:
        assert m.truncate2(r0) == printed


def test_table2_columns():
    p = m.p003(256)
    t = {k: v * 1e3 for k, v in m.terms(p, 1024).items()}
    assert round(t['SH/BH'], 2) == 0.06 and round(t['SD/BD'], 1) == 6.7
    assert (round(t['2nLH']), round(t['nLD']), round(t['nLK'], 1), round(t['tCLT'])) == (19, 32, 6.1, 8)
    assert round(m.terms(p, 64)['tGPU'] * 1e3) == 579
    assert round(m.terms(m.p003(2048), 4096)['tGPU'] * 1e3) == 118


def test_latency_and_what_ifs():
    p = m.p003(256)
    assert round(m.latency_share(p, 1024) * 100) == 89  # P003-C5
    total = m.T(p, 1024)
    _, b, lat, _ = m.split(p, 1024)
    assert abs(lat / 2 / total * 100 - 26.5) < 1.0  # halving latency: -26.5%
    assert abs(b / 2 / total * 100 - 3.0) < 0.5  # doubling bandwidth: -3%


def test_model_vs_measured_within_three_points():
    """P003-C4 on the paper's own table: |R0 - R1| <= 0.03 wherever both are printed."""
    for natom, rows in m.P003_TABLE2.items():
        for n, (_, r0, _, r1) in rows.items():
            if r1 is not None and r0 != '>0.99':
                assert abs(r0 - r1) <= 0.03 + 1e-9


def test_efficiency_falls_with_n_beyond_the_optimum():
    p = m.p003(2048)
    rs = [m.R(p, n) for n in m.powers_of_two()]
    assert rs[-1] < rs[10] < rs[6] and m.truncate2(m.R(p, 1024)) == 0.86


FIT = {'bench': 'vcuda', 'kind': 'fit', 'servers': 1, 'BH_GBps': 1.96, 'BD_GBps': 0.85,
       'LH_us': 9.23, 'LD_us': 31.7, 'LK_us': 5.96}


def test_vcuda_fit_loader_tolerates_other_lines_and_averages():
    lines = ['vcuda-bench: starting', '{broken', json.dumps({'bench': 'vcuda', 'kind': 'copy', 'bytes': 512}),
             json.dumps(FIT), json.dumps(dict(FIT, servers=2, BH_GBps=2.96, LK_us=7.96)), '']
    mean, fits = m.load_vcuda_fit(lines)
    assert len(fits) == 2
    assert math.isclose(mean['BH'], 2.46e9) and math.isclose(mean['LK'], 6.96e-6)
    assert math.isclose(mean['LD'], 31.7e-6)


@pytest.mark.parametrize('bad', [{'BH_GBps': -1}, {'LD_us': None}, {'LK_us': 'fast'},
                                 {'BD_GBps': float('nan')}, {'LH_us': True}])
def test_vcuda_fit_loader_rejects_bad_values(bad):
    fit = {k: v for k, v in FIT.items() if k not in bad or bad[k] is not None}
    fit.update({k: v for k, v in bad.items() if v is not None})
    with pytest.raises(ValueError, match='no usable vcuda fit'):
        m.load_vcuda_fit([json.dumps(fit)])


def test_vcuda_fit_loader_needs_a_fit_line():
    with pytest.raises(ValueError):
        m.load_vcuda_fit(['', json.dumps({'bench': 'remd', 'metric': 'x'})])


def remd_lines(gpus, t, tgpu, tclt=1e-3, natom=2048, nrep=14336, via='local'):
    params = {'mode': 'gpu', 'via': via, 'natom': natom, 'nrep': nrep, 'mexch': 100, 'gpus': gpus}
    recs = [{'bench': 'remd', 'metric': 'interval_time', 'value': t * 1.1, 'rep': 0, 'params': params},
            {'bench': 'remd', 'metric': 'interval_time', 'value': t, 'params': params},
            {'bench': 'remd', 'metric': 't_clt', 'value': tclt, 'params': params},
            {'bench': 'remd', 'metric': 't_gpu0', 'value': tgpu * gpus / nrep, 'params': params},
            {'bench': 'remd', 'metric': 'mean_potential', 'value': -7, 'bin': 0, 'params': params}]
    return [json.dumps(r) for r in recs]


def test_fit_local_and_measured_efficiency():
    runs = m.remd_runs(remd_lines(1, 5.0, 4.99, 2e-3) + remd_lines(2, 2.6, 2.5, 4e-3) + ['noise'])
    fit = m.fit_local(runs, 2048)
    assert math.isclose(fit['tGPU0'], 4.99 / 14336) and math.isclose(fit['tlocal1'], 5.0)
    assert math.isclose(fit['tCLT'], 3e-3) and fit['nrep'] == 14336
    eff = m.measured_efficiency(runs, 2048, fit['tlocal1'])
    assert list(eff) == [1, 2] and math.isclose(eff[2][1], 5.0 / (2 * 2.6))
    with pytest.raises(ValueError, match='one-GPU'):
        m.fit_local(runs, 256)


def test_summary_lines_for_the_check(tmp_path, capsys):
    fit = tmp_path / 'fit.jsonl'
    fit.write_text(json.dumps(dict(FIT, BH_GBps=3.0, LD_us=10.0)) + '\n')
    assert m.main(['--summary', '--vcuda', str(fit)]) == 0
    recs = {r['metric']: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert all(r['bench'] == 'remd-model' and 'unit' in r for r in recs.values())
    assert recs['BH_GBps']['value'] == 3.0 and recs['LD_us']['value'] == 10.0 and recs['vcuda_fit']['value'] == 1
    # a faster D2H latency raises R at 1,024 GPUs over P003's
    assert recs['R_2048_1024']['value'] > m.R(m.p003(2048), 1024)
    assert m.main(['--summary']) == 0
    recs = {r['metric']: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert recs['vcuda_fit']['value'] == 0 and recs['BH_GBps']['value'] == 1.96
    assert round(recs['latency_share_1024']['value']) == 89


def bench_lines(servers, bh=1960, bd=850, lh=9.23, ld=31.7, lk=5.96, transport='vcuda-tcp'):
    """src/vcuda's vcuda-bench: one line per fitted constant."""
    return [json.dumps({'bench': 'vcuda-bench', 'metric': name, 'value': v, 'unit': unit, 'transport': transport,
                        'servers': servers, 'kind': 'fit', 'params': {}})
            for name, v, unit in (('BH', bh, 'MB/s'), ('LH', lh, 'us'), ('BD', bd, 'MB/s'), ('LD', ld, 'us'),
                                  ('LK', lk, 'us'))]


def test_vcuda_bench_per_constant_lines():
    lines = (bench_lines(1) + bench_lines(2, bh=2960, lk=7.96) + bench_lines(1, bh=1, transport='local') +
             [json.dumps({'bench': 'vcuda-bench', 'metric': 'copy_time', 'value': 3, 'unit': 'us', 'servers': 1})])
    mean, fits = m.load_vcuda_fit(lines)
    assert len(fits) == 2  # the local runtime's fit is not the network's
    assert math.isclose(mean['BH'], 2460e6) and math.isclose(mean['LK'], 6.96e-6) and math.isclose(mean['LD'], 31.7e-6)
    local, _ = m.load_vcuda_fit(lines, transport='local')
    assert local['BH'] == 1e6


def test_vcuda_bench_incomplete_or_bad_count_is_rejected():
    lines = bench_lines(1)[:4] + bench_lines(2, ld=-3)
    with pytest.raises(ValueError, match=r'servers=1: LK missing.*servers=2: LD=-3'):
        m.load_vcuda_fit(lines)
    wrong_unit = [line.replace('"us"', '"fortnights"') for line in bench_lines(4)]
    with pytest.raises(ValueError, match='fortnights'):
        m.load_vcuda_fit(wrong_unit)


def test_model_cli_on_local_and_vcuda_runs(tmp_path, capsys):
    local = tmp_path / 'local.jsonl'
    local.write_text('\n'.join(remd_lines(1, 5.0, 4.99) + remd_lines(2, 2.6, 2.5)))
    remote = tmp_path / 'vcuda.jsonl'
    remote.write_text('\n'.join(remd_lines(1, 5.2, 4.99, via='vcuda') + remd_lines(2, 2.8, 2.5, via='vcuda')))
    fit = tmp_path / 'fit.jsonl'
    fit.write_text('\n'.join(bench_lines(1) + bench_lines(2)))
    out = tmp_path / 'model.json'
    assert m.main(['--remd', str(local), str(remote), '--vcuda', str(fit), '--natom', '2048', '--json', str(out)]) == 0
    text = capsys.readouterr().out
    assert 'local T1 ms' in text and 'vcuda T1 ms' in text
    (res,) = json.loads(out.read_text())
    assert math.isclose(res['params']['tlocal1'], 5.0)  # the vcuda one-GPU run is not Tlocal(1)
    rows = {r['n']: r for r in res['rows']}
    assert math.isclose(rows[2]['R1_local'], 5.0 / 5.2) and math.isclose(rows[2]['R1_vcuda'], 5.0 / 5.6)
    assert math.isclose(rows[1]['R1_vcuda'], 5.0 / 5.2) and rows[4]['T1_local'] is None
