#!/usr/bin/env python3
"""Unmodified public CUDA programs on the real runtime and through vcuda, compared.

    programs_check.py --vcuda-build DIR --samples CUDA_SAMPLES_TREE
                      [--babelstream TREE ...] [--rodinia TREE] [--work DIR] [--out DIR]
                      [--jobs N] [--run-jobs N] [--arch 90] [--only NAME,...]
                      [--timeout-s S] [--budget-s S] [--select-only | --build-only]

(--vcuda-build: the vcuda directory of a build tree, build/default/vcuda after `make`.)

For each program: build it unmodified with the shared runtime (`nvcc -cudart shared`,
sm_<arch>, arch from --arch or $CUDA_ARCH, default 90), run it on the real runtime,
then through vcuda (`vcuda-run --gpus 1`: one fresh local server per program), and
compare exit status and normalised output (NORMALISE below, the only place the rules
live).  One JSON line per program goes to OUT/programs.jsonl (name, suite, path, args,
built, local_rc, vcuda_rc, local_s, vcuda_s, same_output, unsupported: the calls vcuda
refused by name, vcuda_said: the stand-in's other messages, verdict, reason; BabelStream also its bandwidths and whether its own
check of the results passed each way), a short table to stdout and OUT/programs.txt,
every program's build log, output and server log under OUT/logs/.  Programs build in
parallel (--jobs) and run as soon as they are built, --run-jobs at a time (default 1:
the GPU to itself; more shortens the check, and the table says how it was run).

Which cuda-samples are taken: those that use the runtime API only, decided from their
sources and CMakeLists (EXCLUDE below): no CUDA library, no driver API call, no
graphics interop, no MPI, IPC or second process, nothing platform-specific.  Each
excluded sample gets a JSON line with verdict "excluded" and the rule that excluded it.
Arguments are upstream's own (the tree's test_args.json), or ARGS below where a sample
is capped by its own options to keep the whole check short.

Verdicts (one per program):
  identical        same exit status, same normalised stdout and stderr, line for line
  same-as-set      same exit status, the same normalised lines in another order (the
                   reason says why the order may vary; see UNORDERED)
  varies-locally   the outputs differ, and two runs on the real runtime differ as well
                   (timing-dependent paths), or the sample seeds its data from the clock
                   (srand(time(...)) in its source) and the outputs agree with every
                   number masked: not a vcuda difference
  refused-by-name  vcuda refused a zero-copy or managed-memory call by name
                   ("vcuda: NAME is not supported remotely", or a kernel given pinned
                   host memory: "vcuda: CALL: kernel argument I points into host memory
                   ..."), and the run then differed
  adapts-to-capability
                   the program printed that the device lacks mapped host or managed memory
                   (what vcuda reports: such memory cannot be remoted) and went on without
                   it; where the outputs align, no other line differs beyond what varies
                   between two real-runtime runs
  waived-needs-managed, waived-needs-zero-copy
                   through vcuda the program waived itself (its own message, exit status
                   2 or 0, where the real runtime ran it) after testing the device
                   attribute that vcuda reports absent: managedMemory, canMapHostMemory
  differs          anything else that is not the same (reason: what differs)
  fails-both       the program failed on the real runtime and through vcuda
  not-built        the build failed (reason: its first error)
  not-run          the time budget was spent before it ran
  excluded         not a runtime-API-only program (reason: the rule)
Exit status: 1 when a program differs (or, with --strict, was not built or not run),
else 0; 2 on bad usage.  (A sample that does not build with this toolkit is a fact about
the sample, reported, not a vcuda result.)
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# ---- normalisation: the one place where outputs are made comparable --------------------
# Applied line by line to stdout and stderr of both runs.  Each rule: (pattern, replacement,
# why).  Only values that legitimately differ between two runs of the same program are
# masked; everything else must match.
NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
NORMALISE = [
    # a number followed by a time unit: run time is not a result
    (re.compile(NUM + r"\s*(?:ms|msec|msecs|milliseconds?|s|sec|secs|seconds?|us|usec|microseconds?|ns|"
                      r"nanoseconds?|cycles|clocks)\b", re.I), "<t>", "timings"),
    # a number followed by a rate unit: throughput depends on timings
    (re.compile(NUM + r"\s*(?:[KMGT]i?B/s|[KMGT]?bytes/s|[KMGTP]?FLOP/?s|[KMGT]?flops|GOPS|"
                      r"[KMGT]?(?:elements|pixels|options|samples|bodies|interactions|updates|"
                      r"ops|keys|values|rays)(?:/s|/sec| per second)|[KMG]?Hz)\b", re.I), "<r>", "rates"),
    # every number on a line that names a timing or a rate (a value printed before its
    # unit, "Time = 1.23", "Throughput = 4.5 GB/s, Time = 0.1 s, Size = 1024")
    (re.compile(r"^.*\b(?:time|timing|elapsed|throughput|bandwidth|performance|perf|speed|speedup|"
                r"gflops|gb/s|mb/s|msec|usec|seconds?|duration|latency|rate)\b.*$", re.I), None, "timing lines"),
    # pointers and handles printed as hex
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "<addr>", "addresses"),
    # runs of blanks: a masked value printed in a fixed-width column moves its neighbours
    (re.compile(r"\s+"), " ", "column alignment"),
]
NUMBER = re.compile(NUM)
# stderr lines that are vcuda's own (the launcher's banner, the stand-in's refusals):
# removed before comparing, the refusals kept as unsupported-call names
OWN_LINE = re.compile(r"^vcuda(?:-run)?: ")
REFUSED = re.compile(r"^vcuda: (\w+) is not supported remotely(?:: (.*))?$")
# a kernel launch refused because an argument points into pinned host memory
REFUSED_ARG = re.compile(r"^vcuda: (\w+): (kernel argument \d+ points into host memory .*), which is not supported remotely$")
# a refusal for these reasons is by design: such memory needs coherence across the network
BY_DESIGN = re.compile(r"managed memory|zero-copy|mapped")
# a program's own message when it waives itself for want of a device attribute that vcuda
# reports absent (such memory cannot be remoted): (verdict, attribute, message)
WAIVED = [
    ("waived-needs-managed", "managedMemory",
     re.compile(r"Unified Memory not supported|(?:managed|unified) memory (?:is )?not supported|"
                r"does not support (?:managed|unified) memory", re.I)),
    ("waived-needs-zero-copy", "canMapHostMemory",
     re.compile(r"does not support mapping CPU host memory|(?:mapped|zero.copy) (?:host )?memory (?:is )?not supported",
                re.I)),
]
# a line in which a program states a device attribute that vcuda reports absent (mapped
# host memory, managed memory), where the program then goes on without it
CAPABILITY = re.compile(r"canMapHostMemory:\s*No|host page-locked memory mapping:\s*No|"
                        r"does not support mapping of generic host memory|Managed Memory:\s*No|"
                        r"managedMemory:\s*No", re.I)


def normalise(text, timing_lines=None):
    """Lines made comparable; timing_lines: a program's own pattern for lines that are
    all timings without saying so (BabelStream's result table)."""
    out = []
    for line in text.splitlines():
        line = line.rstrip()
        if timing_lines and timing_lines.match(line):
            line = NUMBER.sub("<n>", line)
        for pat, repl, _ in NORMALISE:
            if repl is None:
                if pat.match(line):
                    line = NUMBER.sub("<n>", line)
            else:
                line = pat.sub(repl, line)
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return out


def split_own(stderr):
    """(stderr without vcuda's own lines, [refused call names], [their reasons], [the
    stand-in's other lines: why a call failed, for the record])."""
    kept, names, reasons, other = [], [], [], []
    for line in stderr.splitlines():
        m = REFUSED.match(line.rstrip()) or REFUSED_ARG.match(line.rstrip())
        if m:
            if m.group(1) not in names:
                names.append(m.group(1))
                reasons.append(m.group(2) or "")
        elif not OWN_LINE.match(line):
            kept.append(line)
        elif line.startswith("vcuda: ") and len(other) < 5:
            other.append(line.rstrip()[:200])
    return "\n".join(kept), names, reasons, other


# ---- which cuda-samples: runtime API only ----------------------------------------------
LIBS = r"cublas|cublasLt|cufft|cufftw|curand|cusparse|cusolver|cusolverDn|npp\w*|nvjpeg|nvrtc|nvJitLink|nvvm|" \
       r"cudla|nvml|cupti|nvToolsExt|nvtx3?|cudnn|cutensor|nvblas|nvgraph|cufile|nvfatbin|nvptxcompiler"
EXCLUDE = [  # (rule, where: "src" | "cmake" | "path", pattern)
    ("CUDA library", "src", re.compile(r"#\s*include\s*[<\"](?:" + LIBS + r")[\w/]*\.h", re.I)),
    ("CUDA library", "cmake", re.compile(r"CUDA::(?:" + LIBS + r")\b|-l(?:" + LIBS + r")\b|\b(?:" + LIBS + r")_static\b", re.I)),
    ("driver API", "cmake", re.compile(r"CUDA::cuda_driver\b|-lcuda\b")),
    ("graphics interop", "src", re.compile(r"#\s*include\s*[<\"](?:GL/|GLES|GLFW|EGL|KHR/|vulkan|cuda_gl_interop|"
                                           r"cudaGL|cuda_egl_interop|cudaEGL|d3d|cuda_d3d|dxgi|X11|helper_gl|nvsci|"
                                           r"cuda_vdpau|vdpau)", re.I)),
    ("graphics interop", "cmake", re.compile(r"find_package\s*\(\s*(?:OpenGL|GLUT|GLEW|Vulkan|EGL|X11|glfw3|NVSCI)", re.I)),
    ("MPI", "src", re.compile(r"#\s*include\s*[<\"]mpi\.h")),
    ("MPI", "cmake", re.compile(r"find_package\s*\(\s*MPI", re.I)),
    ("IPC or a second process", "src", re.compile(r"\bcudaIpc\w+|helper_multiprocess\.h|\bfork\s*\(|\bshm_open\b|"
                                                  r"cudaImportExternal\w+|cudaExternal\w+")),
    ("platform-specific", "path", re.compile(r"/8_Platform_Specific/|/7_libNVVM/")),
]
# driver API calls: cuXxx( with a capital after "cu", minus cuComplex.h's host/device math
DRIVER_CALL = re.compile(r"\b(cu[A-Z]\w*)\s*\(")
NOT_DRIVER = re.compile(r"^cu(?:C(?:real|imag|add|sub|mul|div|abs|fma)[fd]?|Conj[fd]?|ComplexFloatToDouble|"
                        r"ComplexDoubleToFloat|Complex)$")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"", re.S)  # and string literals
