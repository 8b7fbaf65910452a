"""analysis/report.py figures on a synthetic run report with umbench records."""
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
sys.path.insert(0, HERE)
import figures  # noqa: E402
import report  # noqa: E402
from synth import V  # noqa: E402

pytest.importorskip('matplotlib')

FILES = ['umb_modes.png', 'umb_fraction.png', 'umb_stride.png', 'umb_halo.png',
         'umb_baseline.png', 'umb_patterns.png', 'umb_migration.png']
NO_HMM = 'the GPU reports no pageable memory access (no HMM/ATS)'


def tc(name, records=(), result='pass', reason='', system='miyabi', size='quick', params=None):
    return {'name': name, 'system': system, 'partition': 'gpu', 'result': result, 'size': size,
            'fixture': False, 'skip_reason': reason if result == 'skip' else '',
            'fail_reason': None, 'perfvalues': {}, 'partition_info': {},
            'records_kept': list(records), 'record_params': params or {}}


def time(mode, value, **fields):
    return dict(metric='time', value=value, unit='ms', mode=mode, **fields)


def trace(series, values, key='series', trial=0, start=0):
    return [{'metric': 'bandwidth', 'value': v, 'unit': 'GB/s', key: series, 'trial': trial,
             'rep': start + i} for i, v in enumerate(values)]


def umbench_cases(system='miyabi'):
    modes = [time(m, t) for m, t in (('explicit', 100), ('managed', 150), ('both', 148), ('prefetch', 120))]
    fraction = [time(m, t + f * k, fraction_pct=f) for f in (0, 50, 100)
                for m, t, k in (('explicit', 100, 0), ('managed', 20, 2))] + [
        {'metric': 'crossover_pct', 'value': 40, 'unit': '%'}]
    stride = [time(m, t, stride_kib=s) for s in (4, 64, 256, 1024)
              for m, t in (('explicit', 100), ('managed', 300 if s < 128 else 50))] + [
        {'metric': 'crossover_kib', 'value': 128, 'unit': 'KiB'}]
    halo = [time(m, t, pack=p) for p, m, t in (('cpu', 'explicit', 100), ('cpu', 'managed', 180),
                                              ('gpu', 'explicit', 10), ('gpu', 'managed', 11))]
    baseline = sum((trace(s, [v * 0.5, v, v]) for s, v in
                    (('cpu_copy', 300), ('gpu_copy', 3000), ('h2d', 400), ('d2h', 300), ('d2d', 3100))), [])
    patterns = sum((trace(f'p{k}', [10, 100 * k, 100 * k]) for k in range(1, 9)), []) + [
        {'metric': 'pattern', 'value': k, 'unit': '1', 'src': 'HM', 'dst': 'DM', 'by': 'CPU' if k < 5 else 'GPU'}
        for k in range(1, 9)]
    migration = (trace('phase1', [10, 3000, 3000], key='phase') +
                 trace('phase2', [50, 300, 300], key='phase', start=3) +
                 trace('phase3', [3000, 3000, 3000], key='phase', start=6) +
                 [{'metric': 'phase3_ramp', 'value': 1.0, 'unit': 'ratio'}])
    return [
        tc('UmbModes', modes, system=system, params={'size_bytes': 2**30}),
        tc('UmbFraction', fraction, system=system),
        tc('UmbStride', stride, system=system, size='paper'),
        tc('UmbHalo %problem=small', halo, system=system, params={'n': 7680}),
        tc('UmbHalo %problem=large', halo, system=system, params={'n': 15360}),
        tc('UmbBaseline %array=4G', baseline, system=system),
        tc('UmbPatterns %array=4G %alloc=system', patterns, system=system),
        tc('UmbPatterns %array=4G %alloc=managed', patterns, system=system),
        tc('UmbMigration %array=4G %alloc=system', result='skip', reason=NO_HMM, system=system),
        tc('UmbMigration %array=4G %alloc=managed', migration, system=system),
    ]


def load(tmp_path, testcases):
    path = tmp_path / 'run.json'
    path.write_text(json.dumps({'session_info': {}, 'runs': [{'testcases': testcases}]}))
    return V.load_cases([str(path)])


def test_load_cases_keeps_records(tmp_path):
    cases = load(tmp_path, umbench_cases())
    modes = next(c for c in cases if c['check'] == 'UmbModes')
    assert modes['repeat_records'] == [modes['repeat_records'][0]] and len(modes['repeat_records'][0]) == 4
    assert modes['record_params'] == {'size_bytes': 2**30}
    skipped = next(c for c in cases if c['status'] == V.SKIPPED)
    assert skipped['repeat_records'] == [] and skipped['record_params'] == {}


