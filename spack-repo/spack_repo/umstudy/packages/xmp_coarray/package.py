# umstudy: Spack (>= 1.0) recipe for the XMP coarray runtime (src/xmp-coarray).
import os
import re

from spack_repo.umstudy.build_systems.component import UmstudyComponent

from spack.package import (
    SkipTest,
    cache_extra_test_sources,
    depends_on,
    find_libraries,
    install_test_root,
    join_path,
    run_after,
    variant,
    which,
)

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
    # the stand-alone test compiles a program against the installed library
    test_requires_compiler = True

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

    # the conformance test the stand-alone test builds against the installed library
    test_sources = ["src/xmp-coarray/tests", "src/support"]

    def installed_files(self):
        return ["lib/libxmpc.a", "include/xmpc/coarray.h", "lib/cmake/xmpc/xmpcConfig.cmake"]

    @run_after("install")
    def cache_test_sources(self):
        cache_extra_test_sources(self, self.test_sources)

    def installed_link_libraries(self):
        """What libxmpc.a links besides MPI and the support code, as its CMake package
        records it (ARMCI, GASNet libraries)."""
        config = open(join_path(self.prefix.lib, "cmake", "xmpc", "xmpcConfig.cmake")).read()
        line = re.search(r'INTERFACE_LINK_LIBRARIES "([^"]*)"', config).group(1)
        return [lib for lib in line.split(";") if lib and "::" not in lib]

    def test_sync_two_images(self):
        """xmpc's sync conformance test, built with the MPI's mpicc against the installed
        library and header, on 2 images over the mpi3 backend"""
        self.check_installed()
        src = join_path(install_test_root(self), "src")
        if not os.path.isdir(src):
            raise SkipTest("installed without the test sources (by an older recipe): reinstall it")
        exe = join_path(src, "xmp-coarray", "tests", "test_sync")
        mpicc = which(self.spec["mpi"].prefix.bin.mpicc, required=True)
        mpicc(
            f"-I{self.prefix.include}",
            f"-I{join_path(src, 'support', 'include')}",
            join_path(src, "xmp-coarray", "tests", "test_sync.c"),
            join_path(src, "support", "src", "support.c"),
            join_path(self.prefix.lib, "libxmpc.a"),
            *self.installed_link_libraries(),
            "-lm",
            "-o",
            exe,
        )
        self.run_program(
            self.mpi_launcher(2) + [exe],
            expect=['"passed"', "checks_image1"],
            env=dict(self.MPI_TEST_ENV, XMPC_BACKEND="mpi3"),
        )