OLD_RUNTIME = re.compile(r"#\s*if\s+CUDART_VERSION\s*<\s*(\d+)")


def live_code(text):
    """Source without comments, string literals and `#if CUDART_VERSION < N` blocks for an
    N this toolkit is past (deviceQuery keeps a driver-API path for CUDA 4 so guarded)."""
    text = COMMENT.sub(" ", text)
    out, skip = [], 0  # skip: nesting depth inside a dead block
    for line in text.splitlines():
        t = line.strip()
        if skip:
            if re.match(r"#\s*if", t):
                skip += 1
            elif re.match(r"#\s*endif", t):
                skip -= 1
            elif skip == 1 and re.match(r"#\s*(?:else|elif)", t):
                skip = 0
            continue
        m = OLD_RUNTIME.match(t)
        if m and int(m.group(1)) <= 13000:
            skip = 1
            continue
        out.append(line)
    return "\n".join(out)
SOURCE_EXT = (".cu", ".cpp", ".cc", ".c", ".cxx")
HEADER_EXT = (".h", ".hpp", ".cuh", ".inl")

# samples whose output order legitimately varies: accepted as same-as-set, with why
UNORDERED = {
    "simplePrintf": "device printf from several blocks: the blocks print in any order",
    "cdpSimplePrint": "device printf from parent and child grids in any order",
    "simpleAssert": "device assertion messages from several threads in any order",
}
# Arguments that keep a sample short, by its own options (else test_args.json's, else none)
ARGS = {
    "FDTD3d": ["--dimx=128", "--dimy=128", "--dimz=128", "--timesteps=5"],  # its CPU reference is slow
    "UnifiedMemoryPerf": ["--kernel-iterations=3"],  # 20 by default, over every size and mode
}
# a sample whose data is seeded from the clock: its results legitimately differ between
# any two runs, so beyond the masks it is compared with every number masked
CLOCK_SEED = re.compile(r"\bsrand\s*\(\s*(?:\([^()]*\)\s*)?time\s*\(")
# seconds a run may take (--timeout-s) unless TIMEOUT says otherwise; killed after it
TIMEOUT = {}
# cuda-samples' CMake options turned into nvcc options
CMAKE_FLAGS = [
    (re.compile(r"CUDA_SEPARABLE_COMPILATION\s+ON"), ["-rdc=true"]),
    (re.compile(r"--extended-lambda"), ["--extended-lambda"]),
    (re.compile(r"--expt-relaxed-constexpr"), ["--expt-relaxed-constexpr"]),
    (re.compile(r"find_package\s*\(\s*OpenMP|OpenMP::OpenMP_CXX"), ["-Xcompiler", "-fopenmp"]),
    (re.compile(r"-use_fast_math|--use_fast_math"), ["-use_fast_math"]),
]


