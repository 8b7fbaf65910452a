# umstudy: the bundle an evaluator installs (`spack install umstudy`).
from spack_repo.builtin.build_systems.bundle import BundlePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *

# Components that exist so far; each later component adds itself here, with the
# condition (if any) under which the bundle has something of it to build.
COMPONENTS = ["himeno", "umbench"]
NEEDS = {"umbench": ["+cuda", "~cuda +openacc"]}  # umbench is GPU programs only


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

    # Every variant of the bundle is passed on to each component it pulls in.
    for _name in COMPONENTS:
        for _need in NEEDS.get(_name, [""]):
            depends_on(f"{_name}@main", when=_need or None)
            for _v in ("openmp", "openacc"):
                if _v in _need:
                    continue  # the condition already fixes it
                depends_on(f"{_name}+{_v}", when=f"{_need} +{_v}".strip())
                depends_on(f"{_name}~{_v}", when=f"{_need} ~{_v}".strip())
            if _name in NEEDS:  # the GPU-only components take their own MPI variant
                depends_on(f"{_name}+mpi", when=f"{_need} +mpi")
                depends_on(f"{_name}~mpi", when=f"{_need} ~mpi")
            else:
                depends_on(f"{_name}~cuda", when="~cuda")
            for _arch in CudaPackage.cuda_arch_values:
                depends_on(f"{_name}+cuda cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")
