# umstudy: Spack (>= 1.0) recipe for the umbench component (src/umbench).
from spack_repo.umstudy.build_systems.component import UmstudyGpuComponent

from spack.package import *


class Umbench(UmstudyGpuComponent):
    """The P000 (OpenACC Unified Memory vs data directives) and P001 (GH200
    system-allocated vs managed memory) experiments: CUDA programs for every
    experiment, OpenACC builds of the P000 ones (NVHPC: explicit, managed and both
    compile modes; GCC: explicit), and the MPI halo-exchange stencil."""

    version("main", branch="main")

    variant("mpi", default=True, description="The 2-rank halo-exchange stencil (umb-halo)")

    depends_on("mpi", when="+mpi")
    # Every program but the OpenACC ones is CUDA; a CPU-only build has nothing to run.
    conflicts("~cuda", when="~openacc", msg="umbench needs +cuda (or at least +openacc)")

    root_cmakelists_dir = "src/umbench"

    def component_args(self):
        return [self.define("UMSTUDY_MPI", "ON" if self.spec.satisfies("+mpi") else "OFF")]
