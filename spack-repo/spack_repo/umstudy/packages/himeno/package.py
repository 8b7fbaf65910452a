# umstudy: Spack (>= 1.0) recipe for the Himeno component (src/himeno).
from spack_repo.umstudy.build_systems.component import UmstudyGpuComponent

from spack.package import *


class Himeno(UmstudyGpuComponent):
    """RIKEN's Himeno benchmark (Jacobi solver of a 3-D Poisson equation) as umstudy
    builds it: a CPU (OpenMP) reference, a CUDA variant with explicit, managed and
    system-allocated memory, and an OpenACC variant; one per-point function in all."""

    homepage = "https://i.riken.jp/supercom/documents/himenobmt/"

    version("main", branch="main")

    root_cmakelists_dir = "src/himeno"
