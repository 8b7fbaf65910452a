/* The runtime's per-thread default-stream entry points (libcudart stand-in, see
 * cudart_internal.h).  A program built with `nvcc --default-stream per-thread` (or with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM defined) calls cudaMemcpy_ptds for cudaMemcpy,
 * cudaMemcpyAsync_ptsz for cudaMemcpyAsync, __cudaLaunchKernel_ptsz for <<<...>>> and
 * so on (cuda_runtime_api.h: __CUDART_API_PTDS, __CUDART_API_PTSZ): the same calls,
 * but the default stream, stream 0 or the stream of a call that takes none, is the
 * calling thread's per-thread default stream instead of the legacy one
 * (cudaStreamLegacy still names that).
 *
 * Each entry point here is its plain counterpart run with vcuda_per_thread_call set,
 * under which cudart_stream.c takes stream 0 as cudaStreamPerThread wherever it reads a
 * stream: so a _ptds call is as host-synchronous as its counterpart, on the per-thread
 * stream, and every path (captures, graphs, events, host functions) is the plain one.
 * The entry points whose counterpart vcuda does not remote stay the generated stubs
 * (cudart_stub.h), failing by name. */
#include <cuda_runtime_api.h>

#include "cudart_ptds.h"

#define EXPORT __attribute__((visibility("default")))

/* nvcc's launch stub calls it (crt/device_functions.h); cudart_launch.c defines it. */
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shmem,
                               cudaStream_t stream);

/* name##suffix(params): name(args) with the per-thread default stream.  (Nested: a
 * call made from inside keeps it; user code a call runs, a host function's, is given
 * the program's own default stream back there, see cudart_stream.c.) */
#define PER_THREAD(name, suffix, params, args)                                                 \
    EXPORT cudaError_t name##suffix params;                                                    \
    EXPORT cudaError_t name##suffix params                                                     \
    {                                                                                          \
        int outer = vcuda_per_thread_call;                                                     \
        vcuda_per_thread_call = 1;                                                             \
        cudaError_t e = name args;                                                             \
        vcuda_per_thread_call = outer;                                                         \
        return e;                                                                              \
    }

/* ---- launches -------------------------------------------------------------------------- */
PER_THREAD(__cudaLaunchKernel, _ptsz, (cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t s),
           (k, grid, block, args, shmem, s))
PER_THREAD(cudaLaunchKernel, _ptsz, (const void *f, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t s),
           (f, grid, block, args, shmem, s))
PER_THREAD(cudaLaunchCooperativeKernel, _ptsz,
           (const void *f, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t s), (f, grid, block, args, shmem, s))
PER_THREAD(cudaLaunchKernelExC, _ptsz, (const cudaLaunchConfig_t *config, const void *f, void **args), (config, f, args))
PER_THREAD(cudaLaunchHostFunc, _ptsz, (cudaStream_t s, cudaHostFn_t fn, void *data), (s, fn, data))
PER_THREAD(cudaGraphLaunch, _ptsz, (cudaGraphExec_t ex, cudaStream_t s), (ex, s))
PER_THREAD(cudaGraphUpload, _ptsz, (cudaGraphExec_t ex, cudaStream_t s), (ex, s))

/* ---- events and streams --------------------------------------------------------------- */
PER_THREAD(cudaEventRecord, _ptsz, (cudaEvent_t ev, cudaStream_t s), (ev, s))
PER_THREAD(cudaEventRecordWithFlags, _ptsz, (cudaEvent_t ev, cudaStream_t s, unsigned flags), (ev, s, flags))
PER_THREAD(cudaStreamWaitEvent, _ptsz, (cudaStream_t s, cudaEvent_t ev, unsigned flags), (s, ev, flags))
PER_THREAD(cudaStreamSynchronize, _ptsz, (cudaStream_t s), (s))
PER_THREAD(cudaStreamQuery, _ptsz, (cudaStream_t s), (s))
PER_THREAD(cudaStreamAddCallback, _ptsz, (cudaStream_t s, cudaStreamCallback_t cb, void *data, unsigned flags),
           (s, cb, data, flags))
