#!/usr/bin/env python3
"""CPU tests of bench/programs_check.py: which samples it takes and why it leaves the
others, the normalisation, the verdicts, the JSON, and (where nvcc is installed) the
build of a runtime-API-only sample.  No GPU: the runs themselves are the device's.

    test_programs_check.py [Selection|Normalise|Verdicts|Class.test_name ...]
"""
import json
import os
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

RUNTIME_ONLY = """#include <cstdio>
#include <cuComplex.h>
#if CUDART_VERSION < 5000
#include <cuda.h>
static void old() { cuDeviceGetAttribute(0, 0, 0); }   // dead on this toolkit
#endif
__global__ void k(int *p) { *p = 7; }
int main() {
    cuFloatComplex z = cuCmulf(make_cuFloatComplex(1, 0), make_cuFloatComplex(0, 1));
    int *d, h = 0;
    cudaMalloc(&d, sizeof h);
    k<<<1, 1>>>(d);
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf("value %d %g, see cuMemAlloc(3) in the docs\\n", h, cuCimagf(z));  /* cuLaunch(x) */
    return h == 7 ? 0 : 1;
}
"""
SAMPLES = {  # name: (files, the rule that must exclude it, or None)
    "good": ({"good.cu": RUNTIME_ONLY}, None),
    "hostonly": ({"hostonly.cpp": "#include <cuda_runtime.h>\nint main(){int n;return cudaGetDeviceCount(&n);}\n"},
                 None),
    "seeded": ({"seeded.cu": "#include <ctime>\n#include <cstdlib>\nint main(){srand((unsigned int)time(NULL));}\n"},
               None),
    "blas": ({"blas.cu": "#include <cublas_v2.h>\nint main(){}\n"}, "CUDA library"),
    "drv": ({"drv.cu": "#include <cuda.h>\nint main(){CUdeviceptr p; cuMemAlloc(&p, 4);}\n"}, "driver API"),
    "drvcmake": ({"drvcmake.cu": "int main(){}\n",
                  "CMakeLists.txt": "target_link_libraries(drvcmake PRIVATE CUDA::cuda_driver)\n"}, "driver API"),
    "gl": ({"gl.cu": "#include <GL/gl.h>\nint main(){}\n"}, "graphics interop"),
    "ipc": ({"ipc.cu": "int main(){cudaIpcMemHandle_t h; cudaIpcGetMemHandle(&h, 0);}\n"},
            "IPC or a second process"),
    "mpi": ({"mpi.cu": "#include <mpi.h>\nint main(){}\n"}, "MPI"),
}


def make_tree(root):
    (root / "Common").mkdir(parents=True)
    for name, (files, _) in SAMPLES.items():
        d = root / "Samples" / "0_Introduction" / name
        d.mkdir(parents=True)
        for f, text in files.items():
            (d / f).write_text(text)
    (root / "test_args.json").write_text(json.dumps({"good": {"args": ["-x=1"]}}))


def run_result(out, err="", rc=0):
    return {"rc": rc, "hung": False, "secs": 0.1, "out": out, "err": err}


PROG = {"name": "p", "suite": "cuda-samples"}


class Selection(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        make_tree(self.tmp)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_rules(self):
        progs, excluded = pc.cuda_samples(self.tmp, "90")
        self.assertEqual(sorted(p["name"] for p in progs), ["good", "hostonly", "seeded"])
        self.assertEqual([p["name"] for p in progs if p["clock_seeded"]], ["seeded"])
        why = {e["name"]: e["reason"] for e in excluded}
        for name, (_, rule) in SAMPLES.items():
            if rule:
                self.assertTrue(why[name].startswith(rule + ":"), (name, why[name]))
        good = next(p for p in progs if p["name"] == "good")
        self.assertEqual(good["args"], ["-x=1"])  # upstream's own arguments
        cmd = good["build"][0]
        self.assertIn("-cudart", cmd)
        self.assertEqual(cmd[cmd.index("-cudart") + 1], "shared")
        self.assertIn("-gencode=arch=compute_90,code=sm_90", cmd)

    def test_select_only_cli(self):
        r = subprocess.run([sys.executable, str(SCRIPT), "--samples", str(self.tmp), "--select-only"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertEqual(len(rows), len(SAMPLES))
        self.assertIn("3 selected, 6 excluded", r.stderr)

    def test_bad_usage(self):
        for args in (["--samples", str(self.tmp / "nope")], ["--samples", str(self.tmp), "--arch", "hopper"], [],
                     ["--samples", str(self.tmp)]):  # the last: no --vcuda-build to run with
            r = subprocess.run([sys.executable, str(SCRIPT)] + args, capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn("error:", r.stderr)

    @unittest.skipUnless(shutil.which("nvcc"), "nvcc is not installed: the build of a sample is not tested")
    def test_build_only(self):
        out = self.tmp / "out"
        r = subprocess.run([sys.executable, str(SCRIPT), "--samples", str(self.tmp), "--build-only", "--only", "good",
                            "--work", str(self.tmp / "work"), "--out", str(out), "--jobs", "1"],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = {json.loads(x)["name"]: json.loads(x) for x in (out / "programs.jsonl").read_text().splitlines()}
        self.assertTrue(rows["good"]["built"], rows["good"])
        self.assertTrue(os.access(self.tmp / "work" / "bin" / "good" / "good", os.X_OK))


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
        # BabelStream's dot kernel writing into cudaHostAlloc'd memory: refused at the launch
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


if __name__ == "__main__":
    unittest.main(verbosity=2)  # (a skipped test prints its reason)
