#!/usr/bin/env python3
"""vcuda-launch through a real scheduler: a single-host Slurm (.ci/slurm-local.sh:
munged, slurmctld, slurmd under a temporary directory) runs a batch job, and inside it
vcuda-launch starts its tasks through the launcher named, as on a site:

    test_launch_slurm.py CASE --launch SCRIPT --server EXE --fake-driver DIR --lib DIR
                              --net-test EXE --slurm-local SCRIPT

CASE is srun_tcp, srun_ucx, mpirun_tcp or mpirun_ucx: `srun` (a Slurm site) or `mpirun`
inside the Slurm job (Open MPI under Slurm, as sites that launch with mpirun run it),
over TCP or UCX; srun_tcp also runs --remote-only with the client on a "node" of its own
(a UTS namespace with another host name; skipped, saying so, where unshare is refused).  Three tasks on the one host stand in for three nodes; each starts the
real vcuda-server on a CPU stand-in driver (fake_libcuda.c) on its own address (no
--bind: every task resolves it where it runs).  The client, through the libcudart
stand-in, sees three devices and round-trips a distinct 1 MiB pattern through each
(cudaMalloc, cudaMemcpy both ways, cudaFree); every server's log shows one
authenticated client; the job's token never leaves the run directory (a stale
VCUDA_TOKEN in the submitting environment is not used) and is gone afterwards.

Skips (77) with the reason where Slurm cannot start (not root, packages missing), where
the case's launcher is missing, or, for *_ucx, where this vcuda has no UCX.  With CI set,
a Slurm that cannot start fails instead: CI must run these.
"""
import argparse, json, os, re, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_launch import expect, have_ucx, write  # noqa: E402

TASKS = 3

CLIENT = """
import ctypes, json, os, stat
rt = ctypes.CDLL("libcudart.so.13")
n = ctypes.c_int(-1)
err = rt.cudaGetDeviceCount(ctypes.byref(n))
size = 1 << 20
out = []
for d in range(n.value):
    p = ctypes.c_void_p()
    src = (ctypes.c_ubyte * size).from_buffer_copy(bytes((d * 7 + i) & 0xff for i in range(256)) * (size // 256))
    dst = (ctypes.c_ubyte * size)()
    rc = [rt.cudaSetDevice(d), rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)),
          rt.cudaMemcpy(p, src, ctypes.c_size_t(size), 1), rt.cudaMemcpy(dst, p, ctypes.c_size_t(size), 2),
          rt.cudaFree(p)]
    out.append({"device": d, "rc": rc, "same": bytes(src) == bytes(dst)})
mode = stat.S_IMODE(os.stat(os.environ["VCUDA_TOKEN_FILE"]).st_mode)
print(json.dumps({"devices": n.value, "error": err, "token_mode": f"{mode:o}", "results": out}))
"""


def skip(why):
    print(f"skipped: {why}")
    return 77