PER_THREAD(cudaStreamGetFlags, _ptsz, (cudaStream_t s, unsigned *flags), (s, flags))
PER_THREAD(cudaStreamAttachMemAsync, _ptsz, (cudaStream_t s, void *p, size_t n, unsigned flags), (s, p, n, flags))
PER_THREAD(cudaStreamGetPriority, _ptsz, (cudaStream_t s, int *priority), (s, priority))
PER_THREAD(cudaStreamGetDevice, _ptsz, (cudaStream_t s, int *device), (s, device))
PER_THREAD(cudaStreamGetId, _ptsz, (cudaStream_t s, unsigned long long *id), (s, id))
PER_THREAD(cudaStreamGetAttribute, _ptsz, (cudaStream_t s, cudaStreamAttrID id, cudaStreamAttrValue *value), (s, id, value))
PER_THREAD(cudaStreamSetAttribute, _ptsz, (cudaStream_t s, cudaStreamAttrID id, const cudaStreamAttrValue *value),
           (s, id, value))
PER_THREAD(cudaStreamCopyAttributes, _ptsz, (cudaStream_t dst, cudaStream_t src), (dst, src))

/* ---- stream capture ------------------------------------------------------------------- */
PER_THREAD(cudaStreamBeginCapture, _ptsz, (cudaStream_t s, enum cudaStreamCaptureMode mode), (s, mode))
PER_THREAD(cudaStreamBeginCaptureToGraph, _ptsz,
           (cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t *deps, const cudaGraphEdgeData *edges, size_t ndeps,
            enum cudaStreamCaptureMode mode),
           (s, g, deps, edges, ndeps, mode))
PER_THREAD(cudaStreamEndCapture, _ptsz, (cudaStream_t s, cudaGraph_t *g), (s, g))
PER_THREAD(cudaStreamIsCapturing, _ptsz, (cudaStream_t s, enum cudaStreamCaptureStatus *status), (s, status))
PER_THREAD(cudaStreamGetCaptureInfo, _ptsz,
           (cudaStream_t s, enum cudaStreamCaptureStatus *status, unsigned long long *id, cudaGraph_t *g,
            const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges, size_t *ndeps),
           (s, status, id, g, deps, edges, ndeps))
PER_THREAD(cudaStreamUpdateCaptureDependencies, _ptsz,
           (cudaStream_t s, cudaGraphNode_t *deps, const cudaGraphEdgeData *edges, size_t ndeps, unsigned flags),
           (s, deps, edges, ndeps, flags))

/* ---- stream-ordered memory ------------------------------------------------------------ */
PER_THREAD(cudaMallocAsync, _ptsz, (void **p, size_t size, cudaStream_t s), (p, size, s))
PER_THREAD(cudaMallocFromPoolAsync, _ptsz, (void **p, size_t size, cudaMemPool_t pool, cudaStream_t s), (p, size, pool, s))
PER_THREAD(cudaFreeAsync, _ptsz, (void *p, cudaStream_t s), (p, s))
PER_THREAD(cudaMemPrefetchAsync, _ptsz,
           (const void *p, size_t n, struct cudaMemLocation loc, unsigned flags, cudaStream_t s), (p, n, loc, flags, s))
PER_THREAD(cudaMemPrefetchBatchAsync, _ptsz,
           (void **p, size_t *n, size_t count, struct cudaMemLocation *locs, size_t *idxs, size_t nlocs,
            unsigned long long flags, cudaStream_t s), (p, n, count, locs, idxs, nlocs, flags, s))

/* ---- copies and sets into a stream ----------------------------------------------------- */
PER_THREAD(cudaMemcpyAsync, _ptsz, (void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s),
           (dst, src, n, kind, s))
PER_THREAD(cudaMemcpy2DAsync, _ptsz,
           (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,
            cudaStream_t s),
           (dst, dpitch, src, spitch, width, height, kind, s))
PER_THREAD(cudaMemcpy3DAsync, _ptsz, (const struct cudaMemcpy3DParms *p, cudaStream_t s), (p, s))
PER_THREAD(cudaMemcpyToSymbolAsync, _ptsz,
           (const void *sym, const void *src, size_t n, size_t offset, enum cudaMemcpyKind kind, cudaStream_t s),
           (sym, src, n, offset, kind, s))
PER_THREAD(cudaMemcpyFromSymbolAsync, _ptsz,
           (void *dst, const void *sym, size_t n, size_t offset, enum cudaMemcpyKind kind, cudaStream_t s),
           (dst, sym, n, offset, kind, s))