def test_every_figure_drawn_and_skip_reason_noted(tmp_path):
    cases = load(tmp_path, umbench_cases() + umbench_cases('pegasus'))  # two systems: a panel each
    figs = {f['name']: f for f in figures.figures(cases, str(tmp_path))}
    assert sorted(f for f in figs if f.startswith('umb_')) == sorted(FILES)
    for name in FILES:
        assert figs[name]['file'] == name
        assert (tmp_path / name).stat().st_size > 1000, name
    note = figs['umb_migration.png']['note']
    assert NO_HMM in note and 'UmbMigration array=4G alloc=system on miyabi' in note
    assert 'on pegasus' in note
    assert figs['umb_stride.png']['caption'].endswith('[paper size]')
    assert figs['umb_modes.png']['caption'].endswith('[quick size]')
    assert figs['umb_modes.png']['note'] == ''


def test_no_data_no_figure_but_a_note(tmp_path):
    cases = load(tmp_path, [tc('HimenoCpuPerf'),
                            tc('UmbPatterns %array=1G %alloc=system', result='skip', reason=NO_HMM)])
    figs = {f['name']: f for f in figures.figures(cases, str(tmp_path))}
    for name in FILES:
        assert figs[name]['file'] is None and not (tmp_path / name).exists()
        assert figs[name]['note'].startswith('no ')
    assert NO_HMM in figs['umb_patterns.png']['note']
    # A case that ran but kept no records (an older report) is no data either.
    cases = load(tmp_path, [tc('UmbModes')])
    fig, note = figures.umb_modes_figure(cases, str(tmp_path))
    assert fig is None and 'kept no records' in note


def test_report_has_figures_section(tmp_path):
    path = tmp_path / 'run.json'
    path.write_text(json.dumps({'session_info': {}, 'runs': [{'testcases': umbench_cases()[:2] + [
        tc('UmbMigration %array=4G %alloc=system', result='skip', reason=NO_HMM)]}]}))
    out = tmp_path / 'out'
    assert report.main(['--out', str(out), str(path)]) == 0
    md, page = (out / 'report.md').read_text(), (out / 'report.html').read_text()
    assert '## Figures' in md and 'id="figures"' in page and 'id="himeno"' in page
    for text in (md, page):
        assert 'umb_modes.png' in text and 'umb_fraction.png' in text
        assert 'umb_migration.png' in text and NO_HMM in text  # not drawn: its note says why
    assert '![umb_modes.png](umb_modes.png)' in md and '<img src="umb_fraction.png"' in page
    assert (out / 'umb_modes.png').exists() and not (out / 'umb_migration.png').exists()


# ---- P002 (coarray-bench) figures and table 3 ----------------------------------------

CAB_FILES = ['cab_pingpong.png', 'cab_npb.png']
NO_GASNET = 'XMPC_BACKEND=gasnet: backend not built (this build has: mpi3 armci)'


def pingpong(scale):
    return [{'metric': m, 'value': v * scale, 'unit': u, 'op': op, 'bytes': n, 'verified': True}
            for op in ('put', 'get', 'raw-put', 'raw-get') for n in (1, 1024, 4 << 20)
            for m, u, v in (('latency', 'us', 1 + n / 1000), ('bandwidth', 'MB/s', n / (1 + n / 1000)))]


def npb(mops, share):
    return [{'metric': 'mops', 'value': mops, 'unit': 'Mop/s', 'verified': True},
            {'metric': 'time', 'value': 1.0, 'unit': 's', 'verified': True},
            {'metric': 'comm_share', 'value': share, 'unit': '%', 'verified': True}]


def cab_cases(system='local'):
    cls = {'class': 'S'}
    out = [tc('CabPingPong %backend=mpi3', pingpong(1.0), system=system),
           tc('CabPingPong %backend=armci', pingpong(1.3), system=system, result='fail', reason='slow'),
           tc('CabPingPong %backend=gasnet', result='skip', reason=NO_GASNET, system=system)]
    for ranks in (2, 4):
        out += [tc(f'CabIsMpi %ranks={ranks}', npb(400 / ranks, 10 * ranks), system=system, params=cls),
                tc(f'CabCgMpi %ranks={ranks}', npb(4000 / ranks, 5 * ranks), system=system, params=cls),
                tc(f'CabIs %ranks={ranks} %backend=gasnet', result='skip', reason=NO_GASNET, system=system)]
        for b, k in (('mpi3', 1.0), ('armci', 0.9)):
            out.append(tc(f'CabIs %ranks={ranks} %backend={b}', npb(500 * k / ranks, 20 * ranks * k),
                          system=system, params=cls))
            for variant, share in (('get', 11.5 * ranks * k), ('putacc', 99.0)):
                out.append(tc(f'CabCg %ranks={ranks} %backend={b} %variant={variant}',
                              npb(3000 * k / ranks, share), system=system, params=cls))
    return out