def read(p):
    try:
        return p.read_text(errors="replace")
    except OSError:
        return ""


def sample_code(d):
    srcs = [p for p in sorted(d.rglob("*")) if p.is_file() and p.suffix in SOURCE_EXT + HEADER_EXT]
    return srcs, "\n".join(live_code(read(p)) for p in srcs)


def exclusion(d, rel):
    srcs, code = sample_code(d)
    cmake = "\n".join(read(p) for p in [d / "CMakeLists.txt", d / "Makefile"] if p.exists())
    why = {}  # every rule that matches, with its first evidence
    for rule, where, pat in EXCLUDE:
        hay = {"src": code, "cmake": cmake, "path": "/" + rel + "/"}[where]
        m = pat.search(hay)
        if m and rule not in why:
            why[rule] = m.group(0).strip().rstrip('"<')
    calls = sorted({c for c in DRIVER_CALL.findall(code) if not NOT_DRIVER.match(c)})
    if calls and "driver API" not in why:
        why["driver API"] = ", ".join(calls[:4]) + (" ..." if len(calls) > 4 else "")
    if not any(p.suffix in SOURCE_EXT for p in srcs):
        why["no source"] = "nothing to build"
    return "; ".join(f"{k}: {v}" for k, v in why.items()) or None


def sample_sources(d, name):
    """The sources of the sample's executable: its CMakeLists' add_executable(NAME ...)
    where it names files that exist, else every source file in the directory."""
    text = read(d / "CMakeLists.txt")
    m = re.search(r"add_executable\s*\(\s*" + re.escape(name) + r"\s+([^)]*)\)", text)
    if m:
        files = [d / f for f in m.group(1).split() if not f.startswith("$")]
        if files and all(f.is_file() for f in files):
            return [f for f in files if f.suffix in SOURCE_EXT]
    return [p for p in sorted(d.rglob("*")) if p.is_file() and p.suffix in SOURCE_EXT]


