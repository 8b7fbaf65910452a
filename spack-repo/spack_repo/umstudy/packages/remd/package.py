# umstudy: Spack (>= 1.0) recipe for the remd component (src/remd).
from spack_repo.umstudy.build_systems.component import UmstudyGpuComponent

from spack.package import *


class Remd(UmstudyGpuComponent):
    """P003's replica-exchange molecular dynamics of Lennard-Jones argon: one host
    thread drives every GPU (cudaSetDevice loop), linked against libcudart.so so the
    same binary runs through the vcuda API-remoting layer; a CPU reference (--cpu)
    shares the physics with both kernels (P003's faithful one and a faster one)."""

    version("main", branch="main")

    root_cmakelists_dir = "src/remd"
