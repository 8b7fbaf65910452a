#!/usr/bin/env python3
"""CPU tests of the libcudart stand-in with the unmodified vector-add sample.

    test_cudart.py CASE --lib DIR --sample EXE [--net-test EXE] [--programs EXE...]

symbols      every libcudart symbol the programs import is exported by the stand-in,
             under the same version node (else the loader would refuse them)
no_servers   VCUDA_SERVERS unset: the CUDA call fails with the reason, exit 1
unreachable  only a dead server: "no CUDA-capable device", fast
wrong_token  the server refuses the proof of a wrong token: said so, no device
remote_error a CPU-only test server answers every GPU request with "not implemented":
             the error comes back through the CUDA API (the whole client path runs)
exports      every symbol the real runtime (--real) defines, the stand-in defines too,
             under the same version node; and src/cudart_exports.txt lists exactly the
             real runtime's symbols when it is the runtime the stand-in was built for
errors       cudaGetErrorName/String agree with the real runtime for codes 0..10000
unsupported  a function vcuda does not remote returns cudaErrorNotSupported, becomes the
             last error, and names itself on stderr once, however often it is called
per_thread_entry_points
             every _ptsz/_ptds entry point a program built with --default-stream
             per-thread imports (--programs) is defined by the stand-in, not one of its
             generated stubs (weak symbols, failing by name)
"""
import argparse, json, os, re, shutil, signal, socket, subprocess, sys, time

TOKEN = "s3cret-test-token"  # test_net.c's


def rpath_finds_cudart(exe):
    """Whether `exe` has a DT_RPATH (not DT_RUNPATH) directory holding a libcudart.so.N:
    the loader searches DT_RPATH before LD_LIBRARY_PATH, so such a program (Spack links
    with DT_RPATH by default) loads the real runtime whatever LD_LIBRARY_PATH says, and
    only LD_PRELOAD puts the stand-in in front."""
    if not shutil.which("readelf"):
        return False
    out = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True).stdout
    dirs = [d for m in re.findall(r"\(RPATH\)\s+Library rpath: \[(.*)\]", out) for d in m.split(":")]
    return any(os.path.isdir(d) and any(re.fullmatch(r"libcudart\.so\.\d+", f) for f in os.listdir(d))
               for d in dirs)


def run(sample, lib, env_extra, preload=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VCUDA_")}
    env.update(env_extra)
    if not preload and rpath_finds_cudart(sample):
        print(f"note: {os.path.basename(sample)} has a DT_RPATH to the real libcudart, which "
              "LD_LIBRARY_PATH cannot override: run through LD_PRELOAD (as vcuda-run does)")
        preload = True
    if preload:
        env["LD_PRELOAD"] = os.path.join(lib, "libcudart.so." + stand_in_major(lib))
    else:
        env["LD_LIBRARY_PATH"] = lib + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    t0 = time.monotonic()
    p = subprocess.run([sample, "4096"], env=env, capture_output=True, text=True, timeout=60)
    print(f"rc={p.returncode} in {time.monotonic() - t0:.2f} s\nstdout: {p.stdout}stderr: {p.stderr}")
    return p, time.monotonic() - t0


def stand_in_major(lib):
    names = [f for f in os.listdir(lib) if re.fullmatch(r"libcudart\.so\.\d+", f)]
    assert len(names) == 1, f"expected one libcudart.so.N in {lib}: {names}"
    return names[0].rsplit(".", 1)[1]


def dynamic_symbols(path):
    out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines() if "libcudart.so" in line]


def case_symbols(a):
    if not shutil.which("objdump"):
        print("skipped: objdump (binutils) not found")
        return 77
    node = "libcudart.so." + stand_in_major(a.lib)
    exported = {f[-1] for f in dynamic_symbols(os.path.join(a.lib, node)) if f[-2] == node and "UND" not in f}
    bad = 0
    for prog in [a.sample] + (a.programs or []):
        needed = {f[-1] for f in dynamic_symbols(prog) if "*UND*" in f and f[-2] == f"({node})"}
        missing = sorted(needed - exported)
        print(f"{os.path.basename(prog)}: {len(needed)} runtime symbols, missing {missing or 'none'}")
        bad += bool(missing) or not needed
    return 1 if bad else 0


