# umstudy: Spack (>= 1.0) recipe for the remd component (src/remd).
from spack_repo.umstudy.build_systems.component import (
    UmstudyCudaComponent,
    UmstudyOpenmpComponent,
    bin_files,
)


class Remd(UmstudyCudaComponent, UmstudyOpenmpComponent):
    """P003's replica-exchange molecular dynamics of Lennard-Jones argon: one host
    thread drives every GPU (cudaSetDevice loop), linked against libcudart.so so the
    same binary runs through the vcuda API-remoting layer; a CPU reference (--cpu)
    shares the physics with both kernels (P003's faithful one and a faster one)."""

    root_cmakelists_dir = "src/remd"

    def installed_files(self):
        return bin_files(["remd"])

    def test_cpu_verify_replicas(self):
        """remd --cpu on 8 small replicas, two recomputed and compared"""
        self.check_installed()
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