def test_args(root):
    p = root / "test_args.json"
    try:
        return json.loads(p.read_text()) if p.exists() else {}
    except (OSError, ValueError) as e:
        sys.exit(f"programs_check: {p}: {e}")


def cuda_samples(root, arch):
    cfg = test_args(root)
    progs, excluded = [], []
    for d in sorted((root / "Samples").glob("*/*")):
        if not d.is_dir():
            continue
        name, rel = d.name, str(d.relative_to(root))
        why = exclusion(d, rel)
        if why:
            excluded.append({"name": name, "suite": "cuda-samples", "path": rel, "verdict": "excluded", "reason": why})
            continue
        cmake = read(d / "CMakeLists.txt")
        flags = [f for pat, fl in CMAKE_FLAGS if pat.search(cmake) for f in fl]
        incs = sorted({str(p.parent) for p in d.rglob("*") if p.suffix in HEADER_EXT} | {str(d)})
        t = cfg.get(name, {})
        args = ARGS.get(name) or t.get("args") or (t.get("runs") or [{}])[0].get("args") or []
        note = []
        if t.get("min_gpus", 1) > 1:
            note.append(f"upstream runs it on >= {t['min_gpus']} GPUs; here on one")
        if name in ARGS:
            note.append("capped by its own options")
        cmd = ["nvcc", "-O2", "-std=c++17", "-cudart", "shared", f"-gencode=arch=compute_{arch},code=sm_{arch}",
               "-Wno-deprecated-gpu-targets", "-I", str(root / "Common")] + \
              [a for i in incs for a in ("-I", i)] + flags + [str(s) for s in sample_sources(d, name)]
        clock = bool(CLOCK_SEED.search(sample_code(d)[1]))
        if clock:
            note.append("seeds its data from the clock")
        progs.append({"name": name, "suite": "cuda-samples", "path": rel, "src": d, "build": [cmd], "exe": name,
                      "args": args, "note": "; ".join(note), "clock_seeded": clock})
    return progs, excluded


# ---- BabelStream: its own CMake build, shared runtime ----------------------------------
def babelstream(root, arch, work, several):
    """BabelStream's CUDA model; several trees (two versions) are named after their
    directories, e.g. babelstream-v5.0 -> BabelStream-cuda-v5.0."""
    name = "BabelStream-cuda" + ("-" + re.sub(r"^babelstream-?", "", root.name, flags=re.I) if several else "")
    b = work / ("build-" + name)
    cfg = ["cmake", "-S", str(root), "-B", str(b), "-DMODEL=cuda", "-DCMAKE_BUILD_TYPE=Release",
           "-DCMAKE_CUDA_COMPILER=nvcc", f"-DCUDA_ARCH=sm_{arch}", "-DCMAKE_CUDA_RUNTIME_LIBRARY=Shared"]
    return [{"name": name, "suite": "BabelStream", "path": root.name, "src": root,
             "build": [cfg, ["cmake", "--build", str(b), "-j4"],
                       ["sh", "-c", f"cp {b}/cuda-stream . 2>/dev/null || cp {b}/*-stream cuda-stream"]],
             "exe": "cuda-stream", "args": ["-s", str(1 << 25), "-n", "20"],
             "note": "2^25 doubles per array, 20 iterations; its own check of the results must pass both ways",
             "bandwidth": True, "timing_lines": STREAM_ROW}]


