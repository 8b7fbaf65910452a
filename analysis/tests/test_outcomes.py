"""Whose failure a case that measured nothing was, and what a far repeat does: every
skip reason the checks and programs can give is classified explicitly (not applicable
only where it says hardware or a feature is absent), real ReFrame reports of a refused
Slurm job, a failed build and ranks that never started are classified as ReFrame wrote
them, synthetic cases cover each failure rule both ways, and a repeat 3x from its
median makes a verdict inconclusive, never reproduced or not reproduced."""
import ast
import glob
import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from synth import V, judge, repeated, run_case, write_report  # noqa: E402

REPO = os.path.join(HERE, '..', '..')
REPORTS = os.path.join(HERE, 'reports')
NA, NR = V.NOT_APPLICABLE, V.NOT_RUN

# Every skip reason in reframe/*.py, reframe/lib/umstudy/checks.py (skip_unless,
# skip_with) and src/ (ums_unsupported, a program's exit 77): its template ({} where a
# value goes) -> (a real instance, the verdict, the group the report counts it under).
SKIPS = {
    'no GPU on this partition: {}': [
        ('no GPU on this partition: the CUDA driver reports no devices', NA, 'an NVIDIA GPU'),
        ('no GPU on this partition: none detected', NA, 'an NVIDIA GPU'),
        ('no GPU on this partition: no CUDA driver (libcuda.so.1: libcuda.so.1: cannot open shared object '
         'file: No such file or directory)', NA, 'an NVIDIA GPU'),
        # a driver that is there but fails is broken, not absent hardware
        ('no GPU on this partition: cuInit failed (no usable GPU or driver)', NR,
         'the CUDA driver failed to start (cuInit)')],
    'no CUDA toolchain on this partition': [('no CUDA toolchain on this partition', NA, 'the CUDA toolkit')],
    'no CUDA device ({})': [('no CUDA device (no CUDA-capable device is detected)', NA, 'an NVIDIA GPU')],
    'no CUDA device ({}){}': [
        ('no CUDA device (CUDA driver version is insufficient for CUDA runtime version) through vcuda: '
         'check VCUDA_SERVERS', NR, 'the CUDA runtime found no usable device (driver or runtime error)')],
    'no CUDA device available': [
        ('no CUDA device available', NR, 'the CUDA runtime found no usable device (driver or runtime error)')],
    'no CUDA device available ({})': [
        ('no CUDA device available (0 devices)', NA, 'an NVIDIA GPU'),
        ('no CUDA device available (CUDA driver version is insufficient for CUDA runtime version)', NR,
         'the CUDA runtime found no usable device (driver or runtime error)')],
    'no CUDA device available ({}); --cpu runs the CPU reference': [
        ('no CUDA device available (no CUDA-capable device is detected); --cpu runs the CPU reference', NA,
         'an NVIDIA GPU'),
        ('no CUDA device available (unknown error); --cpu runs the CPU reference', NR,
         'the CUDA runtime found no usable device (driver or runtime error)')],
    'the GPU reports no pageable memory access (no HMM/ATS), so system-allocated memory (plain malloc) '
    'cannot be used': [
        ('the GPU reports no pageable memory access (no HMM/ATS), so system-allocated memory (plain malloc) '
         'cannot be used', NA, 'pageable memory access (HMM or ATS)')],
    "the GPU reports cudaDevAttrPageableMemoryAccess=0 (no HMM/ATS), so it cannot use malloc'd memory: "
    '--alloc system is unsupported here': [
        ("the GPU reports cudaDevAttrPageableMemoryAccess=0 (no HMM/ATS), so it cannot use malloc'd memory: "
         '--alloc system is unsupported here', NA, 'pageable memory access (HMM or ATS)')],
    "{} reports cudaDevAttrPageableMemoryAccess=0 (no HMM/ATS): the GPU cannot dereference malloc'd memory, "
    'so --alloc system is unsupported on this device': [
        ("NVIDIA H100 80GB HBM3 reports cudaDevAttrPageableMemoryAccess=0 (no HMM/ATS): the GPU cannot "
         "dereference malloc'd memory, so --alloc system is unsupported on this device", NA,
         'pageable memory access (HMM or ATS)')],
    'no OpenACC compiler on this partition': [('no OpenACC compiler on this partition', NA, 'an OpenACC compiler')],
    'no OpenACC accelerator is available (the runtime would fall back to the host); --allow-host-fallback '
    'runs there anyway': [
        ('no OpenACC accelerator is available (the runtime would fall back to the host); --allow-host-fallback '
         'runs there anyway', NA, 'a GPU the OpenACC runtime can use')],
    'no OpenACC accelerator is available (the runtime would fall back to the host); UMB_ACC_ALLOW_HOST=1 '
    'runs there anyway': [
        ('no OpenACC accelerator is available (the runtime would fall back to the host); UMB_ACC_ALLOW_HOST=1 '
         'runs there anyway', NA, 'a GPU the OpenACC runtime can use')],
    'no MPI on this partition': [('no MPI on this partition', NA, 'MPI')],
    'this case needs {} GPUs; the partition has {}': [
        ('this case needs 4 GPUs; the partition has 1', NA, 'several GPUs in one node')],
    '--gpus {} asked for, {} present': [('--gpus 2 asked for, 1 present', NA, 'several GPUs in one node')],
    '{} ranks on {} cores of one machine would say nothing': [
        ('32 ranks on 2 cores of one machine would say nothing', NA, 'more cores or several nodes')],
    "P003's layout needs a client node plus server nodes; every job of this partition runs on one node "
    "(RemdVcuda runs the servers on the client's node)": [
        ("P003's layout needs a client node plus server nodes; every job of this partition runs on one node "
         "(RemdVcuda runs the servers on the client's node)", NA, 'several GPU nodes')],
    # not applicable never: the build, the size, a site's setup, a resource that is busy
    'component(s) {} not in this build (UMSTUDY_COMPONENTS={})': [
        ('component(s) himeno not in this build (UMSTUDY_COMPONENTS=dlm)', NR,
         'left out of this build (UMSTUDY_COMPONENTS)')],
    'XMPC_BACKEND={}: backend not built (this build has: {})': [
        ('XMPC_BACKEND=gasnet: backend not built (this build has: mpi3 armci)', NR, 'not built here')],
    "XMPC_BACKEND={}: backend not built (this build has: {}; the build's 'umstudy: xmpc-{}' line says why)": [
        ("XMPC_BACKEND=gasnet: backend not built (this build has: mpi3, armci; the build's 'umstudy: "
         "xmpc-gasnet' line says why)", NR, 'not built here')],
    'no umb-{}-acc-* binary was built (see the CMake report)': [
        ('no umb-modes-acc-* binary was built (see the CMake report)', NR, 'not built here')],
    'umb-halo-acc-{} was not built (see the CMake report: only NVHPC builds the managed and both modes)': [
        ('umb-halo-acc-managed was not built (see the CMake report: only NVHPC builds the managed and both '
         'modes)', NR, 'not built here')],
    'no {} at {}: src/vcuda was not built': [
        ('no vcuda-run at /x/build/vcuda/vcuda-run: src/vcuda was not built', NR, 'not built here')],
    'the vcuda libcudart stand-in was not built (it needs the CUDA toolkit)': [
        ('the vcuda libcudart stand-in was not built (it needs the CUDA toolkit)', NR, 'not built here')],
    'this remd was built without CUDA (UMSTUDY_CUDA=OFF or no nvcc); --cpu runs the CPU reference': [
        ('this remd was built without CUDA (UMSTUDY_CUDA=OFF or no nvcc); --cpu runs the CPU reference', NR,
         'not built here')],
    'at quick size 2,048 atoms runs only the judged configuration (fast kernel, 2 ms keep-alive); this one '
    'runs at 256 atoms and at paper size': [
        ('at quick size 2,048 atoms runs only the judged configuration (fast kernel, 2 ms keep-alive); this one '
         'runs at 256 atoms and at paper size', NR, 'paper size only')],
    'the polling-server variant explains, is not judged: it runs at paper size': [
        ('the polling-server variant explains, is not judged: it runs at paper size', NR, 'paper size only')],
    "transport={}: 'tcp' or 'ucx'": [("transport='ib': 'tcp' or 'ucx'", NR, "transport='ib': 'tcp' or 'ucx'")],
    "vcuda-launch starts servers on other nodes through {}; this partition's launcher is {}": [
        ("vcuda-launch starts servers on other nodes through srun, mpirun; this partition's launcher is local", NR,
         "vcuda-launch starts servers on other nodes through srun, mpirun; this partition's launcher is local")],
    '{} needs {} GiB of GPU memory but {} GiB are free': [
        ('the 8.0 GiB arrays needs 16.0 GiB of GPU memory but 10.2 GiB are free', NR, 'not enough free memory')],
    '{} needs {} GiB of accelerator memory but {} GiB are free': [
        ('the array needs 16.0 GiB of accelerator memory but 10.2 GiB are free', NR, 'not enough free memory')],
    '{}x{}x{} needs {} GiB on the GPU but only {} GiB are free': [
        ('1025x513x513 needs 6.9 GiB on the GPU but only 2.0 GiB are free', NR, 'not enough free memory')],
    'cudaMallocHost({} GiB) failed': [('cudaMallocHost(8.0 GiB) failed', NR, 'not enough free memory')],
    'cudaMallocManaged({} GiB) failed': [('cudaMallocManaged(8.0 GiB) failed', NR, 'not enough free memory')],
    'malloc({} GiB) failed': [('malloc(8.0 GiB) failed', NR, 'not enough free memory')],
    'cannot allocate the {} GiB array': [('cannot allocate the 8.0 GiB array', NR, 'not enough free memory')],
    'program reported unsupported (exit 77)': [
        ('program reported unsupported (exit 77)', NR, 'program reported unsupported (exit 77)')],
}