def test_cab_figures_drawn_and_gasnet_skip_noted(tmp_path):
    cases = load(tmp_path, cab_cases() + cab_cases('pegasus'))
    figs = {f['name']: f for f in figures.figures(cases, str(tmp_path))}
    for name in CAB_FILES:
        assert figs[name]['file'] == name and (tmp_path / name).stat().st_size > 1000, name
        assert NO_GASNET in figs[name]['note'] and 'on pegasus' in figs[name]['note']
    assert 'CabPingPong backend=gasnet on local' in figs['cab_pingpong.png']['note']
    assert figs['cab_npb.png']['caption'].endswith('[quick size]')
    assert figures._npb_classes(cases) == 'class S'


def test_cab_comm_table(tmp_path):
    table = figures.cab_comm_table(load(tmp_path, cab_cases()))
    assert table['title'] == 'P002 table 3: communication share (%)'
    (tab,) = table['tables']
    assert tab['heading'] == 'local (quick size, class S)'
    assert tab['headers'] == ['ranks', 'IS mpi3', 'IS armci', 'IS paper GASNet', 'IS paper ARMCI',
                              'CG mpi3 (get)', 'CG armci (get)', 'CG paper GASNet', 'CG paper ARMCI']
    rows = {r[0]: r[1:] for r in tab['rows']}
    assert list(rows) == ['2', '4', '8', '16', '32']
    assert rows['2'] == ['40.00', '36.00', '12.17', '12.76', '23.00', '20.70', '0.91', '1.00']
    assert rows['32'] == ['-', '-', '49.01', '55.55', '-', '-', '20.34', '21.46']
    assert NO_GASNET in table['note'] and 'putacc' not in table['note']


def test_table3_constant_is_the_claims(tmp_path):
    text = figures.data.claim('P002-C5')['text']
    for (kernel, backend), col in figures.P002_TABLE3.items():
        name = f"{kernel} {figures.BACKEND_NAMES[backend]} "
        assert name + '/'.join(f'{v:.2f}' for v in col.values()) + ' %' in text, name


def test_cab_no_data_no_figure_but_a_note(tmp_path):
    cases = load(tmp_path, [tc('CabPingPong %backend=gasnet', result='skip', reason=NO_GASNET),
                            tc('CabIs %ranks=2 %backend=gasnet', result='skip', reason=NO_GASNET)])
    figs = {f['name']: f for f in figures.figures(cases, str(tmp_path))}
    for name in CAB_FILES:
        assert figs[name]['file'] is None and not (tmp_path / name).exists()
        assert figs[name]['note'].startswith('no ')
    assert NO_GASNET in figs['cab_pingpong.png']['note'] and NO_GASNET in figs['cab_npb.png']['note']
    table = figures.cab_comm_table(cases)
    assert table['tables'] == [] and table['note'].startswith('no ') and NO_GASNET in table['note']


def test_report_has_cab_figures_and_table(tmp_path):
    path = tmp_path / 'run.json'
    path.write_text(json.dumps({'session_info': {}, 'runs': [{'testcases': cab_cases()}]}))
    out = tmp_path / 'out'
    assert report.main(['--out', str(out), str(path)]) == 0
    md, page = (out / 'report.md').read_text(), (out / 'report.html').read_text()
    assert '![cab_pingpong.png](cab_pingpong.png)' in md and '<img src="cab_npb.png"' in page
    assert '### P002 table 3: communication share (%)' in md and 'id="tables"' in page
    assert '| 2 | 40.00 | 36.00 | 12.17 | 12.76 | 23.00 | 20.70 | 0.91 | 1.00 |' in md
    assert '<td>49.01</td>' in page and '<th>CG armci (get)</th>' in page


# ---- vcuda (P003 figs. 4-9) ----------------------------------------------------------

