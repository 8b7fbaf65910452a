# umstudy: the bundle an evaluator installs (`spack install umstudy`).
from spack_repo.builtin.build_systems.bundle import BundlePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *

# Components that exist so far; each later component adds itself here.
COMPONENTS = ["himeno"]


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

    conflicts("cuda_arch=none", when="+cuda", msg="name the GPU architecture: cuda_arch=90 ...")

    for _name in COMPONENTS:
        depends_on(f"{_name}@main")
        depends_on(f"{_name}+openmp", when="+openmp")
        depends_on(f"{_name}~openmp", when="~openmp")
        depends_on(f"{_name}~cuda", when="~cuda")
        for _arch in CudaPackage.cuda_arch_values:
            depends_on(f"{_name}+cuda cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")