def expect(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    return 0 if cond else 1


def case_no_servers(a):
    p, _ = run(a.sample, a.lib, {})
    return expect(p.returncode == 1 and "VCUDA_SERVERS is not set" in p.stderr
                  and "initialization error" in p.stderr, "unset VCUDA_SERVERS is reported through the CUDA call")


def dead_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def case_unreachable(a):
    fails = 0
    for preload in (False, True):
        p, dt = run(a.sample, a.lib, {"VCUDA_SERVERS": f"127.0.0.1:{dead_port()}", "VCUDA_TOKEN": TOKEN}, preload)
        fails += expect(p.returncode == 1 and "device dropped" in p.stderr
                        and "no CUDA-capable device is detected" in p.stderr and dt < 10,
                        f"dead server -> no device ({'LD_PRELOAD' if preload else 'LD_LIBRARY_PATH'})")
    return fails


class TestServer:
    def __init__(self, net_test):
        self.p = subprocess.Popen([net_test, "serve"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.port = int(self.p.stdout.readline())

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        _, err = self.p.communicate(timeout=10)
        print("--- server log ---\n" + err)
        return err


def case_wrong_token(a):
    srv = TestServer(a.net_test)
    p, _ = run(a.sample, a.lib, {"VCUDA_SERVERS": f"127.0.0.1:{srv.port}", "VCUDA_TOKEN": "not-the-token"})
    log = srv.stop()
    return expect(p.returncode == 1 and "AUTH refused: vcuda: authentication failed" in p.stderr
                  and "closed: authentication failed" in log, "wrong token refused on both sides")


def case_remote_error(a):
    srv = TestServer(a.net_test)
    p, _ = run(a.sample, a.lib, {"VCUDA_SERVERS": f"127.0.0.1:{srv.port}", "VCUDA_TOKEN": TOKEN})
    log = srv.stop()
    # count is local (1 server = 1 device); properties go to the server, which says 801
    return expect(p.returncode == 1 and "cudaGetDeviceProperties(&prop, 0) failed: operation not supported" in p.stderr
                  and "authenticated" in log and "test-handler: disconnect" in log,
                  "the server's error comes back through cudaGetDeviceProperties")


def defined_symbols(path):
    """{name: version} of what a shared object defines (nm -D --defined-only)."""
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TtWwi":
            name, _, version = f[2].partition("@@")
            syms[name] = version
    return syms


def real_runtime(a):
    if not a.real or not os.path.exists(a.real):
        print(f"skipped: no real CUDA runtime to compare with ({a.real or 'none given'})")
        return None
    if not shutil.which("nm"):
        print("skipped: nm (binutils) not found")
        return None
    return a.real


def case_exports(a):
    real = real_runtime(a)
    if not real:
        return 77
    node = "libcudart.so." + stand_in_major(a.lib)
    want, have = defined_symbols(real), defined_symbols(os.path.join(a.lib, node))
    missing = sorted(set(want) - set(have))
    wrong_version = sorted(n for n in set(want) & set(have) if have[n] != node)
    print(f"real runtime {real}: {len(want)} symbols; stand-in: {len(have)}")
    fails = expect(not missing, f"no symbol missing ({len(missing)} missing: {missing[:20]})")
    fails += expect(not wrong_version, f"all under version {node} (wrong: {wrong_version[:20]})")
    lines = open(os.path.join(os.path.dirname(__file__), "..", "src", "cudart_exports.txt")).read().split("\n")
    source, listed = lines[0].lstrip("# "), [l for l in lines[1:] if l]
    if os.path.basename(os.path.realpath(real)) != source:
        print(f"cudart_exports.txt is from {source}, the runtime here is {os.path.realpath(real)}: list not compared")
    else:
        fails += expect(sorted(want) == sorted(listed),
                        f"cudart_exports.txt is the real runtime's list (extra {sorted(set(listed) - set(want))[:10]}, "
                        f"absent {sorted(set(want) - set(listed))[:10]})")
    return fails


ERROR_DUMP = """
import ctypes, json, sys
rt = ctypes.CDLL(sys.argv[1])
rt.cudaGetErrorName.restype = rt.cudaGetErrorString.restype = ctypes.c_char_p
print(json.dumps([[c, rt.cudaGetErrorName(c).decode(), rt.cudaGetErrorString(c).decode()] for c in range(-2, 10002)]))
"""


def error_table(lib):
    # one process per library: both define the same names
    p = subprocess.run([sys.executable, "-c", ERROR_DUMP, lib], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(p.stdout)


def case_errors(a):
    real = real_runtime(a)
    if not real:
        return 77
    want = error_table(real)
    have = error_table(os.path.join(a.lib, "libcudart.so." + stand_in_major(a.lib)))
    differ = [(w, h) for w, h in zip(want, have) if w != h]
    named = sum(1 for w in want if w[1] != "unrecognized error code")
    for w, h in differ[:10]:
        print(f"code {w[0]}: real {w[1:]}, stand-in {h[1:]}")
    return expect(len(want) == len(have) and not differ,
                  f"names and texts of codes -2..10001 match the real runtime ({named} named, {len(differ)} differ)")


UNSUPPORTED = """
import ctypes, sys
rt = ctypes.CDLL(sys.argv[1])
codes = [rt.cudaArrayGetPlane(None, None, 0) for _ in range(3)] + [rt.cudaGetLastError(), rt.cudaGetLastError()]
mapped = ctypes.c_void_p()
codes += [rt.cudaHostAlloc(ctypes.byref(mapped), 1, 2) for _ in range(2)]  # cudaHostAllocMapped
print(codes)
"""


def case_unsupported(a):
    lib = os.path.join(a.lib, "libcudart.so." + stand_in_major(a.lib))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VCUDA_")}
    p = subprocess.run([sys.executable, "-c", UNSUPPORTED, lib], capture_output=True, text=True, timeout=60, env=env)
    print(f"stdout: {p.stdout}stderr: {p.stderr}")
    lines = p.stderr.splitlines()
    fails = expect(p.stdout.strip() == "[801, 801, 801, 801, 0, 801, 801]",
                   "cudaErrorNotSupported each time, kept as the last error until read")
    fails += expect(lines.count("vcuda: cudaArrayGetPlane is not supported remotely") == 1,
                    "a generated stub names itself once")
    fails += expect(sum(l.startswith("vcuda: cudaHostAlloc is not supported remotely: ") for l in lines) == 1,
                    "a refusal with a reason names itself once")
    return fails


def case_per_thread_entry_points(a):
    if not shutil.which("nm") or not shutil.which("objdump"):
        print("skipped: nm/objdump (binutils) not found")
        return 77
    node = "libcudart.so." + stand_in_major(a.lib)
    out = subprocess.run(["nm", "-D", "--defined-only", os.path.join(a.lib, node)], capture_output=True, text=True,
                         check=True).stdout
    kinds = {f[2].partition("@")[0]: f[1] for f in (l.split() for l in out.splitlines()) if len(f) == 3}
    fails, seen = 0, 0
    for prog in a.programs or []:
        wanted = sorted({f[-1] for f in dynamic_symbols(prog) if "*UND*" in f and re.search(r"_pt(sz|ds)$", f[-1])})
        stubs = [w for w in wanted if kinds.get(w) != "T"]
        seen += len(wanted)
        fails += expect(not stubs, f"{os.path.basename(prog)}: {len(wanted)} per-thread entry points imported, "
                                   f"not defined (stubs or missing): {stubs or 'none'}")
    fails += expect(seen > 0, "some program imports per-thread entry points (else nothing was checked)")
    return fails


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--sample", required=True)
    ap.add_argument("--net-test")
    ap.add_argument("--programs", nargs="*")
    ap.add_argument("--real", help="the CUDA runtime the stand-in stands in for")
    a = ap.parse_args()
    return globals()["case_" + a.case](a)


if __name__ == "__main__":
    sys.exit(main())
