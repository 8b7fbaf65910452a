# umstudy: Spack (>= 1.0) recipe for the P002 benchmarks (src/coarray-bench).
from spack_repo.umstudy.build_systems.component import RELEASE, UmstudyComponent

from spack.package import depends_on, run_after


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

    root_cmakelists_dir = "src/coarray-bench"
    always = ("mpi",)
    programs = ["cab-pingpong", "cab-is", "cab-cg"]

    def component_args(self):
        return [self.define("CAB_XMPC", "INSTALLED")]

    @run_after("install")
    def check_installed_programs(self):
        self.check_programs(self.programs)

    def test_npb_class_s(self):
        """NPB IS and CG class S on 2 images, NPB's official verification"""
        self.check_programs(self.programs)
        for prog in ("cab-is", "cab-cg"):
            self.run_program(
                self.mpi_launcher(2) + [self.prefix.bin.join(prog), "--class", "S"],
                expect=["verification SUCCESSFUL"],
                env=self.MPI_TEST_ENV,
            )
