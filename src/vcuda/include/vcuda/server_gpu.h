/* vcuda server GPU side: the handler behind vcuda_server_run for one GPU.
 *
 * The CUDA driver is resolved at run time (dlopen "libcuda.so.1"), so the server builds
 * without the CUDA toolkit and, on a machine without a GPU, refuses to start with the
 * reason.  All clients share the device's primary context: a module image is loaded
 * once and cached under the SHA-256 the server computes itself; each client has its
 * own table of allocations, streams, events, modules and functions, every handle and
 * device range a client names is checked against that table, and everything in it is
 * released when the client goes away.  Kernel arguments cannot be checked (a kernel
 * may dereference anything in the context), as with any shared GPU without MIG/MPS:
 * only clients holding the token are served. */
#ifndef VCUDA_SERVER_GPU_H
#define VCUDA_SERVER_GPU_H

#include "vcuda/server_loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vcuda_gpu vcuda_gpu;

/* Opens the driver and device `ordinal`, retains its primary context.  NULL with the
 * reason in why when there is no driver, no such GPU, or the driver is too old.
 * chunk_bytes: size of the D2H reply chunks (pipelined through two pinned buffers). */
vcuda_gpu *vcuda_gpu_open(int ordinal, size_t chunk_bytes, volatile sig_atomic_t *stop,
                          char *why);
/* The handler for vcuda_server_config (ctx is the vcuda_gpu). */
struct vcuda_handler vcuda_gpu_handler(vcuda_gpu *g);
void vcuda_gpu_close(vcuda_gpu *g);

#ifdef __cplusplus
}
#endif
#endif
