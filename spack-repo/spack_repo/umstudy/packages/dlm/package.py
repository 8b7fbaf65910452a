# umstudy: Spack (>= 1.0) recipe for DLM and the P004 benchmarks (src/dlm).
from spack_repo.umstudy.build_systems.component import UmstudyComponent

from spack.package import *


class Dlm(UmstudyComponent):
    """Distributed large memory (P004): user-level remote paging over MPI, one compute
    rank and memory ranks, with the fault engines R3, R58, R77 (SIGSEGV + mprotect)
    and userfaultfd; the paper's microbenchmark, temporal-blocking 7-point stencil and
    STREAM (OpenMP)."""

    version("main", branch="main")

    # MPI_THREAD_MULTIPLE: the fault engines talk MPI from their own threads.
    depends_on("mpi")
    # memfd, userfaultfd and /proc are Linux interfaces.
    requires("platform=linux", msg="DLM pages with Linux memfd, userfaultfd and /proc")

    root_cmakelists_dir = "src/dlm"

    def component_args(self):
        return [self.define("UMSTUDY_MPI", "ON")]