def _template(node):
    """The message templates of a skip call's argument ({} where a value goes)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [''.join(v.value if isinstance(v, ast.Constant) else '{}' for v in node.values)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [a + b for a in _template(node.left) for b in _template(node.right)]
    if isinstance(node, ast.IfExp):
        return _template(node.body) + _template(node.orelse)
    return ['{}']


def skip_templates():
    out = set()
    for path in glob.glob(os.path.join(REPO, 'reframe', '*.py')) + [
            os.path.join(REPO, 'reframe', 'lib', 'umstudy', 'checks.py')]:
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, 'attr', getattr(node.func, 'id', ''))
                if name == 'skip_unless' and len(node.args) >= 2:
                    out.update(_template(node.args[1]))
                elif name == 'skip_with' and node.args:
                    out.update(_template(node.args[0]))
    for ext in ('c', 'cu', 'cpp'):
        for path in glob.glob(os.path.join(REPO, 'src', '**', f'*.{ext}'), recursive=True):
            text = open(path, errors='replace').read()
            for m in re.finditer(r'ums_unsupported\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', text):
                fmt = ''.join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
                out.add(re.sub(r'%[-+ #0]*\d*(?:\.\d+)?(?:ll|l|z|h)?[sdifgeuxc]', '{}', fmt))
    return out - {'{}'}   # a reason passed through (the program's own, or a retired system's)


def test_every_skip_reason_in_the_code_is_classified_explicitly():
    found = skip_templates()
    assert found, 'no skip reasons found: the scan is broken'
    unlisted = sorted(found - set(SKIPS))
    assert not unlisted, f'skip reasons without an explicit classification in SKIPS: {unlisted}'
    stale = sorted(set(SKIPS) - found - {'program reported unsupported (exit 77)'})
    assert not stale, f'SKIPS lists reasons the code no longer gives: {stale}'


@pytest.mark.parametrize('template', sorted(SKIPS))
def test_skip_reason_classification(template):
    pattern = '^' + '.+'.join(re.escape(p) for p in template.split('{}')) + '$'
    for example, verdict, group in SKIPS[template]:
        assert re.match(pattern, example), (template, example)
        why = V.classify_skip(example)
        assert (why.verdict, why.group) == (verdict, group), example
        assert why.reason == example


def test_a_raw_driver_error_is_never_not_applicable(tmp_path):
    """The same claim, the same check: absent hardware is not applicable, a failing
    driver is not run with its error in the row."""
    absent = run_case('HimenoVerify %variant=cuda-explicit', result='skip',
                      reason='no CUDA device available (no CUDA-capable device is detected)')
    broken = run_case('HimenoVerify %variant=cuda-explicit', result='skip',
                      reason='no CUDA device available (CUDA driver version is insufficient for CUDA runtime version)')
    assert judge(tmp_path, [absent])['HIM-T3-explicit']['verdict'] == NA
    row = judge(tmp_path, [broken])['HIM-T3-explicit']
    assert row['verdict'] == NR and 'insufficient' in row['reason'] and row['group']


# ---- real run reports ---------------------------------------------------------------

def report(name):
    return os.path.join(REPORTS, name)


def test_a_slurm_that_does_not_answer_is_not_run_never_not_reproduced():
    cases = V.load_cases([report('slurm-unreachable.json.gz')])
    refused = [c for c in cases if c['status'] == V.NOT_RUN]
    assert len(refused) == 7, [(c['name'], c['status']) for c in cases]
    for c in refused:
        assert c['reason'] == 'not submitted: sbatch: fatal: Could not establish a configuration source', c
        assert c['group'] == 'scheduler error: sbatch: fatal: Could not establish a configuration source'
    rows = V.verdicts(cases)
    assert not [r for r in rows if r['verdict'] in (V.NOT_REPRODUCED, V.FAILED)]
    p004 = next(r for r in rows if r['id'] == 'P004-C1')
    assert p004['verdict'] == NR and 'sbatch: fatal: Could not establish a configuration source' in p004['reason']


def test_a_refused_run_never_hides_an_earlier_measurement(tmp_path):
    earlier = (repeated('DlmMicro %engine=r58', {'time_t1': [27.5, 27.0, 28.0]}, system='slurm', features=['mpi'],
                        facts={}) +
               repeated('DlmMicro %engine=r3', {'time_t1': 10.0}, system='slurm', features=['mpi'], facts={}))
    measured = write_report(tmp_path / 'earlier.json', [dict(tc, partition='default') for tc in earlier])
    later = report('slurm-unreachable.json.gz')
    rows = {r['id']: r for r in V.verdicts(V.load_cases([measured, later]), ['slurm'])}
    assert rows['P004-C1']['verdict'] == V.REPRODUCED
    case = next(c for c in V.load_cases([measured, later]) if c['name'] == 'DlmMicro %engine=r58')
    assert case['status'] == V.MEASURED and case['later'][0]['status'] == NR
    assert 'sbatch: fatal' in case['later'][0]['reason']
    # and the other way round: the measurement after the refused run replaces it
    rows = {r['id']: r for r in V.verdicts(V.load_cases([later, measured]), ['slurm'])}
    assert rows['P004-C1']['verdict'] == V.REPRODUCED


def test_a_failed_build_fails_the_checks_that_need_it():
    (case,) = V.load_cases([report('build-failed.json.gz')])
    assert case['check'] == 'HimenoCpuPerf' and case['status'] == V.FAILED
    assert case['group'] == 'build failed'
    assert case['reason'].startswith('UmstudyBuild (the build) failed: build error: build job failed')


def test_ranks_that_never_started_are_not_run():
    cases = {c['name']: c for c in V.load_cases([report('ranks-not-started.json.gz')])}
    for name in ('CabPingPong %backend=mpi3', 'CabPingPong %backend=armci'):
        c = cases[name]
        assert c['status'] == NR and c['group'] == 'ranks not started (the launcher failed)', c
        assert c['reason'] == 'no rank started (launcher exit 1; 1 node(s) x 2 asked for)'
    assert cases['CabPingPong %backend=gasnet']['status'] == V.SKIPPED


# ---- each failure rule, both ways (synthetic cases as ReFrame writes them) -----------------

def failed(name='HimenoVerify %variant=cuda-explicit', **fields):
    tc = run_case(name, result='fail', reason=fields.pop('reason', 'sanity error: exit code 1, expected 0'),
                  fail_phase=fields.pop('fail_phase', 'sanity'))
    tc.update(fields)
    return tc


CLASSIFIED = [
    # the artifact's own failures
    (failed(job_exitcode=139), V.FAILED, 'crashed (SIGSEGV)'),
    (failed(job_exitcode=134), V.FAILED, 'crashed (SIGABRT)'),
    (failed(job_exitcode=1), V.FAILED, 'failed its sanity or verification check'),
    (failed(reason='sanity error: the program reported an error or a mismatch', job_exitcode=0), V.FAILED,
     'failed its sanity or verification check'),
    (failed(reason='build error: build job failed with exit code: 2', fail_phase='compile'), V.FAILED,
     'build failed'),
    (failed(reason="KeyError: 'facts'", fail_phase='setup'), V.FAILED, 'the check failed (setup)'),
    # the infrastructure's
    (failed(job_exitcode=137), NR, 'killed from outside (SIGKILL: time limit, memory or a person)'),
    (failed(job_exitcode=143), NR, 'killed from outside (SIGTERM: time limit, memory or a person)'),
    (failed(reason='job timed out (601.2s > 600.0s)', fail_phase='run_wait'), NR, 'time limit'),
    (failed(reason="spawned process error: command 'qsub rfm_job.sh' failed with exit code 1:\n--- stderr ---\n"
                   'qsub: error: unknown queue gpu-q', fail_phase='run'), NR,
     'scheduler error: qsub: error: unknown queue gpu-q'),
    (failed(reason='could not retrieve the job id of the submitted job', fail_phase='run',
            fail_info={'exc_type': 'JobSchedulerError', 'exc_value': 'could not retrieve the job id'}), NR,
     'scheduler error: could not retrieve the job id of the submitted job'),
    (failed(job_exitcode=1, layout={'nodes': 2, 'per_node': 1}, rank_hosts=[]), NR,
     'ranks not started (the launcher failed)'),
    (failed(job_exitcode=127), NR, 'program missing or not executable'),
    (run_case('HimenoVerify %variant=cuda-explicit', result='abort', reason='aborted due to KeyboardInterrupt'), NR,
     'aborted (the run was stopped)'),
    (failed(placement_failure='ranks on 1 distinct node(s), the layout needs 2'), NR,
     'placement failure (ranks on another layout than the experiment needs)'),
]


@pytest.mark.parametrize('tc,verdict,group', CLASSIFIED, ids=[g for _, _, g in CLASSIFIED])
def test_failure_classification(tmp_path, tc, verdict, group):
    (case,) = V.load_cases([write_report(tmp_path / 'r.json', [tc])])
    assert (case['status'], case['group']) == (verdict, group), case
    row = {r['id']: r for r in V.verdicts([case], ['miyabi'])}['HIM-T3-explicit']
    assert row['verdict'] == verdict and row['reason'] and row['group'] == group


def test_a_crash_is_failed_and_never_hides_an_earlier_measurement(tmp_path):
    ok = run_case('HimenoVerify %variant=cuda-explicit', perf={'gosa_rel_err': 0.0, 'p_max_abs_diff': 0.0})
    crash = failed(job_exitcode=139)
    rows = judge(tmp_path, [crash])
    assert rows['HIM-T3-explicit']['verdict'] == V.FAILED
    assert 'the program crashed: exit 139 (SIGSEGV)' in rows['HIM-T3-explicit']['reason']
    first, then = write_report(tmp_path / 'a.json', [ok]), write_report(tmp_path / 'b.json', [crash])
    rows = {r['id']: r for r in V.verdicts(V.load_cases([first, then]), ['miyabi'])}
    assert rows['HIM-T3-explicit']['verdict'] == V.REPRODUCED
    # a crash in one repeat of three: the case failed, whatever the others measured
    rep = [dict(ok, name=f"{ok['name']} %.repeat_no={i}") for i in range(2)] + [
        dict(crash, name=f"{crash['name']} %.repeat_no=2")]
    (case,) = V.load_cases([write_report(tmp_path / 'c.json', rep)])
    assert case['status'] == V.FAILED and case['measured_repeats'] == 2
    assert '1 of 3 repeats measured nothing' in case['reason']


def test_a_missed_reference_is_a_measurement_not_a_failure(tmp_path):
    tc = run_case('CabPingPong %backend=mpi3', result='fail', fail_phase='performance',
                  reason='performance error: failed to meet reference(s): put_lat8_over_raw=4.04 ratio, '
                         'expected 1.2 (l=-inf, u=1.2)', perf={'put_lat8_over_raw': 4.04})
    (case,) = V.load_cases([write_report(tmp_path / 'r.json', [tc])])
    assert case['status'] == V.MEASURED and case['missed'] == ['put_lat8_over_raw=4.04 ratio, expected 1.2 '
                                                                '(l=-inf, u=1.2)']


def test_a_repeat_that_did_not_run_leaves_the_others_measured(tmp_path):
    tcs = repeated('DlmMicro %engine=r58', {'time_t1': 27.5}, n=3)
    tcs[2] = dict(failed('DlmMicro %engine=r58 %.repeat_no=2', job_exitcode=143), perfvalues={})
    (case,) = V.load_cases([write_report(tmp_path / 'r.json', tcs)])
    assert case['status'] == V.MEASURED and case['measured_repeats'] == 2
    assert '1 of 3 repeats measured nothing: exit 143 (SIGTERM)' in case['reason']


# ---- far repeats ------------------------------------------------------------------------

def p004_c1(tmp_path, r58, r3):
    return judge(tmp_path, repeated('DlmMicro %engine=r58', {'time_t1': r58}) +
                 repeated('DlmMicro %engine=r3', {'time_t1': r3}))['P004-C1']


def test_a_repeat_3x_from_the_median_makes_a_verdict_inconclusive(tmp_path):
    # every ratio is the paper's 2.75, but one repeat of each case ran 4x slower
    row = p004_c1(tmp_path, [27.5, 27.5, 110.0], [10.0, 10.0, 40.0])
    assert row['verdict'] == V.INCONCLUSIVE, row
    assert 'DlmMicro engine=r3 time_t1: a repeat at 40 against a median of 10 (more than 3x apart)' in row['reason']
    assert row['outliers'] and row['parts']['None']['outliers']
    # 2x apart is a spread, not an outlier: judged
    assert p004_c1(tmp_path, [27.5, 27.5, 55.0], [10.0, 10.0, 20.0])['verdict'] == V.REPRODUCED


def test_an_outlier_never_makes_not_reproduced(tmp_path):
    assert p004_c1(tmp_path, [10.0, 10.0, 12.0], [10.0, 10.0, 10.0])['verdict'] == V.NOT_REPRODUCED
    row = p004_c1(tmp_path, [10.0, 10.0, 40.0], [10.0, 10.0, 40.0])   # ratio 1 every time, far repeats
    assert row['verdict'] == V.INCONCLUSIVE and 'more than 3x' in row['reason']


def test_outliers_of_the_values_themselves():
    assert V.outliers([1890, 2057, 1.78]) == [1.78]
    assert V.outliers([23.68, 400.0, 4349.0]) == [23.68, 4349.0]
    assert V.outliers([10, 20, 29]) == []
    assert V.outliers([-1.0, 1.0, 5.0]) == []   # signed: no factor to speak of
    assert V.outliers([5.0]) == []


def test_the_case_table_flags_a_far_repeat(tmp_path):
    tcs = repeated('DlmStencil %engine=r3', {'mflops_in_memory': [1890.0, 2057.0, 1.78]})
    (case,) = V.load_cases([write_report(tmp_path / 'r.json', tcs)])
    assert case['outliers'] == {'mflops_in_memory': [1.78]}


def test_a_skipped_build_skips_its_checks_with_the_builds_reason(tmp_path):
    build = {'name': 'UmstudyBuild ~miyabi:gpu+gnu', 'unique_name': 'UmstudyBuild_1', 'fixture': True,
             'system': 'miyabi', 'partition': 'gpu', 'result': 'skip',
             'skip_reason': 'TSUBAME2.5 was retired in 2017 and its CUDA 5.0 cannot build these sources'}
    tc = dict(run_case('HimenoVerify %variant=cuda-explicit', result='skip'),
              dependencies_actual=[['UmstudyBuild_1', 'miyabi:gpu', 'gnu']])
    (case,) = V.load_cases([write_report(tmp_path / 'r.json', [build, tc])])
    assert case['status'] == V.SKIPPED and case['verdict'] == NR and case['group'] == 'the system is retired'
    assert case['reason'].startswith('UmstudyBuild (the build) was skipped: TSUBAME2.5 was retired')
    # a skip with no reason and no fixture to explain it says so
    (case,) = V.load_cases([write_report(tmp_path / 's.json', [run_case('HimenoVerify %variant=cpu',
                                                                        result='skip')])])
    assert case['status'] == V.SKIPPED and case['reason'] == 'skipped, no reason recorded'
