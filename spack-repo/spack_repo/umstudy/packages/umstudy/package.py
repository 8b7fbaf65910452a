# umstudy: the bundle an evaluator installs (`spack install umstudy ++cuda cuda_arch==90`).
from spack_repo.builtin.build_systems.bundle import BundlePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage
from spack_repo.umstudy.build_systems.component import HOMEPAGE, RELEASE

from spack.package import *

# Every component, and the bundle variant it needs to have something to build.  The
# components' own variants (cuda_arch, openmp, openacc, ...) reach them by propagation
# from the spec the user writes: `umstudy ++cuda cuda_arch==90 ++openacc`.
COMPONENTS = {
    "himeno": "",
    "remd": "",
    "umbench": "+cuda",
    "vcuda": "+cuda",
    "xmp-coarray": "+mpi",
    "coarray-bench": "+mpi",
    "dlm": "+mpi",
}
# Components with a cuda variant: the bundle's +cuda/~cuda is theirs.
CUDA_COMPONENTS = ("himeno", "remd", "umbench", "vcuda")


class Umstudy(BundlePackage, CudaPackage):
    """Reproducibility artifact for five studies of transparent data movement in HPC
    (OpenACC UM, GH200 SAM + Himeno, XMP coarrays, DS-CUDA REMD, DLM paging): every
    benchmark program, built with the same options."""

    homepage = HOMEPAGE

    license("Apache-2.0")

    # A bundle has no source: each component pins the release tarball's sha256.
    version(RELEASE[0], preferred=True)
    version("main")

    variant("mpi", default=True, description="The MPI components: xmp-coarray, coarray-bench, dlm")

    conflicts(
        "cuda_arch=none",
        when="+cuda",
        msg="name the GPU architecture for every component: umstudy ++cuda cuda_arch==90",
    )

    for _name, _when in COMPONENTS.items():
        for _v in (RELEASE[0], "main"):
            depends_on(f"{_name}@{_v}", when=f"@{_v} {_when}".strip())
        if _name in CUDA_COMPONENTS:
            depends_on(f"{_name}+cuda", when="+cuda")
            if not _when:
                depends_on(f"{_name}~cuda", when="~cuda")

    def test_components(self):
        """every component's stand-alone tests, against the installed components"""
        ran = []
        for name in COMPONENTS:
            if name not in self.spec:
                continue
            pkg = self.spec[name].package
            for method in sorted(m for m in dir(pkg) if m.startswith("test_")):
                with test_part(self, f"test_components_{name}_{method[5:]}",
                               purpose=f"{name}: {getattr(pkg, method).__doc__.strip()}"):
                    getattr(pkg, method)()
                ran.append(f"{name}.{method}")
        assert ran, "no component tests ran"
