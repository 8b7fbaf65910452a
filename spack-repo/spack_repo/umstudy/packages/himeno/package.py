# umstudy: Spack (>= 1.0) recipe for the Himeno component (src/himeno).
from spack_repo.umstudy.build_systems.component import UmstudyGpuComponent, bin_files

from spack.package import SkipTest


class Himeno(UmstudyGpuComponent):
    """RIKEN's Himeno benchmark (Jacobi solver of a 3-D Poisson equation) as umstudy
    builds it: a CPU (OpenMP) reference, a CUDA variant with explicit, managed and
    system-allocated memory, and an OpenACC variant; one per-point function in all."""

    homepage = "https://i.riken.jp/supercom/documents/himenobmt/"

    root_cmakelists_dir = "src/himeno"

    def programs(self):
        spec = self.spec
        return (
            ["himeno-cpu"]
            + (["himeno-cuda"] if spec.satisfies("+cuda") else [])
            + (["himeno-acc"] if spec.satisfies("+openacc") else [])
        )

    def installed_files(self):
        return bin_files(self.programs())

    def test_cpu_verify(self):
        """himeno-cpu on a small grid, gosa and p checked against a CPU recomputation"""
        self.check_installed()
        self.run_program(
            ["himeno-cpu", "--dims", "16x12x20", "--iterations", "4", "--verify"],
            expect=['"verified"'],
        )

    def test_gpu_verify(self):
        """himeno-cuda on a small grid, checked against the CPU (skips without a GPU)"""
        if not self.spec.satisfies("+cuda"):
            raise SkipTest("~cuda: no himeno-cuda")
        self.run_program(
            ["himeno-cuda", "--dims", "16x12x20", "--iterations", "4", "--verify"],
            expect=['"verified"'],
        )
