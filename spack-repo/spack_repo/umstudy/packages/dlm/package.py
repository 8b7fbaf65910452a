# umstudy: Spack (>= 1.0) recipe for DLM and the P004 benchmarks (src/dlm).
from spack_repo.umstudy.build_systems.component import UmstudyOpenmpComponent, bin_files

from spack.package import depends_on, requires


class Dlm(UmstudyOpenmpComponent):
    """Distributed large memory (P004): user-level remote paging over MPI, one compute
    rank and memory ranks, with the fault engines R3, R58, R77 (SIGSEGV + mprotect)
    and userfaultfd; the paper's microbenchmark, temporal-blocking 7-point stencil and
    STREAM (OpenMP)."""

    # MPI_THREAD_MULTIPLE: the fault engines talk MPI from their own threads.
    depends_on("mpi")
    # memfd, userfaultfd and /proc are Linux interfaces.
    requires("platform=linux", msg="DLM pages with Linux memfd, userfaultfd and /proc")

    root_cmakelists_dir = "src/dlm"
    always = ("mpi",)
    programs = ["dlm-micro", "dlm-stencil", "dlm-stream", "dlm-timing-cost", "dlm-host-probe"]

    def installed_files(self):
        return bin_files(self.programs)

    def test_micro_small(self):
        """dlm-micro on one compute and one memory rank, every element read back"""
        self.check_installed()
        self.run_program(
            self.mpi_launcher(2) + [self.prefix.bin.join("dlm-micro"), "--elements", "100000"],
            expect=['"mismatches"', "ok"],
            env=self.MPI_TEST_ENV,
        )
