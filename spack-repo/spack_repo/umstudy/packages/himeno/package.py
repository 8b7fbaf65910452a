# umstudy: Spack (>= 1.0) recipe for the Himeno component (src/himeno).
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


class Himeno(CMakePackage, CudaPackage):
    """RIKEN's Himeno benchmark (Jacobi solver of a 3-D Poisson equation) as umstudy
    builds it: a CPU (OpenMP) reference, a CUDA variant with explicit, managed and
    system-allocated memory, and an OpenACC variant; one per-point function in all."""

    homepage = "https://i.riken.jp/supercom/documents/himenobmt/"
    git = "https://github.com/umstudy/umstudy.git"
    maintainers("umstudy")

    license("Apache-2.0")

    # The artifact is built from its checkout: systems/<name>/spack.yaml `develop`s it.
    version("main", branch="main")

    variant("openmp", default=True, description="OpenMP in the CPU variant and host code")
    variant(
        "openacc",
        default=False,
        description="OpenACC variant (himeno-acc): NVHPC, or GCC with nvptx offloading",
    )

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.24:", type="build")

    conflicts("cuda_arch=none", when="+cuda", msg="name the GPU architecture: cuda_arch=90 ...")

    root_cmakelists_dir = "src/himeno"

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define("UMSTUDY_CUDA", "ON" if spec.satisfies("+cuda") else "OFF"),
            self.define("UMSTUDY_OPENMP", "ON" if spec.satisfies("+openmp") else "OFF"),
            self.define("UMSTUDY_OPENACC", "ON" if spec.satisfies("+openacc") else "OFF"),
            self.define("BUILD_TESTING", self.run_tests),
        ]
        if spec.satisfies("+cuda"):
            args.append(self.define("CMAKE_CUDA_ARCHITECTURES", spec.variants["cuda_arch"].value))
        return args
