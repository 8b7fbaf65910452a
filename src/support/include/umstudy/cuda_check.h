/* CUDA error checks shared by every CUDA program: a failed call prints where and why
 * (stderr and a JSON error line) and exits, so a run never reports numbers computed
 * after an error. */
#ifndef UMSTUDY_CUDA_CHECK_H
#define UMSTUDY_CUDA_CHECK_H

#include <cuda_runtime.h>
#include "umstudy/support.h"

#define UMS_CUDA_CHECK(call)                                                           \
    do {                                                                               \
        cudaError_t ums_err_ = (call);                                                 \
        if (ums_err_ != cudaSuccess)                                                   \
            ums_fail("%s:%d: %s failed: %s (%s)", __FILE__, __LINE__, #call,           \
                     cudaGetErrorName(ums_err_), cudaGetErrorString(ums_err_));        \
    } while (0)

/* After a kernel launch: catches launch-configuration errors at once and, with
 * sync != 0, execution errors too. */
#define UMS_CUDA_CHECK_LAUNCH(sync)                                                    \
    do {                                                                               \
        UMS_CUDA_CHECK(cudaGetLastError());                                            \
        if (sync) UMS_CUDA_CHECK(cudaDeviceSynchronize());                             \
    } while (0)

#endif
