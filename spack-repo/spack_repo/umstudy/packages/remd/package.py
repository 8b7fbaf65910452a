# umstudy: Spack (>= 1.0) recipe for the remd component (src/remd).
from spack_repo.umstudy.build_systems.component import UmstudyCudaComponent, UmstudyOpenmpComponent

from spack.package import run_after


class Remd(UmstudyCudaComponent, UmstudyOpenmpComponent):
    """P003's replica-exchange molecular dynamics of Lennard-Jones argon: one host
    thread drives every GPU (cudaSetDevice loop), linked against libcudart.so so the
    same binary runs through the vcuda API-remoting layer; a CPU reference (--cpu)
    shares the physics with both kernels (P003's faithful one and a faster one)."""

    root_cmakelists_dir = "src/remd"

    @run_after("install")
    def check_installed_programs(self):
        self.check_programs(["remd"])

    def test_cpu_verify_replicas(self):
        """remd --cpu on 8 small replicas, two recomputed and compared"""
        self.check_programs(["remd"])
        self.run_program(
            [
                "remd",
                "--cpu",
                "--cells",
                "4",
                "--replicas",
                "8",
                "--exchange-steps",
                "20",
                "--iterations",
                "3",
                "--bins",
                "4",
                "--verify-replicas",
                "2",
            ],
            expect=['"verified"'],
        )
