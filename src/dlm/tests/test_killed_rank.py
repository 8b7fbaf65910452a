"""A memory rank killed (or stopped) mid-run: rank 0 must notice within its deadline,
name the rank, and exit non-zero; no hang.

    test_killed_rank.py {KILL|STOP} LAUNCHER... -- PROGRAM ARGS...

Starts the program (which must page for a few seconds), waits until it is paging,
sends SIGKILL (dead) or SIGSTOP (hung) to the process whose launcher rank variable
says 1 (Open MPI: OMPI_COMM_WORLD_RANK, MPICH/PMIx: PMI_RANK/PMIX_RANK), and checks
that rank 0 ends with a non-zero status within DLM_TIMEOUT + 30 s and that stderr
names "memory rank 1".

Open MPI's launcher tears the job down by itself when a rank dies, which would hide
DLM's own detection, so KILL runs need a launcher told to survive dead ranks (Open
MPI: --enable-recovery).  That launcher then exits 0 whatever the ranks did, so each
rank runs under a shell that reports its own exit status on stderr, and rank 0's
report is what is judged.  STOP runs use the plain launcher and its exit status."""
import os
import re
import signal
import subprocess
import sys
import time

RANK_VARS = (b'OMPI_COMM_WORLD_RANK', b'PMI_RANK', b'PMIX_RANK')


def descendants(pid):
    children = {}
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                with open(f'/proc/{d}/stat') as f:
                    ppid = int(f.read().rsplit(')', 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def rank_of(pid):
    try:
        with open(f'/proc/{pid}/environ', 'rb') as f:
            env = dict(kv.split(b'=', 1) for kv in f.read().split(b'\0') if b'=' in kv)
    except OSError:
        return None
    for var in RANK_VARS:
        if var in env:
            return int(env[var])
    return None


WRAP = '"$0" "$@"; s=$?; echo "dlm-test: rank ${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-?}} exit status $s" >&2; exit $s'


def main():
    sig = {'KILL': signal.SIGKILL, 'STOP': signal.SIGSTOP}[sys.argv[1]]
    argv = sys.argv[2:]
    launcher, prog = argv[:argv.index('--')], argv[argv.index('--') + 1:]
    argv = launcher + (['sh', '-c', WRAP] if sig == signal.SIGKILL else []) + prog
    timeout = float(os.environ.get('DLM_TIMEOUT', '30'))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # The rank's process and the shell around it, if any.  The shell appears first and
    # runs the program as its child only later (seconds on a loaded machine): killing
    # the shell alone would leave the memory rank serving and the run looking hung, so
    # wait until the program itself carries rank 1, and collect again just before the kill.
    def rank1():
        return [p for p in descendants(proc.pid) if rank_of(p) == 1]

    def is_program(pid):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                arg0 = f.read().split(b'\0')[0].decode(errors='replace')
        except OSError:
            return False
        return os.path.basename(arg0) == os.path.basename(prog[0])

    victims = []
    deadline = time.time() + 30
    while not any(is_program(v) for v in victims) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
        victims = rank1()
    if not any(is_program(v) for v in victims):
        proc.kill()
        out, err = proc.communicate()
        print('FAIL: no program process with rank 1 appeared (launcher variables:', RANK_VARS, ')', err[-2000:])
        return 1
    time.sleep(1.5)  # paging by now, unless start-up is slow (then the kill tests start-up)
    if proc.poll() == 77:
        out, err = proc.communicate()
        print('skipped: the engine cannot run here (exit 77):', err.strip()[-500:])
        return 77
    if proc.poll() is not None:
        print('FAIL: the program ended before the memory rank could be killed; make it run longer')
        return 1
    victims = rank1() or victims
    t0 = time.time()
    for v in victims:
        try:
            os.kill(v, sig)
        except ProcessLookupError:
            pass
    try:
        out, err = proc.communicate(timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        for v in victims:
            try:
                os.kill(v, signal.SIGKILL)
            except ProcessLookupError:  # the killed rank itself, already gone
                pass
        print(f'FAIL: still running {timeout + 30:.0f} s after the memory rank was killed (a hang)')
        print(err[-3000:])
        return 1
    took = time.time() - t0
    sys.stdout.write(out)
    sys.stderr.write(err)
    failures = []
    status = proc.returncode
    if sig == signal.SIGKILL:
        m = re.search(r'dlm-test: rank 0 exit status (\d+)', err)
        status = int(m.group(1)) if m else None
        if status is None:
            failures.append('rank 0 did not report its exit status')
    if status == 0:
        failures.append('exit status 0 after a memory rank died')
    if not re.search(r'memory rank 1\b', err):
        failures.append('stderr does not name "memory rank 1"')
    for f in failures:
        print('FAIL:', f)
    print(f'SIG{sys.argv[1]} to rank 1 (pids {victims}); the program ended {took:.1f} s later, rank 0 status {status}')
    for v in victims:
        try:
            os.kill(v, signal.SIGKILL)  # a stopped rank the launcher left behind
        except ProcessLookupError:
            pass
    return 1 if failures else 0


sys.exit(main())
