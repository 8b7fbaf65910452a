# umstudy: what every recipe shares (one place for the release, the source, the common
# variants, the CMake options they map to, and the stand-alone test helpers).  A
# component recipe sets `root_cmakelists_dir` and adds its own variants, dependencies
# and `test_*` methods.
import os
import re

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import (
    Executable,
    SkipTest,
    conflicts,
    depends_on,
    join_path,
    license,
    requires,
    set_env,
    variant,
    version,
)

# The release every recipe pins: the tarball `make dist` (spack-repo/dist.py) makes from
# the checkout, reproducibly.  After a change to src/ or LICENSE, `make spack-pin`
# rewrites this line (spack-repo/tests check that it matches the checkout).
RELEASE = ("0.1.0", "f49c145f33c52ef388b9e24562b757d1505073a071672587ed13db3e1aaee03b")
HOMEPAGE = "https://github.com/umstudy/umstudy"

# The CMake options every component has (src/cmake/UmstudyCommon.cmake): each is passed
# ON or OFF, never left to AUTO-detect what happens to be on the build machine.
FEATURES = ("cuda", "openmp", "mpi", "openacc")

OPENACC_MSG = (
    "+openacc needs an OpenACC compiler: NVHPC (%nvhpc) or GCC built with nvptx offloading "
    "(%gcc+nvptx), known to Spack (spack compiler find); without one, build ~openacc"
)


class UmstudyComponent(CMakePackage):
    """Base of the umstudy component recipes (not a package itself)."""

    homepage = HOMEPAGE
    url = f"{HOMEPAGE}/releases/download/v{RELEASE[0]}/umstudy-{RELEASE[0]}.tar.gz"
    git = f"{HOMEPAGE}.git"

    license("Apache-2.0")

    version(RELEASE[0], sha256=RELEASE[1], preferred=True)
    # the development branch; systems/<name>/spack.yaml builds it from this checkout
    version("main", branch="main")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.24:", type="build")
    # every test driver under src/*/tests is a Python script
    depends_on("python@3.8:", type="test")

    #: UMSTUDY_* features this component always builds with (it has no variant for them)
    always = ()
    #: what under src/ this component is built from (see detect_dev_src_change)

    def component_args(self):
        """CMake options of the component's own variants (overridden where it has some)."""
        return []

    def installed_files(self):
        """What an install of this spec must leave in its prefix (relative paths)."""
        return []

    @property
    def sanity_check_is_file(self):
        # Spack's own post-install check (sanity_check_prefix): a missing file fails the
        # install, naming it.
        return self.installed_files()

    def cmake_args(self):
        args = [self.define("BUILD_TESTING", self.run_tests)]
        for feature in FEATURES:
            option = f"UMSTUDY_{feature.upper()}"
            if feature in self.spec.variants:
                args.append(self.define_from_variant(option, feature))
            else:
                args.append(self.define(option, feature in self.always))
        # the declared test Python (absent when an installed spec is rebuilt with tests)
        if self.run_tests and "python" in self.spec:
            args.append(self.define("Python3_EXECUTABLE", self.spec["python"].command.path))
        return args + self.component_args()

    @property
    def dev_sources(self):
        """The directories of a `develop` checkout this component is built from."""
        return [self.root_cmakelists_dir, "src/cmake", "src/support"]

    def detect_dev_src_change(self):
        # A `develop` checkout is the whole repository (output/, build/, the other
        # components...): only a change to what this component builds from reinstalls it,
        # so an unchanged environment reinstalls nothing.
        dev_path = self.spec.variants["dev_path"].value
        installed = os.path.getmtime(os.path.join(self.prefix, ".spack", "spec.json"))
        return any(_newer_than(os.path.join(dev_path, d), installed) for d in self.dev_sources)

    # ---- stand-alone tests (spack test run) -----------------------------------------
    def check_installed(self):
        """Every file the install left (installed_files) is still there."""
        for path in self.installed_files():
            assert os.path.isfile(join_path(self.prefix, path)), f"{path} is not installed"

    def run_program(self, args, expect=(), status=0, env=None):
        """Runs a program (args[0] under prefix/bin, or a launcher command) and checks its
        exit status and that its output (stdout + stderr) contains each `expect` text.
        Exit status 77 is the programs' "cannot run here" (no GPU...): a skip."""
        exe = Executable(args[0] if os.path.isabs(args[0]) else self.prefix.bin.join(args[0]))
        with set_env(**(env or {})):
            out = exe(*args[1:], output=str, error=str, fail_on_error=False)
        if exe.returncode == 77 and status != 77:
            # the program's own reason: its JSON "reason", else its last line
            program = next((a for a in args if str(a).startswith(self.prefix)), args[0])
            reasons = re.findall(r'"reason":\s*"([^"]*)"', out)
            lines = [line for line in out.splitlines() if line.strip()]
            reason = reasons[-1] if reasons else (lines[-1] if lines else "no reason given")
            raise SkipTest(f"{os.path.basename(str(program))} cannot run here: {reason}")
        assert (
            exe.returncode == status
        ), f"exit {exe.returncode}, expected {status}:\n{out[-2000:]}"
        for text in expect:
            assert text in out, f"{text!r} not in the output:\n{out[-2000:]}"
        return out

    def mpi_launcher(self, ranks):
        """The MPI's own launcher for `ranks` ranks on this node, allowed to oversubscribe
        (Open MPI) and to run as root (containers)."""
        mpi = self.spec["mpi"]
        launcher = [mpi.prefix.bin.mpiexec, "-n", str(ranks)]
        if mpi.satisfies("openmpi"):
            launcher.append("--oversubscribe")
        return launcher

    #: environment of MPI programs in tests: Open MPI refuses root without it
    MPI_TEST_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def _newer_than(path, when):
    """Whether anything under `path` (itself included) was modified after `when`."""
    if not os.path.exists(path) or os.stat(path).st_mtime > when:
        return True
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                if os.lstat(os.path.join(root, name)).st_mtime > when:
                    return True
            except OSError:
                continue
    return False


