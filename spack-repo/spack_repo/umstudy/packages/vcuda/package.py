# umstudy: Spack (>= 1.0) recipe for the vcuda component (src/vcuda).
from spack_repo.umstudy.build_systems.component import UmstudyCudaComponent

from spack.package import *


class Vcuda(UmstudyCudaComponent):
    """DS-CUDA-style CUDA API remoting: vcuda-server (one per GPU; loads the driver at
    run time), the libcudart.so.N stand-in that runs unmodified `-cudart shared`
    programs on remote GPUs (installed in lib/vcuda: LD_PRELOAD it, or use vcuda-run),
    and vcuda-bench, P003's copy/launch latency and bandwidth model.  ~cuda builds the
    server and the wire protocol only."""

    version("main", branch="main")

    root_cmakelists_dir = "src/vcuda"