# ---- Rodinia: benchmarks that generate their own input ---------------------------------
# (name, directory, executable, sources, nvcc extras, arguments).  Rodinia's Makefiles name
# no architecture CUDA 13 still builds (sm_13/sm_20 or none), so the sources they name are
# built with the same nvcc line as the samples; the arguments are their `run` scripts'
# (gaussian's and lud's generated-matrix forms).  gaussian, srad_v2 and backprop use
# what CUDA 13 removed (cudaThreadSynchronize, cudaDeviceProp::clockRate): kept here so
# that the record says they do not build unmodified with it.  The others (hotspot,
# srad_v1, bfs, b+tree, ...) read data files that are not in Rodinia's repository.
RODINIA = [
    ("pathfinder", "pathfinder", "pathfinder", ["pathfinder.cu"], [], ["100000", "100", "20"]),
    ("nw", "nw", "needle", ["needle.cu"], [], ["2048", "10"]),
    ("lud", "lud/cuda", "lud_cuda", ["lud.cu", "lud_kernel.cu", "../common/common.c"], ["-I", "../common"], ["-s", "1024", "-v"]),
    ("gaussian", "gaussian", "gaussian", ["gaussian.cu"], [], ["-s", "1024", "-q"]),
    ("srad_v2", "srad/srad_v2", "srad", ["srad.cu"], [], ["2048", "2048", "0", "127", "0", "127", "0.5", "2"]),
    ("backprop", "backprop", "backprop", ["backprop.c", "facetrain.c", "imagenet.c", "backprop_cuda.cu"], ["-lm"], ["2097152"]),
]


def rodinia(root, arch):
    progs = []
    for name, rel, exe, srcs, extra, args in RODINIA:
        d = root / "cuda" / rel
        cmd = ["nvcc", "-O2", "-cudart", "shared", f"-gencode=arch=compute_{arch},code=sm_{arch}",
               "-Wno-deprecated-gpu-targets", "-I", str(d), "-I", str(root / "cuda" / "util")] + \
              [e if e.startswith("-") else str((d / e).resolve()) for e in extra] + [str((d / s).resolve()) for s in srcs]
        progs.append({"name": "rodinia-" + name, "suite": "Rodinia", "path": "cuda/" + rel, "src": d,
                      "build": [cmd], "exe": exe, "args": args, "note": "generated input"})
    return progs


# ---- build, run, compare ----------------------------------------------------------------
def build(p, work):
    bdir = work / "bin" / p["name"]
    shutil.rmtree(bdir, ignore_errors=True)
    bdir.mkdir(parents=True)
    log = []
    for cmd in p["build"]:
        cmd = [c for c in cmd]
        if cmd[0] == "nvcc":
            cmd += ["-o", str(bdir / p["exe"])]
        try:
            r = subprocess.run(cmd, cwd=bdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", timeout=900)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"{cmd[0]}: {e}", "\n".join(log)
        log.append("$ " + " ".join(cmd) + "\n" + r.stdout)
        if r.returncode:
            errs = [line for line in r.stdout.splitlines() if re.search(r"error|fatal|No such file", line, re.I)]
            return False, (errs or r.stdout.splitlines() or ["rc %d" % r.returncode])[0][:300], "\n".join(log)
    ok = (bdir / p["exe"]).is_file()
    return ok, "" if ok else "no executable produced", "\n".join(log)


LIVE = set()  # process groups of the runs under way, killed if the check itself is stopped
LIVE_LOCK = threading.Lock()


def stop_runs(sig, _frame):
    with LIVE_LOCK:
        for pgid in LIVE:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
    # at once: the pools would otherwise go on with the programs still queued (the
    # results so far are in programs.partial.jsonl)
    os._exit(128 + sig)


def run_one(p, work, mode, launcher, logs, tag, timeout):
    """Runs the program in a fresh copy of its directory (its data files, and nothing the
    other run wrote); a run that outlives its timeout is killed with its process group."""
    cwd = work / "run" / f"{p['name']}.{tag}"
    shutil.rmtree(cwd, ignore_errors=True)
    if p["suite"] == "cuda-samples":
        shutil.copytree(p["src"], cwd, symlinks=True)
    else:
        cwd.mkdir(parents=True)
    exe = str(work / "bin" / p["name"] / p["exe"])
    cmd = [exe] + p["args"]
    if mode == "vcuda":
        srv = logs / f"{p['name']}.server"
        cmd = [str(launcher), "--gpus", "1", "--log-dir", str(srv), "--"] + cmd
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    with LIVE_LOCK:
        LIVE.add(proc.pid)
    try:
        out, err = proc.communicate(timeout=TIMEOUT.get(p["name"], timeout))
        rc, hung = proc.returncode, False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:  # (it ended meanwhile)
            pass
        out, err = proc.communicate()
        rc, hung = "timeout", True
    finally:
        with LIVE_LOCK:
            LIVE.discard(proc.pid)
    secs = time.monotonic() - t0
    out, err = out.decode(errors="replace"), err.decode(errors="replace")
    (logs / f"{p['name']}.{tag}.out").write_text(out)
    (logs / f"{p['name']}.{tag}.err").write_text(err)
    shutil.rmtree(cwd, ignore_errors=True)
    return {"rc": rc, "hung": hung, "secs": round(secs, 2), "out": out, "err": err}


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i + 1}: real {x[:120]!r} / vcuda {y[:120]!r}"
    return f"{len(a)} vs {len(b)} lines"


