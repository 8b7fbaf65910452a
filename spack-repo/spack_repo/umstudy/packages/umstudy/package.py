# umstudy: the bundle an evaluator installs (`spack install umstudy`).
from spack_repo.builtin.build_systems.bundle import BundlePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *

# Components that exist so far; each later component adds itself here.  gpu: takes the
# bundle's cuda/openmp/openacc variants; mpi: takes its mpi variant; needs: the bundle
# conditions under which it has something to build (any one of them).
COMPONENTS = {
    "himeno": {"gpu": True},
    "umbench": {"gpu": True, "mpi": True, "needs": ["+cuda", "~cuda +openacc"]},
    "xmp-coarray": {"needs": ["+mpi"]},
    "coarray-bench": {"needs": ["+mpi"]},
    # cuda: takes the bundle's cuda_arch only (no OpenMP/OpenACC variants)
    "vcuda": {"cuda": True, "needs": ["+cuda"]},
    "remd": {"gpu": True},
    "dlm": {"needs": ["+mpi"]},
}


class Umstudy(BundlePackage, CudaPackage):
    """Reproducibility artifact for five studies of transparent data movement in HPC
    (OpenACC UM, GH200 SAM + Himeno, XMP coarrays, DS-CUDA REMD, DLM paging): every
    benchmark program, built with the same options."""

    homepage = "https://github.com/umstudy/umstudy"
    git = "https://github.com/umstudy/umstudy.git"
    maintainers("umstudy")

    license("Apache-2.0")

    version("main", branch="main")

    variant("openmp", default=True, description="OpenMP in CPU code")
    variant("mpi", default=True, description="MPI programs (umbench's halo stencil, ...)")
    variant("openacc", default=False, description="OpenACC variants (NVHPC, or GCC nvptx)")

    conflicts("cuda_arch=none", when="+cuda", msg="name the GPU architecture: cuda_arch=90 ...")

    # Every variant of the bundle is passed on to each component that has it.
    for _name, _c in COMPONENTS.items():
        for _need in _c.get("needs", [""]):
            depends_on(f"{_name}@main", when=_need or None)
            _opts = (("openmp", "openacc") if _c.get("gpu") else ()) + (("mpi",) if _c.get("mpi") else ())
            for _v in _opts:
                if _v in _need:
                    continue  # the condition already fixes it
                depends_on(f"{_name}+{_v}", when=f"{_need} +{_v}".strip())
                depends_on(f"{_name}~{_v}", when=f"{_need} ~{_v}".strip())
            if (_c.get("gpu") or _c.get("cuda")) and "~cuda" not in _need:
                _rest = " ".join(t for t in _need.split() if t != "+cuda")
                if "+cuda" not in _need:
                    depends_on(f"{_name}~cuda", when=f"{_rest} ~cuda".strip())
                for _arch in CudaPackage.cuda_arch_values:
                    depends_on(f"{_name}+cuda cuda_arch={_arch}", when=f"{_rest} +cuda cuda_arch={_arch}".strip())
