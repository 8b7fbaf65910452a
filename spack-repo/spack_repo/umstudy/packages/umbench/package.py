# umstudy: Spack (>= 1.0) recipe for the umbench component (src/umbench).
import glob
import os

from spack_repo.umstudy.build_systems.component import UmstudyGpuComponent

from spack.package import SkipTest, conflicts, depends_on, run_after, variant


class Umbench(UmstudyGpuComponent):
    """The P000 (OpenACC Unified Memory vs data directives) and P001 (GH200
    system-allocated vs managed memory) experiments: CUDA programs for every
    experiment, OpenACC builds of the P000 ones (NVHPC: explicit, managed and both
    compile modes; GCC: explicit), and the MPI halo-exchange stencil."""

    variant("mpi", default=True, description="The 2-rank halo-exchange stencil (umb-halo)")

    depends_on("mpi", when="+mpi")
    # Every program but the OpenACC ones is CUDA; a CPU-only build has nothing to run.
    conflicts("~cuda", when="~openacc", msg="umbench needs +cuda (or at least +openacc)")

    root_cmakelists_dir = "src/umbench"

    def installed_programs(self):
        return sorted(os.path.basename(p) for p in glob.glob(self.prefix.bin.join("umb-*")))

    @run_after("install")
    def check_installed_programs(self):
        names = self.installed_programs()
        assert names, "umbench installed no umb-* program"
        if self.spec.satisfies("+cuda"):
            self.check_programs(["umb-modes", "umb-baseline", "umb-patterns", "umb-migration"])
        if self.spec.satisfies("+cuda+mpi"):
            self.check_programs(["umb-halo"])

    def test_help(self):
        """every umb-* program answers --help"""
        for name in self.installed_programs():
            self.run_program([name, "--help"])

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