def start_slurm(a, d):
    """SLURM_CONF of a started single-host Slurm, or the reason it cannot start."""
    if not os.path.exists(a.slurm_local):
        return None, f"no {a.slurm_local} (a source tree without .ci/)"
    r = subprocess.run([a.slurm_local, "start", d], capture_output=True, text=True, timeout=180)
    if r.returncode == 3:
        return None, r.stderr.strip().splitlines()[-1]
    if r.returncode != 0:
        raise SystemExit(f"slurm-local start failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return os.path.join(d, "slurm.conf"), None


def sbatch(script, workdir, env, timeout=120):
    """Submits, waits for the job to leave the queue; (state, exit code, output)."""
    r = subprocess.run(["sbatch", "--parsable", "-N1", f"-n{TASKS}", f"--chdir={workdir}",
                        f"--output={workdir}/job.out", script], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise SystemExit(f"sbatch failed: {r.stderr}")
    job = r.stdout.strip().split(";")[0]
    print(f"sbatch job id {job}")
    deadline = time.monotonic() + timeout
    while subprocess.run(["squeue", "-h", "-j", job], env=env, capture_output=True, text=True).stdout.strip():
        if time.monotonic() > deadline:
            subprocess.run(["scancel", job], env=env)
            break
        time.sleep(0.2)
    info = subprocess.run(["scontrol", "show", "job", "-o", job], env=env, capture_output=True, text=True).stdout
    state = re.search(r"JobState=(\S+)", info)
    code = re.search(r"\bExitCode=(\d+):(\d+)", info)
    out_path = os.path.join(workdir, "job.out")
    output = open(out_path).read() if os.path.exists(out_path) else ""
    return (state.group(1) if state else "?"), (code.group(0) if code else "?"), output


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["srun_tcp", "srun_ucx", "mpirun_tcp", "mpirun_ucx"])
    for opt in ("--launch", "--server", "--fake-driver", "--lib", "--net-test", "--slurm-local"):
        ap.add_argument(opt, required=True)
    a = ap.parse_args()
    for k in ("launch", "server", "fake_driver", "lib", "net_test", "slurm_local"):
        setattr(a, k, os.path.abspath(getattr(a, k)))   # the job runs elsewhere
    launcher, transport = a.case.split("_")
    if launcher == "mpirun":
        if not shutil.which("mpirun"):
            return skip("no mpirun")
        if "Open MPI" not in subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout:
            return skip("mpirun is not Open MPI's (its Slurm integration is what this case runs)")
    if transport == "ucx" and not have_ucx(argparse.Namespace(net_test=a.net_test)):
        return skip("this vcuda was built without UCX")
    with tempfile.TemporaryDirectory(prefix="vcuda-slurm-") as w:
        os.chmod(w, 0o755)
        conf, why = start_slurm(a, os.path.join(w, "slurm"))
        if why:
            if os.environ.get("CI"):
                print(f"FAIL: CI must run this test: {why}")
                return 1
            return skip(why)
        try:
            fails = run_job(a, w, conf, launcher, transport, "all-nodes")
            if a.case == "srun_tcp":
                fails += remote_only(a, w, conf)
            return 1 if fails else 0
        finally:
            subprocess.run([a.slurm_local, "stop", os.path.join(w, "slurm")], timeout=120)


def remote_only(a, w, conf):
    """--remote-only with the client on a node of its own: vcuda-launch runs in a UTS
    namespace named like another host, so the srun tasks (started by slurmd, outside it)
    are on "other nodes" and all serve (on one host, where the tasks share the client's
    name, none does: test_launch.py remote_only)."""
    probe = subprocess.run(["unshare", "--uts", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"skipped: --remote-only with a client node of its own: unshare --uts: {probe.stderr.strip()}")
        return 0
    wrap = ["unshare", "--uts", "sh", "-c", 'hostname vcuda-client-node && exec "$@"', "sh"]
    return run_job(a, w, conf, "srun", "tcp", "remote-only", ["--remote-only"], wrap)


def run_job(a, w, conf, launcher, transport, name, extra=(), wrap=()):
    """One batch job in w/<name>: vcuda-launch [extra] around the client; the count of failed checks."""
    w = os.path.join(w, name)
    os.mkdir(w)
    print(f"== {name}")
    # the real server on the CPU stand-in driver
    server = write(os.path.join(w, "vcuda-server"),
                   f"#!/bin/sh\nLD_LIBRARY_PATH='{a.fake_driver}' exec '{a.server}' \"$@\"\n", 0o755)
    client = write(os.path.join(w, "client.py"), CLIENT)
    cmd = [*wrap, a.launch, "--launcher", launcher, "--ranks-per-node", str(TASKS), "--gpus-per-node", "1",
           "--server", server, "--lib", a.lib, "--start-timeout", "60", "--keep", *extra]
    cmd += ["--ucx"] if transport == "ucx" else []
    cmd += ["--", sys.executable, client]
    script = write(os.path.join(w, "job.sh"), "#!/bin/bash\n" + " ".join(f"'{c}'" for c in cmd) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VCUDA_", "SLURM_"))}
    env.update(SLURM_CONF=conf, VCUDA_LAUNCH_DIR=w, VCUDA_TOKEN="a-stale-token-from-the-caller",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    state, code, out = sbatch(script, w, env)
    print(f"job: {state} {code}\n{out}")
    fails = expect(state == "COMPLETED" and code == "ExitCode=0:0", f"the {launcher} job completed, exit 0")
    # the client's line; vcuda-launch's placement lines (one per task) come before it
    line = next((x for x in out.splitlines() if x.startswith("{") and '"placement"' not in x), "{}")
    rec = json.loads(line)
    hosts = [json.loads(x) for x in out.splitlines() if x.startswith('{"bench":"placement"')]
    fails += expect(sorted(h["rank"] for h in hosts) == list(range(TASKS)),
                    f"vcuda-launch says where each of its {TASKS} tasks ran")
    ok = rec.get("devices") == TASKS and rec.get("error") == 0 and rec.get("token_mode") == "600" and \
        len(rec.get("results", [])) == TASKS and \
        all(r["same"] and r["rc"] == [0] * 5 for r in rec["results"])
    fails += expect(ok, f"the client round-trips 1 MiB through each of {TASKS} servers, token file 0600")
    eps = re.search(r"vcuda-launch: (\d+) server\(s\) on 1 node\(s\) via (\w+): (\S+)", out)
    fails += expect(eps and eps.group(1) == str(TASKS) and eps.group(2) == launcher and
                    all(e.startswith("ucx://") == (transport == "ucx") for e in eps.group(3).split(",")),
                    f"{TASKS} {transport.upper()} endpoints collected from the {launcher} tasks")
    kept = [os.path.join(w, d) for d in os.listdir(w) if d.startswith(".vcuda-launch")]
    logs = [open(os.path.join(k, f)).read() for k in kept for f in sorted(os.listdir(k)) if f.startswith("server.")]
    fails += expect(len(logs) == TASKS and all(x.count("authenticated") == 1 for x in logs),
                    "each server log: one authenticated client")
    fails += expect(kept and not any(os.path.exists(os.path.join(k, "token")) for k in kept),
                    "the token is gone from the kept run directory")
    return fails


if __name__ == "__main__":
    sys.exit(main())
