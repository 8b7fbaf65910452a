// remd built without CUDA: the GPU path says why it cannot run (exit 77); --cpu works.
#include "remd_host.h"
#include "umstudy/support.h"

RemdBackend *remd_gpu_backend(const RemdSystem &, const RemdOptions &)
{
    ums_unsupported("this remd was built without CUDA (UMSTUDY_CUDA=OFF or no nvcc); --cpu runs the CPU reference");
}
