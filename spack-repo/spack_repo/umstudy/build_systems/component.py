# umstudy: what every component recipe shares (one place for the source, the version,
# the common variants and the CMake options they map to).  A component recipe sets
# `root_cmakelists_dir` and adds its own variants and dependencies.
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


class UmstudyComponent(CMakePackage):
    """Base of the umstudy component recipes (not a package itself)."""

    homepage = "https://github.com/umstudy/umstudy"
    git = "https://github.com/umstudy/umstudy.git"
    maintainers("umstudy")

    license("Apache-2.0")

    # The artifact is built from its checkout: systems/<name>/spack.yaml `develop`s it.
    version("main", branch="main")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.24:", type="build")

    def component_args(self):
        """CMake options of the component's own variants (overridden where it has some)."""
        return []

    def cmake_args(self):
        return [self.define("BUILD_TESTING", self.run_tests)] + self.component_args()


class UmstudyCudaComponent(UmstudyComponent, CudaPackage):
    """A component with CUDA programs (+cuda) and nothing else GPU-specific."""

    conflicts("cuda_arch=none", when="+cuda", msg="name the GPU architecture: cuda_arch=90 ...")

    def cmake_args(self):
        spec = self.spec
        args = [self.define("UMSTUDY_CUDA", "ON" if spec.satisfies("+cuda") else "OFF")]
        if spec.satisfies("+cuda"):
            args.append(self.define("CMAKE_CUDA_ARCHITECTURES", spec.variants["cuda_arch"].value))
        return args + super().cmake_args()


class UmstudyGpuComponent(UmstudyCudaComponent):
    """A component with GPU variants: CUDA, OpenACC, and OpenMP host code."""

    variant("openmp", default=True, description="OpenMP in CPU code")
    variant(
        "openacc",
        default=False,
        description="OpenACC variants: NVHPC (all compile modes), or GCC with nvptx offloading",
    )

    def cmake_args(self):
        on = lambda v: "ON" if self.spec.satisfies(v) else "OFF"  # noqa: E731
        return [
            self.define("UMSTUDY_OPENMP", on("+openmp")),
            self.define("UMSTUDY_OPENACC", on("+openacc")),
        ] + super().cmake_args()
