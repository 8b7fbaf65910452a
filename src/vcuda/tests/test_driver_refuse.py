#!/usr/bin/env python3
"""The refusing libcuda.so.1 beside the libcudart stand-in (src/driver_refuse.c), on the CPU.

  refuse    a library that dlopens "libcuda.so.1" and calls cuInit through dlsym (as one
            with a CUDA runtime of its own inside does), and a program calling
            cuDriverGetVersion, with LD_LIBRARY_PATH = the stand-in's directory (what
            vcuda-run and vcuda-launch give the program): one line each naming the
            caller, CUDA_ERROR_NO_DEVICE (100) from every call, also from a function
            cuGetProcAddress_v2 hands out, and the program's own exit status 3
  stand_in  the libcudart stand-in itself never loads libcuda.so.1 (the sample, no
            servers, with that LD_LIBRARY_PATH: the loader's own log, LD_DEBUG=libs)
  libraries the real cuBLAS, cuSPARSE and cuFFT, each with its own runtime inside, started
            with that LD_LIBRARY_PATH: cublasCreate and cusparseCreate return
            NOT_INITIALIZED, cufftPlan1d fails, and each library is named on its line
  run_env   vcuda-run gives the program the stand-in's directory first on LD_LIBRARY_PATH
            and the servers not (a fake server that records its LD_LIBRARY_PATH), and the
            caller program run through it is refused by name
"""
import argparse, json, os, subprocess, sys, tempfile

NO_DEVICE = 100


def expect(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def refusal_lines(err):
    return [l for l in err.splitlines() if "calls the CUDA driver directly" in l]


def check_refused(r, what):
    print(r.stdout + r.stderr)
    expect(r.returncode == 3, f"{what}: the program's own exit status 3 (got {r.returncode})")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    expect(got == {"cuInit": NO_DEVICE, "from_cuGetProcAddress": NO_DEVICE, "cuDriverGetVersion": NO_DEVICE,
                   "version": 0}, f"{what}: CUDA_ERROR_NO_DEVICE from every call, version 0 ({got})")
    lines = refusal_lines(r.stderr)
    exe = os.path.basename(a.caller)
    # one line per calling object, each naming it; the library's from its first call
    expect(len(lines) == 2, f"{what}: one refusal line per caller, two in all ({lines})")
    expect(lines[0].startswith("vcuda: libvcuda_driver_caller.so calls the CUDA driver directly (cuInit;"),
           f"{what}: the library named, with its first call ({lines[0]})")
    expect(lines[1].startswith(f"vcuda: {exe} calls the CUDA driver directly (cuDriverGetVersion;"),
           f"{what}: the program named ({lines[1]})")
    expect(all(l.endswith("vcuda remotes the CUDA runtime API only, so this program cannot run under vcuda")
               for l in lines), f"{what}: the reason given")


def env_without_vcuda(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VCUDA_") and k not in ("LD_PRELOAD",)}
    env.update(extra)
    return env


def case_refuse():
    r = subprocess.run([a.caller], capture_output=True, text=True, timeout=30,
                       env=env_without_vcuda(LD_LIBRARY_PATH=a.lib))
    check_refused(r, "LD_LIBRARY_PATH=stand-in dir")


def case_stand_in():
    r = subprocess.run([a.sample], capture_output=True, text=True, timeout=30,
                       env=env_without_vcuda(LD_LIBRARY_PATH=a.lib, LD_DEBUG="libs"))
    loads = [l for l in r.stderr.splitlines() if "libcuda.so" in l]
    stand_in = [l for l in r.stderr.splitlines() if "find library=libcudart.so" in l]
    expect(stand_in, "the sample looked for the runtime (LD_DEBUG=libs works here)")
    expect(not loads, "the stand-in loads no libcuda.so.1:\n" + "\n".join(loads))
    expect(not refusal_lines(r.stderr), "no refusal line from the stand-in")
    expect(r.returncode != 0 and "VCUDA_SERVERS" in r.stderr,
           f"the sample, no servers, says so (rc {r.returncode})")
    print(f"the sample ran without loading libcuda.so.1 (rc {r.returncode}, its refusal: no servers)")


def case_libraries():
    # the toolkit's libraries from where the program was linked (its RUNPATH), the
    # driver from the stand-in's directory
    r = subprocess.run([a.libraries], capture_output=True, text=True, timeout=90,
                       env=env_without_vcuda(LD_LIBRARY_PATH=a.lib))
    print(r.stdout + r.stderr)
    expect(r.returncode == 3, f"the program's own exit status 3 (got {r.returncode})")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    # CUBLAS_STATUS_NOT_INITIALIZED, CUSPARSE_STATUS_NOT_INITIALIZED; cuFFT: any failure
    expect(got["cublasCreate"] == 1 and got["cusparseCreate"] == 1 and got["cufftPlan1d"] != 0,
           f"the libraries did not start ({got})")
    named = [l.split()[1] for l in refusal_lines(r.stderr)]
    for lib in ("libcublas", "libcusparse", "libcufft"):
        expect(any(n.startswith(lib + ".so") for n in named), f"{lib} named on a refusal line ({named})")
    expect(not any(n.startswith("libcudart") for n in named), f"the stand-in calls no driver ({named})")


def case_run_env():
    with tempfile.TemporaryDirectory() as w:
        fake = os.path.join(w, "fake-server")
        with open(fake, "w") as f:
            f.write(f"#!/bin/sh\nprintf '%s' \"${{LD_LIBRARY_PATH-unset}}\" >'{w}/server.env'\n"
                    f"exec '{a.net_test}' fake_server \"$@\"\n")
        os.chmod(fake, 0o755)
        caller_path = os.path.join(w, "callers-own")
        env = env_without_vcuda(LD_LIBRARY_PATH=caller_path)
        base = [a.run, "--gpus", "1", "--server", fake, "--lib", a.lib, "--log-dir", os.path.join(w, "logs"), "--"]
        r = subprocess.run(base + ["sh", "-c", f"printf '%s' \"$LD_LIBRARY_PATH\" >'{w}/program.env'"],
                           capture_output=True, text=True, timeout=60, env=env)
        print(r.stdout + r.stderr)
        expect(r.returncode == 0, f"vcuda-run with the fake server ran the program (rc {r.returncode})")
        prog = open(os.path.join(w, "program.env")).read()
        server = open(os.path.join(w, "server.env")).read()
        lib = os.path.realpath(a.lib)
        expect(prog == f"{lib}:{caller_path}", f"the program: the stand-in's directory first ({prog!r})")
        expect(server == caller_path, f"the server: the caller's LD_LIBRARY_PATH untouched ({server!r})")
        print(f"program LD_LIBRARY_PATH={prog}\nserver  LD_LIBRARY_PATH={server}")
        r = subprocess.run(base + [a.caller], capture_output=True, text=True, timeout=60, env=env)
        check_refused(r, "through vcuda-run")


ap = argparse.ArgumentParser()
ap.add_argument("case", choices=["refuse", "stand_in", "libraries", "run_env"])
ap.add_argument("--lib", required=True, help="the stand-ins' directory (libcudart.so.N, libcuda.so.1)")
ap.add_argument("--caller", required=True, help="tests/driver_caller.c built")
ap.add_argument("--sample", help="vcuda-sample-vector-add (stand_in)")
ap.add_argument("--libraries", help="tests/driver_libraries.c built (libraries)")
ap.add_argument("--run", help="the build tree's vcuda-run (run_env)")
ap.add_argument("--net-test", help="vcuda_net_test, for its fake_server (run_env)")
a = ap.parse_args()
globals()["case_" + a.case]()
print("PASS", a.case)