def vcuda_cases(system='local'):
    def copies(transport, b, lat):
        return [{'metric': 'copy_time', 'value': s / b + lat, 'unit': 'us', 'transport': transport,
                 'servers': 1, 'dir': d, 'bytes': s} for d in ('H2D', 'D2H') for s in (512, 4096, 1 << 20)]

    def fits(b, lat):
        return {f'{system}:default:{k}': [v, None, None, 'x'] for k, v in
                (('BH', b), ('LH', lat), ('BD', b), ('LD', lat))}

    def idle(fast, slow):
        return [{'metric': 'd2h_after_idle', 'value': fast + (slow - fast) * g / 50, 'unit': 'us',
                 'interval_ms': g} for g in (0, 1, 10, 50)]

    out = [dict(tc('VcudaBench %transport=vcuda', copies('vcuda-tcp', 4000, 20), system=system),
                perfvalues=fits(4000, 20)),
           dict(tc('VcudaBench %transport=local', copies('local', 50000, 8) + idle(9, 60), system=system),
                perfvalues=fits(50000, 8)),
           tc('VcudaKeepalive %keepalive_ms=0 %server_spin_us=200', idle(20, 260), system=system),
           tc('VcudaKeepalive %keepalive_ms=2 %server_spin_us=200', idle(20, 110), system=system),
           tc('VcudaKeepalive %keepalive_ms=0 %server_spin_us=100000', result='skip',
              reason='no GPU on this partition', system=system)]
    return out


def test_vcuda_figures_drawn_with_paper_marks(tmp_path):
    cases = load(tmp_path, vcuda_cases())
    figs = {f['name']: f for f in figures.figures(cases, str(tmp_path))}
    for name in ('vcuda_copy.png', 'vcuda_idle.png'):
        assert figs[name]['file'] == name and (tmp_path / name).stat().st_size > 1000, name
    assert 'no GPU on this partition' in figs['vcuda_idle.png']['note']
    assert 'P003' in figs['vcuda_copy.png']['caption']


def test_vcuda_no_data_no_figure_but_a_note(tmp_path):
    figs = {f['name']: f for f in figures.figures(load(tmp_path, umbench_cases()), str(tmp_path))}
    assert figs['vcuda_copy.png']['file'] is None and 'no VcudaBench data' in figs['vcuda_copy.png']['note']


# ---- remd (P003 figs. 10, 11 and table 2) ----------------------------------------------

def remd_case(name, system='h100box', **perf):
    c = tc(name, system=system)
    c['perfvalues'] = {f'{system}:gpu:{k}': [v, 0, None, None, 'x', 'pass'] for k, v in perf.items()}
    return c


def remd_cases(system='h100box'):
    """One-GPU 5 s, two GPUs 2.6 s (R = 5 / 5.2), two vcuda servers 2.8 s; 256 atoms skipped."""
    split = dict(t_clt=0.002, t_com=0.01)
    return [remd_case('RemdLocal %atoms=2048 %gpus=1 %kernel=fast', system, interval_time=5.0, gpu_seconds=5.0,
                      t_gpu=4.988, t_gpu0=4.988 / 14336, **split),
            remd_case('RemdLocal %atoms=2048 %gpus=2 %kernel=fast', system, interval_time=2.6, gpu_seconds=5.2,
                      t_gpu=2.588, t_gpu0=2.588 * 2 / 14336, **split),
            remd_case('RemdLocal %atoms=2048 %gpus=1 %kernel=faithful', system, interval_time=50.0, gpu_seconds=50.0,
                      t_gpu=49.9, t_gpu0=49.9 / 14336, **split),
            remd_case('RemdVcuda %atoms=2048 %servers=2', system, interval_time=2.8, gpu_seconds=5.6,
                      t_gpu=2.59, t_gpu0=2.59 * 2 / 14336, t_clt=0.002, t_com=0.208),
            tc('RemdLocal %atoms=256 %gpus=1 %kernel=fast', system=system, result='skip', reason='no GPU here')]


