# umstudy: Spack (>= 1.0) recipe for the XMP coarray runtime (src/xmp-coarray).
from spack_repo.umstudy.build_systems.component import UmstudyComponent

from spack.package import *


class XmpCoarray(UmstudyComponent):
    """The C runtime XcalableMP local-view coarrays translate to (P002): put, get,
    get/put-accumulate on strided sections, sync memory/all/images, and Omni's
    _XMP_coarray_rma_ARRAY entry point, over MPI-3 RMA, ARMCI or GASNet."""

    version("main", branch="main")

    variant(
        "backends",
        values=("mpi3", "armci", "gasnet"),
        default="mpi3,armci",
        multi=True,
        description="Transports built into the library (XMPC_BACKEND picks one at run time)",
    )
    variant(
        "armci",
        values=("armcimpi", "globalarrays"),
        default="armcimpi",
        when="backends=armci",
        description="ARMCI implementation: ARMCI-MPI or Global Arrays' own",
    )
    variant(
        "conduit",
        values=("smp", "mpi", "udp", "ibv", "ucx", "ofi"),
        default="mpi",
        when="backends=gasnet",
        description="GASNet conduit the gasnet backend links",
    )

    # MPI always: the mpi3 backend, ARMCI-MPI, and the launcher of every backend.
    depends_on("mpi")
    depends_on("armcimpi", when="backends=armci armci=armcimpi")
    depends_on("globalarrays", when="backends=armci armci=globalarrays")
    for _c in ("smp", "mpi", "udp", "ibv", "ucx", "ofi"):
        depends_on(f"gasnet conduits={_c}", when=f"backends=gasnet conduit={_c}")

    root_cmakelists_dir = "src/xmp-coarray"

    def component_args(self):
        spec = self.spec
        on = lambda b: "ON" if spec.satisfies(f"backends={b}") else "OFF"  # noqa: E731
        args = [self.define(f"XMPC_{b.upper()}", on(b)) for b in ("mpi3", "armci", "gasnet")]
        args.append(self.define("UMSTUDY_MPI", "ON"))
        if spec.satisfies("backends=armci armci=armcimpi"):
            args.append(self.define("ARMCI_ROOT", spec["armcimpi"].prefix))
        if spec.satisfies("backends=armci armci=globalarrays"):
            ga = spec["globalarrays"]
            args.append(self.define("ARMCI_ROOT", ga.prefix))
            # GA's ARMCI sits on its ComEx layer: link both where both exist.
            libs = find_libraries(["libarmci", "libcomex"], root=ga.prefix, recursive=True)
            args.append(self.define("ARMCI_LIBRARIES", libs.joined(";")))
        if spec.satisfies("backends=gasnet"):
            args.append(self.define("GASNET_ROOT", spec["gasnet"].prefix))
            args.append(self.define("XMPC_GASNET_CONDUIT", spec.variants["conduit"].value))
        return args
