# umstudy: Spack (>= 1.0) recipe for the vcuda component (src/vcuda).
from spack_repo.umstudy.build_systems.component import UmstudyCudaComponent, bin_files

from spack.package import (
    SkipTest,
    cache_extra_test_sources,
    depends_on,
    install_test_root,
    join_path,
    run_after,
    variant,
    which,
)


class Vcuda(UmstudyCudaComponent):
    """DS-CUDA-style CUDA API remoting: vcuda-server (one per GPU; loads the driver at
    run time), the libcudart.so.N stand-in that runs unmodified `-cudart shared`
    programs on remote GPUs (installed in lib/vcuda: LD_PRELOAD it, or use vcuda-run;
    beside it a libcuda.so.1 that refuses the driver API by name, for the program only),
    and vcuda-bench, P003's copy/launch latency and bandwidth model.  ~cuda builds the
    server and the wire protocol only."""

    variant("ucx", default=False, description="UCX transport (ucx:// endpoints)")

    depends_on("ucx", when="+ucx")
    depends_on("pkgconfig", type="build", when="+ucx")  # UCX is found through ucx.pc
    # vcuda.fuzz_decode builds its libFuzzer target with clang (GCC has no libFuzzer)
    depends_on("llvm+clang", type="test")

    root_cmakelists_dir = "src/vcuda"

    # the stand-in's CPU test driver, run against the installed stand-in and sample
    stand_in_test = "src/vcuda/tests/test_cudart.py"

    def component_args(self):
        args = [self.define_from_variant("VCUDA_UCX", "ucx")]
        if self.run_tests and "llvm" in self.spec:
            args.append(self.define("VCUDA_FUZZ_CC", self.spec["llvm"].prefix.bin.clang))
        return args

    def installed_files(self):
        return bin_files(
            ["vcuda-server", "vcuda-run"]
            + (["vcuda-bench", "vcuda-sample-vector-add"] if self.spec.satisfies("+cuda") else [])
        )

    @run_after("install")
    def cache_stand_in_test(self):
        cache_extra_test_sources(self, [self.stand_in_test])

    def test_server_refuses_without_token(self):
        """vcuda-server refuses to start without an authentication token (exit 2)"""
        self.run_program(
            ["vcuda-server"],
            status=2,
            expect=["token"],
            env={"VCUDA_TOKEN": "", "VCUDA_TOKEN_FILE": ""},
        )

    def test_stand_in(self):
        """the libcudart stand-in with the unmodified sample, CPU only: every imported
        symbol exported, no servers and a dead server reported through the CUDA API"""
        if not self.spec.satisfies("+cuda"):
            raise SkipTest("~cuda: no libcudart stand-in")
        python = which("python3", required=True)
        driver = join_path(install_test_root(self), self.stand_in_test)
        for case in ("symbols", "no_servers", "unreachable"):
            out = python(
                driver,
                case,
                "--lib",
                self.prefix.lib.vcuda,
                "--sample",
                self.prefix.bin.join("vcuda-sample-vector-add"),
                "--programs",
                self.prefix.bin.join("vcuda-bench"),
                output=str,
                error=str,
                fail_on_error=False,
            )
            if python.returncode == 77:
                raise SkipTest(f"{case}: {out.strip()[-300:]}")
            assert python.returncode == 0, f"{case} failed:\n{out[-2000:]}"
