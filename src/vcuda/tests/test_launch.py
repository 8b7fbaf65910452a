#!/usr/bin/env python3
"""vcuda-launch on one host with several tasks standing in for nodes (CPU only: a test
server with vcuda-server's command line stands in for it, so no GPU is needed).
srun, and mpirun inside a Slurm job, with the real server: test_launch_slurm.py.

    test_launch.py CASE --launch SCRIPT --net-test EXE --lib DIR

The caller's environment holds a stale VCUDA_TOKEN, which must not reach the program
or the servers.  Every case runs a program through the libcudart stand-in that prints
cudaGetDeviceCount: the client opens only servers that answered HELLO (with the token
vcuda-launch made and handed to the tasks) and PING, so the count is the number of
servers the tasks started and reported; the cases that run it also read one placement
line per task on stdout (task order, this host), and check that the program has the
stand-ins' directory (the refusing libcuda.so.1) first on LD_LIBRARY_PATH and that no
server was given it.

local       3 tasks started by vcuda-launch itself, TCP: 3 devices; the run directory
            (holding the token) is gone afterwards
local_ucx   the same over UCX (skipped where vcuda was built without UCX)
mpirun      mpirun, 1 "node" x 3 tasks x 2 servers: 6 devices (skipped without mpirun)
no_server   servers that cannot start: each named, exit 77, the program not run
iface       --iface lo: every task listens on that interface's address (127.0.0.1), 2
            devices; --iface on an interface that does not exist: each task says so, exit 77
remote_only --remote-only with every task on the client's host (this one): no server
            starts there, exit 77 saying so (servers on the other nodes need other hosts)
netns       vcuda-netns: the client in a network namespace of its own, 2 "nodes" each a
            namespace with its own hostname and address, the links shaped with tbf: 2
            devices, placement lines naming the nodes' hostnames, endpoints on the
            namespaces' subnet; afterwards no namespace, veth or bridge is left (root
            and iproute2 needed; skipped saying so otherwise); a bad --nodes is refused
"""
import argparse, json, os, re, shutil, socket, stat, subprocess, sys, tempfile

COUNT = """
import ctypes, os, stat
rt = ctypes.CDLL("libcudart.so.13")
n = ctypes.c_int(-1)
e = rt.cudaGetDeviceCount(ctypes.byref(n))
mode = stat.S_IMODE(os.stat(os.environ["VCUDA_TOKEN_FILE"]).st_mode)
print(f"devices={n.value} error={e} token_mode={mode:o}")
print("ld_path_first=" + os.environ.get("LD_LIBRARY_PATH", "").split(":")[0])
"""


def write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def run(a, extra, workdir, expect_rc=0, timeout=120, bind=True):
    # each server records its LD_LIBRARY_PATH (devices(): never the stand-ins' directory)
    fake = write(os.path.join(workdir, "fake-server"),
                 f"#!/bin/sh\nprintf '%s' \"${{LD_LIBRARY_PATH-}}\" >\"$0.env.$$\"\n"
                 f"exec '{a.net_test}' fake_server \"$@\"\n", 0o755)
    prog = write(os.path.join(workdir, "count.py"), COUNT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VCUDA_")}
    # a stale token in the caller's environment must not replace the job's
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", VCUDA_LAUNCH_DIR=workdir,
               VCUDA_TOKEN="a-stale-token-from-the-caller")
    cmd = [a.launch, *(["--bind", "127.0.0.1"] if bind else []), "--server", fake, "--lib", a.lib, "--start-timeout", "30"] + extra + \
          ["--", sys.executable, prog]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    print(f"$ {' '.join(cmd)}\nrc={p.returncode}\nstdout: {p.stdout}stderr: {p.stderr}")
    return p