STREAM_ROW = re.compile(r"^(?:Copy|Mul|Add|Triad|Dot|Nstream)\s")
STREAM_FAILED = re.compile(r"FAILED validation|Validation failed")


def bandwidths(text):
    """BabelStream's table: function -> its bandwidth column (the unit its header says)."""
    bw = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 2 and STREAM_ROW.match(line):
            try:
                bw[f[0]] = float(f[1])
            except ValueError:
                pass
    return bw


def waived_for(loc, vc, verr):
    """(verdict, reason) where the run through vcuda ended with the program's own waive
    message for an attribute vcuda reports absent (exit status 2, EXIT_WAIVED, or 0) and
    the real runtime's run neither said it nor failed; else None."""
    if loc["rc"] != 0 or vc["rc"] not in (0, 2):
        return None
    lines = [x.strip() for x in (vc["out"] + "\n" + verr).splitlines() if x.strip()]
    for verdict, attr, pat in WAIVED:
        said = [x for x in lines if pat.search(x)]
        if said and not pat.search(loc["out"] + loc["err"]):
            return verdict, (f"waived itself through vcuda (exit status {vc['rc']}): '{said[0][:120]}' -- "
                             f"it tested {attr}, which vcuda reports 0 (such memory cannot be remoted)")
    return None


def judge(p, loc, vc, rerun):
    """Verdict and reason for one program (rerun: a second run on the real runtime)."""
    verr, names, reasons, said = split_own(vc["err"])
    tl = p.get("timing_lines")
    l_out, v_out = normalise(loc["out"], tl), normalise(vc["out"], tl)
    l_err, v_err = normalise(loc["err"], tl), normalise(verr, tl)
    same_rc = loc["rc"] == vc["rc"]
    same = l_out == v_out and l_err == v_err
    as_set = sorted(l_out) == sorted(v_out) and sorted(l_err) == sorted(v_err)
    res = {"same_output": same, "unsupported": names, "vcuda_said": said}
    local_ok = loc["rc"] == 0
    if not local_ok and vc["rc"] != 0 and not same:
        return dict(res, verdict="fails-both", reason=f"real runtime rc {loc['rc']}, vcuda rc {vc['rc']}")
    if same_rc and same:
        why = "same exit status and output" + (" (fails the same way on both)" if not local_ok else "")
        return dict(res, verdict="identical", reason=why)
    if same_rc and as_set:
        why = UNORDERED.get(p["name"], "no reason known why the order should vary")
        return dict(res, verdict="same-as-set", reason="same lines in another order: " + why)
    masked = lambda lines: [NUMBER.sub("<n>", x) for x in lines]
    if p.get("clock_seeded") and same_rc and masked(l_out) == masked(v_out) and masked(l_err) == masked(v_err):
        return dict(res, verdict="varies-locally",
                    reason="seeds its data from the clock (srand(time(...))): equal with every number masked")
    waived = waived_for(loc, vc, verr)
    if waived:
        return dict(res, verdict=waived[0], reason=waived[1])
    by_design = [n for n, r in zip(names, reasons) if BY_DESIGN.search(r)]
    if by_design:
        return dict(res, verdict="refused-by-name", reason="refused: " + ", ".join(by_design))
    diff = first_diff(l_out, v_out) if l_out != v_out else "stderr " + first_diff(l_err, v_err)
    if not same_rc:
        diff = f"exit status {loc['rc']} vs {vc['rc']}; {diff}"
    if names:
        diff += "; refused: " + ", ".join(names)
    r2 = rerun()
    if r2 and same_rc:
        r_out, r_err = normalise(r2["out"], tl), normalise(r2["err"], tl)
        if r_out != l_out or r_err != l_err:
            hows = [within_local_variation(l_out, r_out, v_out), within_local_variation(l_err, r_err, v_err)]
            how = all(hows) and "; ".join(h for h in hows if h != "the same")
            if how:
                return dict(res, verdict="varies-locally", reason=f"two runs on the real runtime differ too ({how}); {diff}")
            diff += "; beyond what varies between two runs on the real runtime"
    adapted = adapts(loc, vc, l_out, v_out, normalise(r2["out"], tl) if r2 else l_out)
    if adapted:
        return dict(res, verdict="adapts-to-capability", reason=adapted)
    return dict(res, verdict="differs", reason=diff)


