# umstudy: Spack (>= 1.0) recipe for the umbench component (src/umbench).
import glob
import os

from spack_repo.umstudy.build_systems.component import UmstudyGpuComponent, bin_files

from spack.package import (
    SkipTest,
    cache_extra_test_sources,
    conflicts,
    depends_on,
    install_test_root,
    join_path,
    run_after,
    variant,
    which,
)

CUDA_PROGRAMS = [
    "umb-modes",
    "umb-fraction",
    "umb-stride",
    "umb-baseline",
    "umb-patterns",
    "umb-migration",
]
# small runs of the OpenACC programs (as src/umbench/tests runs them on the host)
ACC_SMALL = {
    "modes": ["--size", "1M"],
    "fraction": ["--size", "1M", "--step", "25"],
    "stride": ["--size", "1M", "--min", "4K", "--max", "64K", "--step", "4K"],
}


class Umbench(UmstudyGpuComponent):
    """The P000 (OpenACC Unified Memory vs data directives) and P001 (GH200
    system-allocated vs managed memory) experiments: CUDA programs for every
    experiment, OpenACC builds of the P000 ones (NVHPC: explicit, managed and both
    compile modes; GCC: explicit), and the MPI halo-exchange stencil."""

    # Every program is a GPU program: unlike the other components (CudaPackage's ~cuda
    # default), umbench builds its CUDA programs unless told ~cuda, so that `spack install
    # umbench` asks for the GPU architecture rather than for +cuda.
    variant("cuda", default=True, description="Build with CUDA")
    variant("mpi", default=True, description="The 2-rank halo-exchange stencil (umb-halo)")

    depends_on("mpi", when="+mpi")
    conflicts(
        "~cuda",
        when="~openacc",
        msg="umbench's programs are GPU programs: with ~cuda it builds only its OpenACC ones "
        "(+openacc, with NVHPC or GCC+nvptx); without either there is nothing to build",
    )

    root_cmakelists_dir = "src/umbench"

    # the CLI contract of every program, run against the installed ones
    cli_tests = ["src/umbench/tests/test_cli.py", "src/support/tests/cli_contract.py"]

    def installed_files(self):
        spec = self.spec
        return bin_files(
            (CUDA_PROGRAMS if spec.satisfies("+cuda") else [])
            + (["umb-halo"] if spec.satisfies("+cuda+mpi") else [])
            + (["umb-modes-acc-explicit"] if spec.satisfies("+openacc") else [])
        )

    @run_after("install")
    def cache_cli_tests(self):
        cache_extra_test_sources(self, self.cli_tests)

    def installed_programs(self):
        return sorted(os.path.basename(p) for p in glob.glob(self.prefix.bin.join("umb-*")))

    def test_cli_contract(self):
        """every umb-* program: --help, bad input exits 2 with a message, and a small run
        that is verified on a GPU or, without one, exits 77 with its reason"""
        self.check_installed()
        driver = join_path(install_test_root(self), self.cli_tests[0])
        if not os.path.isfile(driver):
            raise SkipTest("installed without the CLI test (by an older recipe): reinstall it")
        python = which("python3", required=True)
        for name in self.installed_programs():
            launcher = self.mpi_launcher(2) if name.startswith("umb-halo") else []
            out = python(
                driver,
                self.prefix.bin.join(name),
                *launcher,
                output=str,
                error=str,
                fail_on_error=False,
            )
            print(out)  # what each program did: verified, or its exit-77 reason
            assert python.returncode == 0, f"{name}:\n{out[-2000:]}"

    def test_openacc_on_the_host(self):
        """the OpenACC programs on the CPU (UMB_ACC_ALLOW_HOST=1), each result verified"""
        if not self.spec.satisfies("+openacc"):
            raise SkipTest("~openacc: no OpenACC programs")
        for name in self.installed_programs():
            kind = name.split("-")[1]
            if "-acc-" in name and kind in ACC_SMALL:
                self.run_program(
                    [name] + ACC_SMALL[kind],
                    expect=['"verified":true'],
                    env={"UMB_ACC_ALLOW_HOST": "1"},
                )

    def test_small_run(self):
        """umb-modes on 1 MiB: runs, or exits 77 where there is no GPU (a skip)"""
        if not self.spec.satisfies("+cuda"):
            raise SkipTest("~cuda: no umb-modes")
        self.run_program(["umb-modes", "--size", "1M"])

    def test_halo_small(self):
        """umb-halo on 2 MPI ranks, 64^2, verified (exit 77 without a GPU: a skip)"""
        if not self.spec.satisfies("+cuda+mpi"):
            raise SkipTest("no umb-halo (needs +cuda +mpi)")
        self.run_program(
            self.mpi_launcher(2)
            + [self.prefix.bin.join("umb-halo"), "--n", "64", "--iterations", "2", "--verify"],
            env=self.MPI_TEST_ENV,
        )
