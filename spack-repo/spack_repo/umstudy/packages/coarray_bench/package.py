# umstudy: Spack (>= 1.0) recipe for the P002 benchmarks (src/coarray-bench).
from spack_repo.umstudy.packages.xmp_coarray.package import XmpCoarray

from spack.package import *


class CoarrayBench(XmpCoarray):
    """P002's programs as the XMP translator emits them, over the xmpc runtime:
    coarray put/get ping-pong with a raw MPI-3 RMA baseline, NPB IS (coarray puts vs
    MPI_Alltoallv) and NPB CG (coarray gets, put-accumulate, two-sided MPI), each
    checked by NPB's official verification."""

    # The programs link the runtime built from the same source tree (src/xmp-coarray,
    # as a subproject), so the backend variants and their dependencies are the
    # runtime's own, inherited from its recipe.
    root_cmakelists_dir = "src/coarray-bench"