def expect(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    return 0 if cond else 1


def placement(stdout):
    """The tasks' placement lines: [(rank, host), ...] in the order printed."""
    lines = [json.loads(x) for x in stdout.splitlines() if x.startswith('{"bench":"placement"')]
    return [(r["rank"], r["host"]) for r in lines]


def devices(a, extra, n, what, tasks):
    with tempfile.TemporaryDirectory() as w:
        p = run(a, extra, w)
        left = [f for f in os.listdir(w) if f.startswith(".vcuda-launch")]
        fails = expect(p.returncode == 0 and f"devices={n} error=0 token_mode=600" in p.stdout,
                       f"{what}: the program sees {n} authenticated servers, token file 0600")
        fails += expect(placement(p.stdout) == [(t, socket.gethostname()) for t in range(tasks)],
                        f"{what}: one placement line per task, in task order, naming this host")
        # the program finds the refusing libcuda.so.1 beside the stand-in; the servers,
        # which need the real driver, are not given that directory
        lib = os.path.realpath(a.lib)
        first = re.findall(r"^ld_path_first=(.*)$", p.stdout, re.M)
        fails += expect(len(first) == 1 and os.path.realpath(first[0]) == lib,
                        f"{what}: the program has the stand-ins' directory first on LD_LIBRARY_PATH ({first})")
        server_paths = [open(os.path.join(w, f)).read() for f in os.listdir(w) if f.startswith("fake-server.env.")]
        fails += expect(len(server_paths) == n and not any(lib in map(os.path.realpath, filter(None, x.split(":")))
                                                           for x in server_paths),
                        f"{what}: {n} servers, none given the stand-ins' directory ({server_paths})")
        return fails + expect(not left, "the run directory (token, endpoints) is removed")


def have_ucx(a):
    p = subprocess.Popen([a.net_test, "serve", "ucx"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    p.terminate()
    p.communicate(timeout=10)
    return line.strip().isdigit()


def links():
    """This namespace's interfaces and the network namespaces, as one text."""
    show = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return show + subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def netns(a):
    missing = [t for t in ("ip", "tc", "unshare") if not shutil.which(t)]
    if os.geteuid() != 0 or missing:
        print(f"skipped: vcuda-netns needs root and iproute2/unshare ({'not root' if os.geteuid() else 'no ' + ', '.join(missing)})")
        return 77
    script = os.path.join(os.path.dirname(a.launch), "vcuda-netns")
    with tempfile.TemporaryDirectory() as w:
        fake = write(os.path.join(w, "fake-server"), f"#!/bin/sh\nexec '{a.net_test}' fake_server \"$@\"\n", 0o755)
        prog = write(os.path.join(w, "count.py"), COUNT)
        env = {k: v for k, v in os.environ.items() if not k.startswith("VCUDA_")}
        env.update(VCUDA_LAUNCH_DIR=w, VCUDA_TOKEN="a-stale-token-from-the-caller")
        cmd = [script, "--nodes", "2", "--gbit", "2", "--launch-opts",
               f"--server {fake} --lib {a.lib} --start-timeout 30", "--", sys.executable, prog]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        print(f"$ {' '.join(cmd)}\nrc={p.returncode}\nstdout: {p.stdout}stderr: {p.stderr}")
        net = [json.loads(x) for x in p.stdout.splitlines() if x.startswith('{"bench":"netns"')]
        fails = expect(p.returncode == 0 and "devices=2 error=0 token_mode=600" in p.stdout,
                       "the client sees the 2 servers of the 2 namespace nodes")
        fails += expect(len(net) == 1 and len(net[0]["nodes"]) == 2 and net[0]["link_gbit"] == 2,
                        "one line describes the network: 2 nodes, 2 Gbit/s")
        hosts = [h for _, h in placement(p.stdout)]
        fails += expect(bool(net) and hosts == net[0]["nodes"] and socket.gethostname() not in hosts,
                        "one placement line per node, naming the node's own hostname")
        fails += expect(re.search(r"via netns: 10\.214\.\d+\.11:\d+,10\.214\.\d+\.12:\d+$", p.stderr, re.M) is not None,
                        "the servers listen on the nodes' addresses, not loopback")
        ident = net[0]["client"][:-2] if net else "vn-none"
        fails += expect(ident not in links(), f"no namespace, veth or bridge of {ident} is left")
        fails += expect(not [f for f in os.listdir(w) if f.startswith(".vcuda-launch")], "the run directory is removed")
        bad = subprocess.run([script, "--nodes", "0", "--", "true"], capture_output=True, text=True, timeout=30)
        fails += expect(bad.returncode == 2 and "--nodes '0'" in bad.stderr, "--nodes 0 is refused (exit 2)")
        return fails


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--launch", required=True)
    ap.add_argument("--net-test", required=True)
    ap.add_argument("--lib", required=True)
    a = ap.parse_args()
    if a.case == "local":
        return devices(a, ["--launcher", "local", "--nodes", "3", "--gpus-per-node", "1"], 3, "3 local tasks", 3)
    if a.case == "local_ucx":
        if not have_ucx(a):
            print("skipped: vcuda was built without UCX")
            return 77
        return devices(a, ["--launcher", "local", "--nodes", "2", "--gpus-per-node", "1", "--ucx"], 2, "UCX", 2)
    if a.case == "mpirun":
        if not shutil.which("mpirun"):
            print("skipped: no mpirun")
            return 77
        opts = "--oversubscribe" if "Open MPI" in subprocess.run(["mpirun", "--version"], capture_output=True,
                                                                 text=True).stdout else ""
        return devices(a, ["--launcher", "mpirun", "--nodes", "1", "--ranks-per-node", "3", "--gpus-per-node", "2",
                           "--launcher-opts", opts], 6, "mpirun, 3 tasks x 2 servers", 3)
    if a.case == "no_server":
        with tempfile.TemporaryDirectory() as w:
            fake_bad = os.path.join(w, "bad-server")
            with open(fake_bad, "w") as f:
                f.write("#!/bin/sh\necho 'vcuda-server: no usable GPU: nothing to serve' >&2\nexit 77\n")
            os.chmod(fake_bad, 0o755)
            a2 = argparse.Namespace(**vars(a))
            p = run(a2, ["--launcher", "local", "--nodes", "2", "--gpus-per-node", "1", "--server", fake_bad], w)
            return expect(p.returncode == 77 and p.stderr.count("server not started") == 2
                          and "nothing to serve" in p.stderr and "devices=" not in p.stdout,
                          "each failed server named, exit 77, the program not run")
    if a.case == "iface":
        if not shutil.which("ip"):
            print("skipped: no `ip` (iproute2) to read an interface's address")
            return 77
        with tempfile.TemporaryDirectory() as w:
            p = run(a, ["--launcher", "local", "--nodes", "2", "--gpus-per-node", "1", "--iface", "lo"], w, bind=False)
            fails = expect(p.returncode == 0 and "devices=2 error=0" in p.stdout and
                           re.search(r"server\(s\) on 2 node\(s\) via local: 127\.0\.0\.1:\d+,127\.0\.0\.1:\d+$",
                                     p.stderr, re.M), "--iface lo: both tasks on 127.0.0.1")
            p = run(a, ["--launcher", "local", "--nodes", "2", "--gpus-per-node", "1", "--iface", "nosuchif0"], w,
                    bind=False)
            return fails + expect(p.returncode == 77 and p.stderr.count("no IPv4 address on interface nosuchif0") == 2,
                                  "--iface on a missing interface: each task says so, exit 77")
    if a.case == "remote_only":
        with tempfile.TemporaryDirectory() as w:
            p = run(a, ["--launcher", "local", "--nodes", "2", "--gpus-per-node", "1", "--remote-only"], w)
            return expect(p.returncode == 77 and "every task ran on the client's node" in p.stderr
                          and "devices=" not in p.stdout, "no server on the client's node, exit 77 saying why")
    if a.case == "netns":
        return netns(a)
    print(f"unknown case {a.case}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
