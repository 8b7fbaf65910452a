# umstudy: Spack (>= 1.0) recipe for the XMP coarray runtime (src/xmp-coarray).
import os

from spack_repo.umstudy.build_systems.component import UmstudyComponent

from spack.package import depends_on, find_libraries, join_path, run_after, variant

CONDUITS = ("smp", "mpi", "udp", "ibv", "ucx", "ofi")


class XmpCoarray(UmstudyComponent):
    """The C runtime XcalableMP local-view coarrays translate to (P002): put, get,
    get/put-accumulate on strided sections, sync memory/all/images, and Omni's
    _XMP_coarray_rma_ARRAY entry point, over MPI-3 RMA (always), ARMCI or GASNet.
    Installs libxmpc.a, xmpc/coarray.h and a CMake package (find_package(xmpc))."""

    variant("armci", default=False, description="The ARMCI backend (XMPC_BACKEND=armci)")
    variant(
        "armci_lib",
        values=("armcimpi", "globalarrays"),
        default="armcimpi",
        when="+armci",
        description="ARMCI implementation: ARMCI-MPI or Global Arrays' own",
    )
    variant("gasnet", default=False, description="The GASNet-EX backend (XMPC_BACKEND=gasnet)")
    variant(
        "conduit",
        values=CONDUITS,
        default="mpi",
        when="+gasnet",
        description="GASNet conduit the gasnet backend links",
    )

    # MPI always: the mpi3 backend, ARMCI-MPI, and the launcher of every backend.
    depends_on("mpi")
    depends_on("armcimpi", when="+armci armci_lib=armcimpi")
    depends_on("globalarrays", when="+armci armci_lib=globalarrays")
    for _c in CONDUITS:
        depends_on(f"gasnet conduits={_c}", when=f"+gasnet conduit={_c}")

    root_cmakelists_dir = "src/xmp-coarray"
    always = ("mpi",)

    def component_args(self):
        spec = self.spec
        args = [
            self.define("XMPC_MPI3", True),
            self.define_from_variant("XMPC_ARMCI", "armci"),
            self.define_from_variant("XMPC_GASNET", "gasnet"),
        ]
        if spec.satisfies("+armci armci_lib=armcimpi"):
            args.append(self.define("ARMCI_ROOT", spec["armcimpi"].prefix))
        if spec.satisfies("+armci armci_lib=globalarrays"):
            ga = spec["globalarrays"]
            args.append(self.define("ARMCI_ROOT", ga.prefix))
            # GA's ARMCI sits on its ComEx layer: link both where both exist.
            libs = find_libraries(["libarmci", "libcomex"], root=ga.prefix, recursive=True)
            args.append(self.define("ARMCI_LIBRARIES", libs.joined(";")))
        if spec.satisfies("+gasnet"):
            args.append(self.define("GASNET_ROOT", spec["gasnet"].prefix))
            args.append(self.define("XMPC_GASNET_CONDUIT", spec.variants["conduit"].value))
        return args

    @run_after("install")
    def check_installed_files(self):
        for path in ("lib/libxmpc.a", "include/xmpc/coarray.h", "lib/cmake/xmpc/xmpcConfig.cmake"):
            assert os.path.isfile(join_path(self.prefix, path)), f"{path} is not installed"

    def test_installed_package(self):
        """the library, its header and its CMake package are installed"""
        self.check_installed_files()
