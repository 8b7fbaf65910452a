# umstudy: the bundle an evaluator installs (`spack install umstudy`: all seven components,
# the GPU architecture from `spack config add packages:all:variants:cuda_arch=90`).
import inspect

from spack_repo.builtin.build_systems.bundle import BundlePackage
from spack_repo.umstudy.build_systems.component import HOMEPAGE, RELEASE

from spack.package import depends_on, license, test_part, variant, version

# Every component, and the bundle variant it needs to have something to build.  The
# bundle passes its +cuda/~cuda on; the components' other variants reach them by
# propagation from the spec the user writes (`umstudy+cuda ++openacc ~~openmp`), and the
# GPU architecture as a preference for all packages (`spack config add
# packages:all:variants:cuda_arch=90`, or the environment's): Spack's concretizer refuses
# to propagate cuda_arch (`cuda_arch==90`, spack/spack#39168).
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
# Components with an mpi variant: the bundle's ~mpi is theirs.
MPI_COMPONENTS = ("umbench",)


class Umstudy(BundlePackage):
    """Reproducibility artifact for five studies of transparent data movement in HPC
    (OpenACC UM, GH200 SAM + Himeno, XMP coarrays, DS-CUDA REMD, DLM paging): every
    benchmark program, built with the same options."""

    homepage = HOMEPAGE

    license("Apache-2.0")

    # A bundle has no source: each component pins the release tarball's sha256.
    version(RELEASE[0], preferred=True)
    version("main")

    # +cuda by default, unlike CudaPackage's components (each ~cuda when installed alone):
    # the studies are of GPUs, and a bundle that quietly left out umbench and vcuda would
    # not be the artifact.  As CudaPackage has it, +cuda needs cuda_arch: without one the
    # components refuse, saying how to give it, or how to ask for ~cuda.  Sticky: the
    # concretizer may not turn it off by itself to get around that refusal (only ~cuda,
    # written by the user, does).
    variant(
        "cuda",
        default=True,
        sticky=True,
        description="The CUDA programs: umbench, vcuda, himeno-cuda, remd's kernels "
        "(~cuda: the CPU programs only, without umbench and vcuda)",
    )
    variant(
        "mpi",
        default=True,
        description="The MPI components: xmp-coarray, coarray-bench, dlm, umbench's halo stencil",
    )

    for _name, _when in COMPONENTS.items():
        for _v in (RELEASE[0], "main"):
            depends_on(f"{_name}@{_v}", when=f"@{_v} {_when}".strip())
        if _name in CUDA_COMPONENTS:
            depends_on(f"{_name}+cuda", when="+cuda")
            if not _when:
                depends_on(f"{_name}~cuda", when="~cuda")
        if _name in MPI_COMPONENTS:
            depends_on(f"{_name}~mpi", when=f"~mpi {_when}".strip())

    def test_components(self):
        """every component's stand-alone tests, against the installed components"""
        ran = []
        for name in COMPONENTS:
            if name not in self.spec:
                continue
            pkg = self.spec[name].package
            # the methods `spack test run <component>` runs: the class's test_* functions
            for method, fn in inspect.getmembers(type(pkg), inspect.isfunction):
                if not method.startswith("test_"):
                    continue
                with test_part(
                    self,
                    f"test_components_{name}_{method[5:]}",
                    purpose=f"{name}: {(fn.__doc__ or method).strip()}",
                ):
                    fn(pkg)
                ran.append(f"{name}.{method}")
        assert ran, "no component tests ran"