def test_remd_figures_and_table(tmp_path):
    cases = load(tmp_path, remd_cases())
    figs = {f['name']: f for f in figures.figures(cases, str(tmp_path))}
    for name in ('remd_efficiency.png', 'remd_split.png'):
        assert figs[name]['file'] == name and (tmp_path / name).stat().st_size > 1000, name
        assert 'no GPU here' in figs[name]['note']
    runs = figures._remd_runs(cases, 2048)
    assert sorted(runs) == [('h100box', 'local'), ('h100box', 'vcuda')]  # the faithful run is not mixed in
    assert figures._remd_efficiency(runs, 'h100box', 'local') == [(1, 1.0), (2, 5.0 / 5.2)]
    assert figures._remd_efficiency(runs, 'h100box', 'vcuda') == [(2, 5.0 / 5.6)]
    plain = remd_case('RemdVcuda %atoms=2048 %servers=2 %keepalive_ms=0', interval_time=3.0, gpu_seconds=6.0,
                      t_gpu=2.59, t_gpu0=1e-4, t_clt=0.002, t_com=0.4)
    runs0 = figures._remd_runs(load(tmp_path, remd_cases() + [plain]), 2048)
    assert figures._remd_efficiency(runs0, 'h100box', 'vcuda, no keep-alive') == [(2, 5.0 / 6.0)]

    table = figures.remd_table(cases)
    t256, t2048 = table['tables']
    assert t256['headers'] == ['n', 'P003 T0 ms', 'P003 R0', 'P003 T1 ms', 'P003 R1']  # nothing ran at 256
    rows = {r[0]: r for r in t2048['rows']}
    assert list(rows) == ['1', '2', '64', '256', '1024', '4096']
    assert rows['1024'][1:5] == ['543', '0.86', '540', '0.87']
    assert rows['2'][1:5] == ['-', '-', '-', '-']
    # the system's model: tGPU0 from its one-GPU run, P003's network: T(2) = 4.988/2 + ...
    p = figures._remd_fit(runs, 'h100box', 2048)
    assert abs(p.tGPU0 * 14336 - 4.988) < 1e-9 and p.tCLT == 0.002 and p.tlocal1 == 5.0
    assert rows['2'][5] == f'{figures.remd_model.T(p, 2) * 1e3:,.1f}'
    assert rows['2'][7:] == ['2,600.0', '0.962', '2,800.0', '0.893']
    assert rows['4096'][7:] == ['-', '-', '-', '-']


def test_remd_balance_model_drawn_from_the_profiled_run(tmp_path):
    """A one-GPU run with remd's profile records (--profile-segments) adds the balance
    model's curve; one without them does not."""
    records = [{'metric': 'blocks_per_sm', 'value': 1, 'unit': '1', 'sms': 132},
               {'metric': 'wave_time', 'value': 0.03, 'unit': 's', 'resident': 1}]
    records += [{'metric': 'ladder_segment_time', 'value': t, 'unit': 's', 'k_lo': s * 3584, 'k_hi': s * 3584 + 3583}
                for s, t in enumerate((0.861, 0.873, 0.897, 0.927))]
    cases_in = remd_cases()
    cases_in[0]['records_kept'] = records
    cases_in[0]['record_params'] = {'natom': 2048, 'nrep': 14336, 'mexch': 100, 'gpus': 1}
    cases = load(tmp_path, cases_in)
    runs = figures._remd_runs(cases, 2048)
    one = figures._remd_balance(runs, 'h100box')
    assert one is not None and one.t_gpu1 == 4.988 and one.sms == 132 and len(one.segments) == 4
    assert figures._remd_balance(figures._remd_runs(load(tmp_path, remd_cases()), 2048), 'h100box') is None
    figs = {f['name']: f for f in figures.figures(cases, str(tmp_path))}
    assert figs['remd_efficiency.png']['file'] == 'remd_efficiency.png'


def test_remd_without_runs_draws_the_paper_and_says_so(tmp_path):
    cases = load(tmp_path, [tc('RemdLocal %atoms=2048 %gpus=1 %kernel=fast', result='skip', reason='no GPU here')])
    figs = {f['name']: f for f in figures.figures(cases, str(tmp_path))}
    assert figs['remd_efficiency.png']['file'] == 'remd_efficiency.png'
    assert 'no passed RemdLocal/RemdVcuda runs' in figs['remd_efficiency.png']['note']
    assert 'no GPU here' in figs['remd_efficiency.png']['note']
    table = figures.remd_table(cases)
    assert [len(t['rows']) for t in table['tables']] == [5, 5] and 'no GPU here' in table['note']


def test_remd_model_takes_the_systems_vcuda_fit(tmp_path):
    fit = remd_case('RemdModelFit', BH_GBps=10.0, BD_GBps=10.0, LH_us=2.0, LD_us=3.0, LK_us=1.0, vcuda_fit=1)
    cases = load(tmp_path, remd_cases() + [fit])
    comm, source = figures._remd_comm(cases, 'h100box')
    assert source == 'vcuda fit' and comm['BH'] == 10.0e9 and abs(comm['LD'] - 3.0e-6) < 1e-15
    p = figures._remd_fit(figures._remd_runs(cases, 2048), 'h100box', 2048, cases)
    assert p.BH == 10.0e9 and p.tlocal1 == 5.0
    assert figures._remd_comm(cases, 'elsewhere')[1] == 'P003 network'
