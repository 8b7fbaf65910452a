#!/usr/bin/env python3
"""CPU tests of bench/programs_check.py: the list of commands (labels, quoting, comments,
options, names), which programs it cannot start or cannot remote and why (programs
built here with `cc`: no libcudart.so.N among their NEEDED, with and without the
runtime's functions in them; and, where nvcc is installed, nvcc's own static and
shared builds), the normalisation, the verdicts, and whole checks through the real
vcuda-run and vcuda-server on the CPU stand-in driver.  No GPU: the runs on one are the
device's.

    test_programs_check.py [Programs|Normalise|Verdicts|Run|Class.test_name ...]
                           [--vcuda-build DIR --fake-driver DIR]   (for Run)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parent / "bench" / "programs_check.py"
sys.path.insert(0, str(SCRIPT.parent))
import programs_check as pc  # noqa: E402

OPTS = {"--vcuda-build": None, "--fake-driver": None}  # for Run: from the command line


def cc(tmp, name, source, *flags):
    """A program built here with the C compiler (the test is skipped without one)."""
    if not shutil.which("cc"):
        raise unittest.SkipTest("no C compiler (cc): programs to look at cannot be built")
    src = tmp / (name + ".c")
    src.write_text(source)
    subprocess.run(["cc", "-o", str(tmp / name), str(src), *flags], check=True, capture_output=True)
    return tmp / name


def run_result(out, err="", rc=0):
    return {"rc": rc, "hung": False, "secs": 0.1, "out": out, "err": err}


PROG = {"name": "p"}
# a program that carries the CUDA runtime's own functions and no libcudart.so.N among its
# NEEDED: what nvcc's default, the static runtime, makes
STATIC = """#include <stddef.h>
#include <stdio.h>
int cudaMalloc(void **p, size_t n) { (void)p; return n ? 0 : 1; }
int cudaLaunchKernel(const void *f) { return f != 0; }
int main(void) { void *p; printf("%d\\n", cudaMalloc(&p, 4) + cudaLaunchKernel(0)); return 0; }
"""
HELLO = '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n'


class Programs(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def parse(self, text):
        return pc.name_all(pc.parse_list(text, "LIST", self.tmp))

    def test_labels_quoting_comments(self):
        progs = self.parse("# a comment\n\n   \n"
                           "vecAdd: ./vecAdd -n 4   # trailing comment\n"
                           "./bin/stream -s '1 2' \"3 # not a comment\" x\\ y\n"
                           "  sp: cwd=sub timeout=2.5 src=s.cu ./prog --flag=a:b\n"
                           "./a:b\n")
        self.assertEqual([p["name"] for p in progs], ["vecAdd", "stream", "sp", "a_b"])
        self.assertEqual(progs[0]["argv"], ["./vecAdd", "-n", "4"])
        self.assertEqual(progs[1]["argv"], ["./bin/stream", "-s", "1 2", "3 # not a comment", "x y"])
        self.assertEqual((progs[2]["cwd"], progs[2]["timeout"], progs[2]["src"]),
                         (self.tmp / "sub", 2.5, self.tmp / "s.cu"))
        self.assertEqual(progs[2]["argv"], ["./prog", "--flag=a:b"])
        self.assertEqual([p["at"] for p in progs], ["LIST:4", "LIST:5", "LIST:6", "LIST:7"])
        self.assertEqual(progs[0]["cwd"], self.tmp)
        # a # inside a word or quoted is the word's, as in a shell
        self.assertEqual(self.parse("./p --tag=run#1 '#2' \\#3 a\\ #4 #5")[0]["argv"],
                         ["./p", "--tag=run#1", "#2", "#3", "a #4"])
        # an option word after the program is its argument, not an option
        self.assertEqual(self.parse("./p cwd=x")[0]["argv"], ["./p", "cwd=x"])

    def test_names(self):
        progs = self.parse("./x\n./x 1\nx-2: ./y\n/bin/x\n")
        self.assertEqual([p["name"] for p in progs], ["x", "x-3", "x-2", "x-4"])

    def test_bad_lines(self):
        for text, why in [("./p 'unclosed\n", "LIST:1: No closing quotation"),
                          ("ok: ./p\nok: ./q\n", "LIST:2: the name ok is already taken at LIST:1"),
                          ("\nlabel:\n", "LIST:2: no command after the label label:"),
                          ("cwd=/tmp\n", "LIST:1: no command"),
                          ("timeout=0 ./p\n", "LIST:1: timeout=0: give seconds"),
                          ("timeout=abc ./p\n", "LIST:1: timeout=abc: give seconds"),
                          ("src= ./p\n", "LIST:1: src= needs a value")]:
            with self.assertRaises(ValueError) as e:
                self.parse(text)
            self.assertIn(why, str(e.exception), text)

    def test_missing_programs(self):
        (self.tmp / "data.txt").write_text("x")
        (self.tmp / "dir").mkdir()
        progs = self.parse("./nope\n./data.txt\n./dir\nno-such-program-anywhere-42\n"
                           "cwd=gone ./p\nsh -c true\n")
        found = [pc.locate(p) for p in progs]
        self.assertEqual(found[0], (None, f"{self.tmp}/nope: no such file"))
        self.assertEqual(found[1], (None, f"{self.tmp}/data.txt: not executable"))
        self.assertEqual(found[2], (None, f"{self.tmp}/dir: a directory"))
        self.assertTrue(found[3][1].startswith("no-such-program-anywhere-42: not found on PATH"), found[3])
        self.assertEqual(found[4], (None, f"cwd {self.tmp}/gone: not a directory"))
        self.assertEqual(found[5], (Path(shutil.which("sh")), ""))

    def test_statically_linked(self):
        exe = cc(self.tmp, "static", STATIC)
        kind, why = pc.linkage(exe)
        self.assertEqual(kind, "static", why)
        self.assertRegex(why, r"^no libcudart\.so\.N among its NEEDED \(.*libc\.so\.6.*\), and it defines the "
                              r"CUDA runtime's own cudaLaunchKernel, cudaMalloc: linked statically")
        self.assertIn("nvcc -cudart shared", why)
        needed, defined, _ = pc.elf_facts(exe)
        self.assertFalse(any(pc.SHARED_CUDART.match(n) for n in needed), needed)
        self.assertIn("cudaMalloc", defined)

    def test_shared_and_neither(self):
        lib = self.tmp / "lib"
        lib.mkdir()
        cc(lib, "libcudart.so.13", "int cudaMalloc(void **p, unsigned long n) { (void)p; return (int)n; }\n",
           "-shared", "-fPIC", "-Wl,-soname,libcudart.so.13")
        exe = cc(self.tmp, "shared", "int cudaMalloc(void **p, unsigned long n);\n"
                                     "int main(void) { void *p; return cudaMalloc(&p, 0); }\n",
                 str(lib / "libcudart.so.13"))
        self.assertEqual(pc.linkage(exe), ("shared", "NEEDED libcudart.so.13"))
        kind, why = pc.linkage(cc(self.tmp, "hello", HELLO))  # no CUDA in it at all
        self.assertEqual(kind, "none", why)
        self.assertRegex(why, r"^no libcudart\.so\.N among its NEEDED \(.*libc\.so\.6.*\)$")
        script = self.tmp / "run.sh"
        script.write_text("#!/bin/sh\nexec ./shared\n")
        self.assertEqual(pc.linkage(script), ("none", "a script (#!/bin/sh)"))
        self.assertIsNone(pc.elf_facts(script))
        bad = self.tmp / "bad"
        bad.write_bytes(b"\x7fELF\x02\x01" + b"\xff" * 40)  # an ELF header pointing nowhere
        kind, why = pc.linkage(bad)
        self.assertEqual(kind, "none")
        self.assertIn("malformed ELF", why)

    @unittest.skipUnless(shutil.which("nvcc"), "nvcc is not installed: its own builds are not looked at")
    def test_nvcc_builds(self):
        cu = self.tmp / "k.cu"
        cu.write_text("#include <cstdio>\n__global__ void k(int *p) { *p = 7; }\n"
                      "int main() { int *d; cudaMalloc(&d, 4); k<<<1, 1>>>(d); printf(\"%d\\n\", cudaDeviceSynchronize()); }\n")
        for how, flags, kind in [("static", [], "static"), ("shared", ["-cudart", "shared"], "shared")]:
            exe = self.tmp / how
            subprocess.run(["nvcc", *flags, "-o", str(exe), str(cu)], check=True, capture_output=True, timeout=300)
            self.assertEqual(pc.linkage(exe)[0], kind, pc.linkage(exe))
            if how == "static":  # stripped: its device code still tells
                subprocess.run(["strip", str(exe)], check=True)
                kind2, why = pc.linkage(exe)
                self.assertEqual(kind2, "static", why)
                self.assertIn(".nv_fatbin", why)

    def test_clock_seeded(self):
        src = self.tmp / "src"
        src.mkdir()
        (src / "a.cu").write_text('// srand(time(NULL)) in a comment\nconst char *s = "srand(time(0))";\n')
        self.assertIsNone(pc.clock_seeded(src))
        (src / "b.cpp").write_text("#include <ctime>\nint main(){srand((unsigned int)time(NULL));}\n")
        self.assertEqual(pc.clock_seeded(src), src / "b.cpp")
        self.assertEqual(pc.clock_seeded(src / "b.cpp"), src / "b.cpp")

    def test_list_only_cli(self):
        static = cc(self.tmp, "static", STATIC)
        cc(self.tmp, "hello", HELLO)
        (self.tmp / "seeded.c").write_text("int main(){srand(time(0));}\n")
        lst = self.tmp / "list"
        lst.write_text(f"st: {static}\nhello: src=seeded.c ./hello 'a b'\n./missing\n")
        r = subprocess.run([sys.executable, str(SCRIPT), "--programs", str(lst), "--cwd", str(self.tmp),
                            "--list-only", "--name", "one", "--", "./hello", "x y"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {x["name"]: x for x in map(json.loads, r.stdout.splitlines())}
        self.assertEqual(list(rows), ["st", "hello", "missing", "one"])
        self.assertEqual((rows["st"]["verdict"], rows["st"]["linkage"]), ("not-remotable", "static"))
        self.assertEqual(rows["hello"]["command"], ["./hello", "a b"])
        self.assertEqual(rows["hello"]["linkage"], "none")
        self.assertNotIn("verdict", rows["hello"])
        self.assertIn(f"seeds its data from the clock ({self.tmp}/seeded.c)", rows["hello"]["note"])
        self.assertEqual((rows["missing"]["verdict"], rows["missing"]["reason"]),
                         ("not-found", f"{self.tmp}/missing: no such file"))
        self.assertEqual((rows["one"]["command"], rows["one"]["at"]), (["./hello", "x y"], "command line"))

    def test_bad_usage(self):
        lst = self.tmp / "list"
        lst.write_text("a: ./x\na: ./y\n")
        for args, why in [([], "nothing to check"),
                          (["--programs", str(self.tmp / "nope"), "--list-only"], "No such file"),
                          (["--programs", str(lst), "--list-only"], "the name a is already taken"),
                          (["--list-only", "--name", "a b", "--", "true"], "--name"),
                          (["--list-only", "--name", "n"], "--name names the program given after --"),
                          (["--list-only", "--only", "x,true", "--", "true"], "--only: no program is named x"),
                          (["--", "true"], "--vcuda-build")]:
            r = subprocess.run([sys.executable, str(SCRIPT)] + args, capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn("error:", r.stderr)
            self.assertIn(why, r.stderr, args)


class Normalise(unittest.TestCase):
    def test_timings_masked_results_kept(self):
        a = pc.normalise("Time = 1.25 ms\nThroughput = 12.5 GB/s, Size = 1024\nresult 42\n0x7f00deadbeef\n")
        b = pc.normalise("Time = 3.5 ms\nThroughput = 9.75 GB/s, Size = 1024\nresult 42\n0x7f00cafe0000\n")
        self.assertEqual(a, b)
        self.assertNotEqual(pc.normalise("result 42"), pc.normalise("result 43"))
        self.assertEqual(pc.normalise("took 12 ms, sum 5"), ["took <t>, sum 5"])

    def test_program_timing_lines(self):
        t = "Copy        1234.5   0.001  0.002  0.0015\n"
        u = "Copy        999.0    0.003  0.004  0.0035\n"
        self.assertNotEqual(pc.normalise(t), pc.normalise(u))
        self.assertEqual(pc.normalise(t, pc.STREAM_ROW), pc.normalise(u, pc.STREAM_ROW))
        self.assertEqual(pc.bandwidths("Function MBytes/s\n" + t), {"Copy": 1234.5})
        # the header that tells such a table (either unit)
        for head in ("Function    MBytes/sec  Min (sec)   Max         Average", "Function    MiBytes/sec Min (sec)"):
            self.assertTrue(pc.STREAM_HEAD.search("x\n" + head + "\n" + t), head)
        self.assertIsNone(pc.STREAM_HEAD.search("Function calls: 12\n" + t))

    def test_own_lines(self):
        err, names, why, said = pc.split_own("vcuda-run: 1 of 1 server(s)\nreal error\nvcuda: server lost\n"
                                       "vcuda: cudaMallocManaged is not supported remotely: managed memory cannot "
                                       "be remoted\nvcuda: cudaFoo is not supported remotely\n")
        self.assertEqual(err, "real error")
        self.assertEqual(names, ["cudaMallocManaged", "cudaFoo"])
        self.assertEqual(why[0], "managed memory cannot be remoted")
        self.assertEqual(said, ["vcuda: server lost"])


class Verdicts(unittest.TestCase):
    def judge(self, loc, vc, rerun=None, prog=PROG):
        return pc.judge(prog, loc, vc, lambda: rerun)

    def test_identical(self):
        j = self.judge(run_result("a\nb 1 ms\n"), run_result("a\nb 2 ms\n", "vcuda-run: started\n"))
        self.assertEqual((j["verdict"], j["same_output"], j["unsupported"]), ("identical", True, []))

    def test_same_as_set(self):
        j = self.judge(run_result("a\nb\n"), run_result("b\na\n"), prog={"name": "simplePrintf"})
        self.assertEqual(j["verdict"], "same-as-set")
        self.assertIn("any order", j["reason"])
        j = self.judge(run_result("a\nb\n"), run_result("b\na\n"))
        self.assertIn("no reason known", j["reason"])

    def test_refused_by_name(self):
        j = self.judge(run_result("ok\n"), run_result("", "vcuda: cudaMallocManaged is not supported remotely: "
                                                          "managed memory cannot be remoted\n", rc=1))
        self.assertEqual(j["verdict"], "refused-by-name")
        self.assertEqual(j["unsupported"], ["cudaMallocManaged"])

    def test_refused_zero_copy_launch(self):
        # a dot kernel writing into cudaHostAlloc'd memory: refused at the launch
        said = ("vcuda: cudaLaunchKernel: kernel argument 4 points into host memory from cudaHostAlloc "
                "(zero-copy), which is not supported remotely\nillegal\n")
        j = self.judge(run_result("ok\n"), run_result("", said, rc=1))
        self.assertEqual((j["verdict"], j["unsupported"]), ("refused-by-name", ["cudaLaunchKernel"]))

    def test_waived(self):
        # systemWideAtomics: exit 2 (EXIT_WAIVED) after testing managedMemory
        j = self.judge(run_result("GPU Device 0\nOK\n"),
                       run_result("GPU Device 0\n", "Unified Memory not supported on this device\n", rc=2))
        self.assertEqual(j["verdict"], "waived-needs-managed")
        self.assertIn("managedMemory", j["reason"])
        # simpleZeroCopy: exit 0 after testing canMapHostMemory
        j = self.judge(run_result("a\nb\nPASSED\n"),
                       run_result("a\n", "Device 0 does not support mapping CPU host memory!\n", rc=0))
        self.assertEqual(j["verdict"], "waived-needs-zero-copy")
        # the same message where the real runtime said it too, or a failing exit status: not a waiver
        j = self.judge(run_result("x\n", "Unified Memory not supported on this device\n", rc=0),
                       run_result("y\n", "Unified Memory not supported on this device\n", rc=2),
                       rerun=run_result("x\n", "Unified Memory not supported on this device\n"))
        self.assertEqual(j["verdict"], "differs")
        j = self.judge(run_result("x\n"), run_result("", "Unified Memory not supported on this device\n", rc=1),
                       rerun=run_result("x\n"))
        self.assertEqual(j["verdict"], "differs")

    def test_differs(self):
        j = self.judge(run_result("sum 1\n"), run_result("sum 2\n"), rerun=run_result("sum 1\n"))
        self.assertEqual(j["verdict"], "differs")
        self.assertIn("line 1", j["reason"])
        j = self.judge(run_result("x\n"), run_result("", "vcuda: cudaArrayFoo is not supported remotely\n", rc=2))
        self.assertEqual(j["verdict"], "differs")
        self.assertIn("exit status 0 vs 2", j["reason"])
        self.assertIn("refused: cudaArrayFoo", j["reason"])

    def test_varies_locally(self):
        j = self.judge(run_result("sum 1\n"), run_result("sum 2\n"), rerun=run_result("sum 3\n"))
        self.assertEqual(j["verdict"], "varies-locally")
        # vcuda may differ only on the lines the two real runs differ on
        j = self.judge(run_result("t 1\nsum 5\n"), run_result("t 2\nsum 5\n"), rerun=run_result("t 3\nsum 5\n"))
        self.assertEqual(j["verdict"], "varies-locally")
        self.assertIn("only on lines that vary", j["reason"])
        j = self.judge(run_result("t 1\nsum 5\n"), run_result("t 1\nsum 6\n"), rerun=run_result("t 3\nsum 5\n"))
        self.assertEqual(j["verdict"], "differs")
        self.assertIn("beyond what varies", j["reason"])
        j = self.judge(run_result("a\nb\n"), run_result("a\nc\nd\n"), rerun=run_result("a\n"))
        self.assertEqual(j["verdict"], "varies-locally")
        self.assertIn("line counts vary", j["reason"])

    def test_adapts_to_capability(self):
        real = "Device X\n  Support host page-locked memory mapping:       Yes\n  Managed Memory: Yes\nResult = PASS\n"
        vc = "Device X\n  Support host page-locked memory mapping:       No\n  Managed Memory: No\nResult = PASS\n"
        j = self.judge(run_result(real), run_result(vc), rerun=run_result(real))
        self.assertEqual(j["verdict"], "adapts-to-capability")
        self.assertIn("every other line as on the real runtime", j["reason"])
        # a result line differing too is a difference
        j = self.judge(run_result(real), run_result(vc.replace("PASS", "FAIL")), rerun=run_result(real))
        self.assertEqual(j["verdict"], "differs")
        # another path for it: line counts differ
        for vc_path in ("canMapHostMemory: No\ncudaMallocHost() 64 MB\nok\n",
                        "canMapHostMemory: No\nUsing cudaMallocHost\ncudaMallocHost() 64 MB\nok\n"):
            j = self.judge(run_result("start\ncanMapHostMemory: Yes\nmmap() 64 MB\nregister\nok\n"),
                           run_result("start\n" + vc_path),
                           rerun=run_result("start\ncanMapHostMemory: Yes\nmmap() 64 MB\nregister\nok\n"))
            self.assertEqual(j["verdict"], "adapts-to-capability")
            self.assertIn("takes its path", j["reason"])
        # another path ending otherwise, or lines before it differing: a difference
        j = self.judge(run_result("start\ncanMapHostMemory: Yes\nok\n"), run_result("start\ncanMapHostMemory: No\nbad\n"),
                       rerun=run_result("start\ncanMapHostMemory: Yes\nok\n"))
        self.assertEqual(j["verdict"], "differs")
        j = self.judge(run_result("start\ncanMapHostMemory: Yes\nx\nok\n"), run_result("other\ncanMapHostMemory: No\nok\n"),
                       rerun=run_result("start\ncanMapHostMemory: Yes\nx\nok\n"))
        self.assertEqual(j["verdict"], "differs")
        # failing through vcuda is not adapting
        j = self.judge(run_result("canMapHostMemory: Yes\nok\n"), run_result("canMapHostMemory: No\n", rc=1),
                       rerun=run_result("canMapHostMemory: Yes\nok\n"))
        self.assertEqual(j["verdict"], "differs")

    def test_clock_seeded(self):
        seeded = {"name": "s", "clock_seeded": True}
        j = self.judge(run_result("Result : 1.5\nPASSED\n"), run_result("Result : 2.25\nPASSED\n"), prog=seeded)
        self.assertEqual(j["verdict"], "varies-locally")
        self.assertIn("clock", j["reason"])
        j = self.judge(run_result("Result : 1.5\nPASSED\n"), run_result("Result : 2.25\nFAILED\n"),
                       rerun=run_result("Result : 1.5\nPASSED\n"), prog=seeded)
        self.assertEqual(j["verdict"], "differs")

    def test_fails_both_and_timeouts(self):
        j = self.judge(run_result("x\n", rc=1), run_result("y\n", rc="timeout"))
        self.assertEqual(j["verdict"], "fails-both")
        j = self.judge(run_result("x\n"), run_result("", rc="timeout"))
        self.assertEqual(j["verdict"], "differs")


# Python programs that call the runtime through ctypes: through vcuda-run the preloaded
# stand-in answers to libcudart.so.N (its soname) and connects to the server; on the real
# runtime, on a machine without a GPU or toolkit, the call fails or the library is
# absent, which these programs do not print
CALLS_CUDA = """import ctypes, os, sys
try:
    ctypes.CDLL(sys.argv[1]).cudaGetDeviceCount(ctypes.byref(ctypes.c_int()))
