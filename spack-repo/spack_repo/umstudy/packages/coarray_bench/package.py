# umstudy: Spack (>= 1.0) recipe for the P002 benchmarks (src/coarray-bench).
from spack_repo.umstudy.build_systems.component import RELEASE, UmstudyComponent, bin_files

from spack.package import depends_on, variant


class CoarrayBench(UmstudyComponent):
    """P002's programs as the XMP translator emits them, over the xmpc runtime:
    coarray put/get ping-pong with a raw MPI-3 RMA baseline, NPB IS (coarray puts vs
    MPI_Alltoallv) and NPB CG (coarray gets, put-accumulate, two-sided MPI), each
    checked by NPB's official verification."""

    # The runtime is xmp-coarray's installed one (its backends are its variants), of the
    # same version: built and installed once, so a view holds both packages.
    for _v in (RELEASE[0], "main"):
        depends_on(f"xmp-coarray@{_v}", when=f"@{_v}")
    depends_on("mpi")

    # The OpenCoarrays peer ping-pong (peer/cab_pingpong_caf.f90) is a comparison the
    # CMake tests build with `caf`: only with +caf, from Spack's opencoarrays, never from a
    # `caf` that happens to be on the build machine's PATH.
    variant(
        "caf",
        default=False,
        description="Test against the OpenCoarrays peer ping-pong (caf, cafrun) with --test",
    )
    depends_on("opencoarrays", type="test", when="+caf")

    root_cmakelists_dir = "src/coarray-bench"
    always = ("mpi",)
    programs = ["cab-pingpong", "cab-is", "cab-cg"]

    def component_args(self):
        args = [self.define("CAB_XMPC", "INSTALLED")]
        if self.spec.satisfies("+caf") and "opencoarrays" in self.spec:
            bindir = self.spec["opencoarrays"].prefix.bin
            args += [self.define("CAB_CAF", bindir.caf), self.define("CAB_CAFRUN", bindir.cafrun)]
        else:
            # a value that is not *-NOTFOUND: find_program keeps it and does not search
            args += [self.define("CAB_CAF", "OFF"), self.define("CAB_CAFRUN", "OFF")]
        return args

    def installed_files(self):
        return bin_files(self.programs)

    def test_npb_class_s(self):
        """NPB IS and CG class S on 2 images, NPB's official verification"""
        self.check_installed()
        for prog in ("cab-is", "cab-cg"):
            self.run_program(
                self.mpi_launcher(2) + [self.prefix.bin.join(prog), "--class", "S"],
                expect=["verification SUCCESSFUL"],
                env=self.MPI_TEST_ENV,
            )