def adapts(loc, vc, first, vc_out, second):
    """Why the run through vcuda differs only because the program read an attribute vcuda
    reports absent and went on without it ('' if not): it printed so (CAPABILITY) where
    the real runtime's run did not, both ended well, and, where the outputs align line by
    line, every other differing line also differs between two real-runtime runs."""
    said = [x for x in vc_out if CAPABILITY.search(x) and x not in first]
    if not said or loc["rc"] != 0 or vc["rc"] != 0:
        return ""
    same = lambda a, b, v: a == v or a != b or CAPABILITY.search(v)  # noqa: E731
    if len(first) == len(vc_out) == len(second) and all(map(same, first, second, vc_out)):
        return f"prints what vcuda reports, '{said[0].strip()[:100]}'; every other line as on the real runtime"
    # another path from that line on: the lines before it as on the real runtime, and the
    # same last line (where the two real runs agree on it)
    k = vc_out.index(said[0])
    if k <= min(len(first), len(second)) and all(map(same, first[:k], second[:k], vc_out[:k])) \
            and first and second and vc_out and first[-1] == second[-1] == vc_out[-1]:
        return (f"reads what vcuda reports, '{said[0].strip()[:100]}', and takes its path for it (such "
                f"memory cannot be remoted): the {k} lines before it and the last line as on the real runtime")
    return ""