except OSError:
    pass
if sys.argv[2:] == ["stream"]:  # a STREAM-style table: rows of timings that do not say so
    import random
    print("Function    MBytes/sec  Min (sec)   Max         Average")
    for f in ("Copy", "Mul", "Add", "Triad", "Dot"):
        print(f"{f:<12}{random.uniform(1e5, 2e6):<12.3f}{random.random():<12.5f}{random.random():<12.5f}")
    sys.exit(0)
print("done" + (" through vcuda" if sys.argv[2:] and "VCUDA_SERVERS" in os.environ else ""))
"""


class Run(unittest.TestCase):
    """Whole checks: the real vcuda-run starts the real vcuda-server (on the CPU stand-in
    driver: the server's own dlopen finds it first on LD_LIBRARY_PATH) for each program."""

    @classmethod
    def setUpClass(cls):
        build, fake = OPTS["--vcuda-build"], OPTS["--fake-driver"]
        if not (build and fake):
            raise unittest.SkipTest("give --vcuda-build DIR --fake-driver DIR to run whole checks")
        cls.tmp = Path(tempfile.mkdtemp())
        vb = cls.tmp / "vcuda"  # the build directory as programs_check sees it
        vb.mkdir()
        for f in ("vcuda-run", "vcuda-server-start.sh", "lib"):
            (vb / f).symlink_to(Path(build).resolve() / f)
        (vb / "vcuda-server").write_text(
            f"#!/bin/sh\nLD_LIBRARY_PATH='{Path(fake).resolve()}'${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}} "
            f"exec '{Path(build).resolve() / 'vcuda-server'}' \"$@\"\n")
        (vb / "vcuda-server").chmod(0o755)
        cls.vb = vb
        cls.stand_in = next(f.name for f in (vb / "lib").iterdir() if re.fullmatch(r"libcudart\.so\.\d+", f.name))
        (cls.tmp / "calls_cuda.py").write_text(CALLS_CUDA)
        cc(cls.tmp, "hello", HELLO)
        cc(cls.tmp, "static", STATIC)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def check(self, lines, *extra, expect_rc=0):
        out = Path(tempfile.mkdtemp(dir=self.tmp))
        lst = out / "list"
        lst.write_text("\n".join(lines) + "\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("VCUDA_")}
        r = subprocess.run([sys.executable, str(SCRIPT), "--vcuda-build", str(self.vb), "--programs", str(lst),
                            "--cwd", str(self.tmp), "--out", str(out), *extra],
                           capture_output=True, text=True, env=env, timeout=240)
        print(r.stdout + r.stderr)
        self.assertEqual(r.returncode, expect_rc, r.stdout + r.stderr)
        rows = {x["name"]: x for x in map(json.loads, (out / "programs.jsonl").read_text().splitlines())}
        self.assertFalse((out / "programs.partial.jsonl").exists())
        return rows, r.stdout, out

    def test_verdicts(self):
        py = f"{sys.executable} calls_cuda.py {self.stand_in}"
        rows, table, out = self.check([f"same: {py}", f"other: {py} say", "hello: ./hello", "static: ./static",
                                       "gone: ./gone", f"stream: {py} stream"], expect_rc=1)
        self.assertEqual(list(rows), ["same", "other", "hello", "static", "gone", "stream"])  # the list's order
        same = rows["same"]
        self.assertEqual((same["verdict"], same["local_rc"], same["vcuda_rc"], same["same_output"]),
                         ("identical", 0, 0, True), same)
        self.assertEqual(same["command"], [sys.executable, "calls_cuda.py", self.stand_in])
        self.assertEqual(same["linkage"], "none")
        self.assertIn("authenticated", (out / "logs" / "same.server" / "vcuda-server-0.log").read_text())
        self.assertEqual((out / "logs" / "same.vcuda.out").read_text(), "done\n")
        self.assertEqual(rows["other"]["verdict"], "differs")
        self.assertIn("line 1: real 'done' / vcuda 'done through vcuda'", rows["other"]["reason"])
        # a program that never reaches vcuda: run both ways, and then said so
        hello = rows["hello"]
        self.assertEqual((hello["verdict"], hello["vcuda_rc"]), ("not-remotable", 0))
        self.assertIn("never connected to the server", hello["reason"])
        # linked statically: not run at all
        self.assertEqual(rows["static"]["verdict"], "not-remotable")
        self.assertNotIn("local_rc", rows["static"])
        self.assertFalse((out / "logs" / "static.local.out").exists())
        self.assertEqual((rows["gone"]["verdict"], rows["gone"]["reason"]), ("not-found", f"{self.tmp}/gone: no such file"))
        self.assertRegex(table, r"(?m)^differs +1  other$")
        self.assertRegex(table, r"(?m)^not-remotable +2  hello, static$")
        # its table's rows are timings; its bandwidths and its own check are recorded
        stream = rows["stream"]
        self.assertEqual(stream["verdict"], "identical", stream)
        self.assertEqual(sorted(stream["bandwidth"]["vcuda"]), ["Add", "Copy", "Dot", "Mul", "Triad"])
        self.assertEqual(stream["own_check_passed"], {"local": True, "vcuda": True})
        self.assertRegex(table, r"(?m)^stream: its own check passed: .*; bandwidth \(its unit\) local / vcuda: Copy ")
        self.assertIn("programs_check: 6 programs, 1 differ: other; 3 not found, not remotable or not run", table)
        self.assertEqual((out / "programs.txt").read_text().splitlines()[0].split(), ["verdict", "n", "programs"])

    def test_strict_timeout_only(self):
        py = f"{sys.executable} calls_cuda.py {self.stand_in}"
        rows, table, _ = self.check([f"same: {py}", "gone: ./gone"])  # nothing differs
        self.assertEqual(rows["gone"]["verdict"], "not-found")
        self.check([f"same: {py}", "gone: ./gone"], "--strict", expect_rc=1)
        rows, table, _ = self.check([f"same: {py}", f"slow: timeout=1 {sys.executable} -c 'import time; time.sleep(30)'"],
                                    "--only", "slow")
        self.assertEqual(list(rows), ["slow"])
        self.assertEqual((rows["slow"]["local_rc"], rows["slow"]["vcuda_rc"]), ("timeout", "timeout"))
        self.assertLess(rows["slow"]["local_s"], 10)
        self.assertIn("slow after 1 s", table)


def main():
    argv = sys.argv[:1]
    args = iter(sys.argv[1:])
    for a in args:
        if a in OPTS:
            OPTS[a] = next(args, None)
        else:
            argv.append(a)
    unittest.main(argv=argv, verbosity=2)  # (a skipped test prints its reason)


if __name__ == "__main__":
    main()