def bin_files(names):
    return [join_path("bin", name) for name in names]


class UmstudyCudaComponent(UmstudyComponent, CudaPackage):
    """A component with CUDA programs (+cuda)."""

    conflicts(
        "cuda_arch=none",
        when="+cuda",
        msg="the CUDA programs (+cuda; the umstudy bundle's default) need the GPU architecture: "
        "for every package, spack config add packages:all:variants:cuda_arch=90 (H100, GH200; "
        "80 A100, 70 V100), or cuda_arch=90 on this spec; or ~cuda for the CPU programs only "
        "(spack install umstudy~cuda: no umbench, no vcuda)",
    )

    def cmake_args(self):
        args = super().cmake_args()
        if self.spec.satisfies("+cuda"):
            cuda = self.spec["cuda"]
            args += [
                self.define("CMAKE_CUDA_ARCHITECTURES", self.spec.variants["cuda_arch"].value),
                self.define("CMAKE_CUDA_COMPILER", cuda.prefix.bin.nvcc),
                self.define("CUDAToolkit_ROOT", cuda.prefix),
            ]
        return args


class UmstudyOpenmpComponent(UmstudyComponent):
    """A component with OpenMP in its CPU code (UMSTUDY_OPENMP)."""

    variant("openmp", default=True, description="OpenMP in CPU code")


class UmstudyGpuComponent(UmstudyCudaComponent, UmstudyOpenmpComponent):
    """A component with OpenACC variants besides CUDA and OpenMP host code."""

    variant(
        "openacc",
        default=False,
        description="OpenACC variants: NVHPC (all compile modes), or GCC with nvptx offloading",
    )
    # UmstudyCommon.cmake builds OpenACC offload code with these two only: NVHPC, or GCC
    # built with nvptx offloading.  A conflict, not a requirement, so that a machine with
    # neither gets this message rather than the solver's about compilers it may not build.
    requires("%c=nvhpc", "%c=gcc", policy="one_of", when="+openacc", msg=OPENACC_MSG)
    conflicts("%c=gcc~nvptx", when="+openacc", msg=OPENACC_MSG)