PER_THREAD(cudaMemcpy2DToArrayAsync, _ptsz,
           (cudaArray_t dst, size_t wo, size_t ho, const void *src, size_t spitch, size_t width, size_t height,
            enum cudaMemcpyKind kind, cudaStream_t s),
           (dst, wo, ho, src, spitch, width, height, kind, s))
PER_THREAD(cudaMemcpy2DFromArrayAsync, _ptsz,
           (void *dst, size_t dpitch, cudaArray_const_t src, size_t wo, size_t ho, size_t width, size_t height,
            enum cudaMemcpyKind kind, cudaStream_t s),
           (dst, dpitch, src, wo, ho, width, height, kind, s))
PER_THREAD(cudaMemsetAsync, _ptsz, (void *p, int value, size_t n, cudaStream_t s), (p, value, n, s))
PER_THREAD(cudaMemset2DAsync, _ptsz, (void *p, size_t pitch, int value, size_t width, size_t height, cudaStream_t s),
           (p, pitch, value, width, height, s))
PER_THREAD(cudaMemset3DAsync, _ptsz, (struct cudaPitchedPtr p, int value, struct cudaExtent ext, cudaStream_t s),
           (p, value, ext, s))

/* ---- copies and sets without a stream: host-synchronous as their counterparts -------- */
PER_THREAD(cudaMemcpy, _ptds, (void *dst, const void *src, size_t n, enum cudaMemcpyKind kind), (dst, src, n, kind))
PER_THREAD(cudaMemcpy2D, _ptds,
           (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind),
           (dst, dpitch, src, spitch, width, height, kind))
PER_THREAD(cudaMemcpy3D, _ptds, (const struct cudaMemcpy3DParms *p), (p))
PER_THREAD(cudaMemcpyToSymbol, _ptds, (const void *sym, const void *src, size_t n, size_t offset, enum cudaMemcpyKind kind),
           (sym, src, n, offset, kind))
PER_THREAD(cudaMemcpyFromSymbol, _ptds, (void *dst, const void *sym, size_t n, size_t offset, enum cudaMemcpyKind kind),
           (dst, sym, n, offset, kind))
PER_THREAD(cudaMemcpy2DToArray, _ptds,
           (cudaArray_t dst, size_t wo, size_t ho, const void *src, size_t spitch, size_t width, size_t height,
            enum cudaMemcpyKind kind),
           (dst, wo, ho, src, spitch, width, height, kind))
PER_THREAD(cudaMemcpy2DFromArray, _ptds,
           (void *dst, size_t dpitch, cudaArray_const_t src, size_t wo, size_t ho, size_t width, size_t height,
            enum cudaMemcpyKind kind),
           (dst, dpitch, src, wo, ho, width, height, kind))
PER_THREAD(cudaMemcpy2DArrayToArray, _ptds,
           (cudaArray_t dst, size_t wod, size_t hod, cudaArray_const_t src, size_t wos, size_t hos, size_t width,
            size_t height, enum cudaMemcpyKind kind),
           (dst, wod, hod, src, wos, hos, width, height, kind))
PER_THREAD(cudaMemset, _ptds, (void *p, int value, size_t n), (p, value, n))
PER_THREAD(cudaMemset2D, _ptds, (void *p, size_t pitch, int value, size_t width, size_t height), (p, pitch, value, width, height))
PER_THREAD(cudaMemset3D, _ptds, (struct cudaPitchedPtr p, int value, struct cudaExtent ext), (p, value, ext))

/* the deprecated linear array copies, exported all the same (as in cudart_array.c) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
PER_THREAD(cudaMemcpyToArrayAsync, _ptsz,
           (cudaArray_t dst, size_t wo, size_t ho, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s),
           (dst, wo, ho, src, n, kind, s))
PER_THREAD(cudaMemcpyFromArrayAsync, _ptsz,
           (void *dst, cudaArray_const_t src, size_t wo, size_t ho, size_t n, enum cudaMemcpyKind kind, cudaStream_t s),
           (dst, src, wo, ho, n, kind, s))
PER_THREAD(cudaMemcpyToArray, _ptds,
           (cudaArray_t dst, size_t wo, size_t ho, const void *src, size_t n, enum cudaMemcpyKind kind),
           (dst, wo, ho, src, n, kind))
PER_THREAD(cudaMemcpyFromArray, _ptds,
           (void *dst, cudaArray_const_t src, size_t wo, size_t ho, size_t n, enum cudaMemcpyKind kind),
           (dst, src, wo, ho, n, kind))
#pragma GCC diagnostic pop