def within_local_variation(first, second, vc):
    """How vcuda's lines differ from the first real-runtime run only where that run and a
    second one differ too ('' if they differ elsewhere): line by line where all three have
    as many lines; where the two real runs do not, only that can be said."""
    if first == vc:
        return "the same"
    if len(first) == len(second) == len(vc):
        if all(a == v or a != b for a, b, v in zip(first, second, vc)):
            return "only on lines that vary between them"
        return ""
    if len(first) != len(second):
        return "their line counts vary; not compared line by line"
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=Path, help="cuda-samples tree (with Common/ and Samples/)")
    ap.add_argument("--babelstream", type=Path, action="append", default=[],
                    help="BabelStream tree (again for another version of it)")
    ap.add_argument("--rodinia", type=Path, help="Rodinia tree (with cuda/)")
    ap.add_argument("--vcuda-build", type=Path, help="vcuda build directory (vcuda-run, vcuda-server, lib/)")
    ap.add_argument("--work", type=Path, default=Path("programs-work"), help="builds and run directories")
    ap.add_argument("--out", type=Path, default=Path("programs-out"), help="programs.jsonl, programs.txt, logs/")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="builds at a time")
    ap.add_argument("--arch", default=os.environ.get("CUDA_ARCH", "90"), help="sm_ARCH (default $CUDA_ARCH or 90)")
    ap.add_argument("--run-jobs", type=int, default=1,
                    help="programs run at a time on the GPU (each with its own server); 1 unless time is short")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--strict", action="store_true", help="a program not built or not run fails the check too")
    ap.add_argument("--timeout-s", type=float, default=60, help="a run taking longer is killed (default 60)")
    ap.add_argument("--budget-s", type=float, default=0, help="stop starting programs after this many seconds")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--select-only", action="store_true", help="print the selection and exit")
    mode.add_argument("--build-only", action="store_true", help="build, do not run (no GPU needed)")
    a = ap.parse_args()
    a.arch = re.sub(r"^(?:sm_|compute_)", "", a.arch)  # 90, sm_90 alike
    if not re.fullmatch(r"\d{2,3}[af]?", a.arch):
        ap.error(f"--arch/CUDA_ARCH {a.arch!r}: give a number such as 90 (or sm_90)")
    for name, d in [("--samples", a.samples), ("--rodinia", a.rodinia)] + [("--babelstream", b) for b in a.babelstream]:
        if d and not d.is_dir():
            ap.error(f"{name} {d}: not a directory")
    if a.samples and not (a.samples / "Samples").is_dir():
        ap.error(f"--samples {a.samples}: no Samples/ in it")
    if not (a.samples or a.babelstream or a.rodinia):
        ap.error("nothing to check: give --samples, --babelstream and/or --rodinia")
    launcher = a.vcuda_build / "vcuda-run" if a.vcuda_build else None
    if not (a.select_only or a.build_only) and not (launcher and launcher.is_file()):
        ap.error("--vcuda-build DIR with vcuda-run in it is needed to run")
    t0 = time.monotonic()
    for sig in (signal.SIGTERM, signal.SIGINT):  # a stopped check leaves no program running
        signal.signal(sig, stop_runs)
    a.work, a.out = a.work.resolve(), a.out.resolve()
    progs, excluded = [], []
    if a.samples:
        pr, ex = cuda_samples(a.samples.resolve(), a.arch)
        progs += pr
        excluded += ex
    for b in a.babelstream:
        progs += babelstream(b.resolve(), a.arch, a.work, len(a.babelstream) > 1)
    if a.rodinia:
        progs += rodinia(a.rodinia.resolve(), a.arch)
    if a.only:
        want = set(a.only.split(","))
        progs = [p for p in progs if p["name"] in want]
        excluded = [e for e in excluded if e["name"] in want]
    if a.select_only:
        for p in progs:
            print(json.dumps({"name": p["name"], "suite": p["suite"], "path": p["path"], "args": p["args"],
                              "selected": True, "note": p["note"]}))
        for e in excluded:
            print(json.dumps(dict(e, selected=False)))
        print(f"{len(progs)} selected, {len(excluded)} excluded", file=sys.stderr)
        return 0
    logs = a.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (a.work / "bin").mkdir(parents=True, exist_ok=True)
    results = []
    # builds in parallel on the CPUs; each program's runs (real runtime, then vcuda) as
    # soon as it is built, --run-jobs programs at a time on the GPU
    partial = open(a.out / "programs.partial.jsonl", "w")  # as results come: a killed check leaves them
    lock = threading.Lock()

    def record(row):
        with lock:
            results.append(row)
            partial.write(json.dumps(row) + "\n")
            partial.flush()
            if row["verdict"] != "excluded":
                print(f"{row['name']}: {row['verdict']} ({row['reason'][:150]})", flush=True)

    for e in excluded:
        record(e)

    def check(p, row):
        try:
            record(check_one(p, row))
        except Exception as e:  # one program's trouble must not stop the others
            record(dict(row, verdict="not-run", reason=f"programs_check failed on it: {e!r}"))

    def check_one(p, row):
        if a.budget_s and time.monotonic() - t0 > a.budget_s:
            return dict(row, verdict="not-run", reason=f"time budget of {a.budget_s:.0f} s spent")
        loc = run_one(p, a.work, "local", launcher, logs, "local", a.timeout_s)
        vc = run_one(p, a.work, "vcuda", launcher, logs, "vcuda", a.timeout_s)
        rerun = lambda: run_one(p, a.work, "local", launcher, logs, "local2", a.timeout_s) \
            if loc["rc"] == vc["rc"] else None
        row = dict(row, local_rc=loc["rc"], vcuda_rc=vc["rc"], local_s=loc["secs"], vcuda_s=vc["secs"],
                   **judge(p, loc, vc, rerun))
        if p.get("bandwidth"):
            row["bandwidth"] = {"local": bandwidths(loc["out"]), "vcuda": bandwidths(vc["out"])}
            # its check of the results: the main branch says "FAILED validation" and exits
            # 1, v5.0 only says "Validation failed" (on stderr)
            row["own_check_passed"] = {m: r["rc"] == 0 and not STREAM_FAILED.search(r["err"])
                                       for m, r in (("local", loc), ("vcuda", vc))}
        return row

    runs = []
    with cf.ThreadPoolExecutor(max(1, a.jobs)) as pool, cf.ThreadPoolExecutor(max(1, a.run_jobs)) as gpu:
        futs = {pool.submit(build, p, a.work): p for p in progs}
        for fut in cf.as_completed(futs):
            p = futs[fut]
            ok, why, blog = fut.result()
            (logs / f"{p['name']}.build").write_text(blog)
            row = {"name": p["name"], "suite": p["suite"], "path": p["path"], "args": p["args"], "built": ok,
                   "note": p["note"]}
            if not ok:
                record(dict(row, verdict="not-built", reason=why))
            elif a.build_only:
                record(dict(row, verdict="not-run", reason="--build-only"))
            else:
                runs.append(gpu.submit(check, p, row))
        for r in runs:
            r.result()
    partial.close()
    results.sort(key=lambda r: (r["suite"], r["verdict"] == "excluded", r["name"]))
    with open(a.out / "programs.jsonl", "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    os.unlink(a.out / "programs.partial.jsonl")
    counts = {}
    for r in results:
        counts.setdefault((r["suite"], r["verdict"]), []).append(r["name"])
    lines = [f"{'suite':<13} {'verdict':<16} {'n':>3}  programs"]
    for (s, v), names in sorted(counts.items()):
        shown = ", ".join(names) if v != "excluded" else "(see programs.jsonl)"
        lines.append(f"{s:<13} {v:<16} {len(names):>3}  {shown}")
    for r in results:  # the bandwidths, local vs vcuda, where a program reports them
        bw = r.get("bandwidth")
        if bw:
            lines.append(f"{r['name']}: its own check passed: {r['own_check_passed']}; bandwidth (its unit) "
                         "local / vcuda: " + ", ".join(f"{f} {v:.1f} / {bw['vcuda'].get(f, float('nan')):.1f}"
                                                       for f, v in bw["local"].items()))
    lines.append(f"({a.run_jobs} program(s) at a time on the GPU, each run killed after {a.timeout_s:.0f} s"
                 f"{', ' + str(TIMEOUT) if TIMEOUT else ''})")
    (a.out / "programs.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    bad = [r["name"] for r in results if r["verdict"] == "differs"]
    missing = [r["name"] for r in results if r["verdict"] in ("not-built", "not-run") and not a.build_only]
    print(f"programs_check: {len(results)} programs, {len(bad)} differ{': ' + ', '.join(bad) if bad else ''}; "
          f"{len(missing)} not built or not run ({time.monotonic() - t0:.0f} s)")
    return 1 if bad or (a.strict and missing) else 0


if __name__ == "__main__":
    sys.exit(main())
