/* The CUDA driver as the vcuda server sees it: the few driver types it uses, declared
 * here so the server needs no CUDA toolkit to build, and the tables of every driver
 * function it resolves at run time (vcuda_gpu_open, server_gpu.c).  One place for the
 * tables: the struct of function pointers is made from them, and so are the weak stubs
 * of the tests' CPU stand-in driver (tests/CMakeLists.txt reads this file). */
#ifndef VCUDA_SERVER_DRIVER_H
#define VCUDA_SERVER_DRIVER_H

/* The few driver types used, declared here so the server needs no CUDA toolkit to
 * build (the driver ABI of these has been stable since CUDA 4). */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;
typedef void *CUgraph, *CUgraphNode, *CUgraphExec;
#include "driver_graph.h"
#include "driver_array.h"

#define DRIVER_FUNCTIONS(X)                                                                  \
    X(cuInit, CUresult, (unsigned))                                                          \
    X(cuDeviceGetCount, CUresult, (int *))                                                   \
    X(cuDeviceGet, CUresult, (int *, int))                                                   \
    X(cuDeviceGetName, CUresult, (char *, int, int))                                         \
    X(cuDeviceTotalMem_v2, CUresult, (size_t *, int))                                        \
    X(cuDeviceGetAttribute, CUresult, (int *, int, int))                                     \
    X(cuDriverGetVersion, CUresult, (int *))                                                 \
    X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, int))                                \
    X(cuDevicePrimaryCtxRelease_v2, CUresult, (int))                                         \
    X(cuCtxSetCurrent, CUresult, (CUcontext))                                                \
    X(cuCtxSynchronize, CUresult, (void))                                                    \
    X(cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))                                      \
    X(cuMemFree_v2, CUresult, (CUdeviceptr))                                                 \
    X(cuMemAllocHost_v2, CUresult, (void **, size_t))                                        \
    X(cuMemFreeHost, CUresult, (void *))                                                     \
    X(cuMemGetInfo_v2, CUresult, (size_t *, size_t *))                                       \
    X(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr, const void *, size_t))                        \
    X(cuMemcpyDtoD_v2, CUresult, (CUdeviceptr, CUdeviceptr, size_t))                         \
    X(cuMemcpyDtoHAsync_v2, CUresult, (void *, CUdeviceptr, size_t, CUstream))               \
    X(cuMemcpyDtoH_v2, CUresult, (void *, CUdeviceptr, size_t))                              \
    X(cuMemsetD8_v2, CUresult, (CUdeviceptr, unsigned char, size_t))                         \
    X(cuStreamCreate, CUresult, (CUstream *, unsigned))                                      \
    X(cuStreamDestroy_v2, CUresult, (CUstream))                                              \
    X(cuStreamSynchronize, CUresult, (CUstream))                                             \
    X(cuEventCreate, CUresult, (CUevent *, unsigned))                                        \
    X(cuEventDestroy_v2, CUresult, (CUevent))                                                \
    X(cuEventRecord, CUresult, (CUevent, CUstream))                                          \
    X(cuEventSynchronize, CUresult, (CUevent))                                               \
    X(cuEventElapsedTime, CUresult, (float *, CUevent, CUevent))                             \
    X(cuModuleLoadData, CUresult, (CUmodule *, const void *))                                \
    X(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))                 \
    X(cuFuncGetParamInfo, CUresult, (CUfunction, size_t, size_t *, size_t *))                \
    X(cuLaunchKernel, CUresult,                                                              \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,     \
       CUstream, void **, void **))                                                          \
    X(cuGetErrorString, CUresult, (CUresult, const char **))                                 \
    X(cuEventQuery, CUresult, (CUevent))                                                     \
    X(cuStreamQuery, CUresult, (CUstream))                                                   \
    X(cuStreamCreateWithPriority, CUresult, (CUstream *, unsigned, int))                     \
    X(cuCtxGetStreamPriorityRange, CUresult, (int *, int *))                                 \
    X(cuCtxSetLimit, CUresult, (int, size_t))                                                \
    X(cuCtxGetLimit, CUresult, (size_t *, int))                                              \
    X(cuFuncGetAttribute, CUresult, (int *, int, CUfunction))                                \
    X(cuFuncSetAttribute, CUresult, (CUfunction, int, int))                                  \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, CUresult,                        \
      (int *, CUfunction, int, size_t, unsigned))                                            \
    X(cuOccupancyAvailableDynamicSMemPerBlock, CUresult, (size_t *, CUfunction, int, int))   \
    X(cuModuleGetGlobal_v2, CUresult, (CUdeviceptr *, size_t *, CUmodule, const char *))     \
    X(cuLaunchCooperativeKernel, CUresult,                                                   \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,     \
       CUstream, void **))                                                                   \
    X(cuLaunchKernelEx, CUresult, (const launch_config *, CUfunction, void **, void **))     \
    X(cuMemAllocPitch_v2, CUresult, (CUdeviceptr *, size_t *, size_t, size_t, unsigned))     \
    X(cuMemsetD2D8Async, CUresult, (CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream))

/* What the multi-tenant design needs besides: stream-ordered copies on each client's
 * own streams, per-client module unloading, and a context per client (--isolation
 * context). */
#define TENANCY_FUNCTIONS(X)                                                                 \
    X(cuModuleUnload, CUresult, (CUmodule))                                                  \
    X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr, const void *, size_t, CUstream))         \
    X(cuMemcpyDtoDAsync_v2, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))          \
    X(cuMemsetD8Async, CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))             \
    X(cuStreamWaitEvent, CUresult, (CUstream, CUevent, unsigned))                            \
    X(cuCtxCreate_v2, CUresult, (CUcontext *, unsigned, int))                                \
    X(cuCtxDestroy_v2, CUresult, (CUcontext))

/* Graphs built and run on the server (server_gpu_graph.c). */
#define GRAPH_FUNCTIONS(X)                                                                   \
    X(cuGraphCreate, CUresult, (CUgraph *, unsigned))                                        \
    X(cuGraphDestroy, CUresult, (CUgraph))                                                   \
    X(cuGraphAddEmptyNode, CUresult, (CUgraphNode *, CUgraph, const CUgraphNode *, size_t))  \
    X(cuGraphAddKernelNode_v2, CUresult,                                                     \
      (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const kernel_node_params *))     \
    X(cuGraphAddMemcpyNode, CUresult,                                                        \
      (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const memcpy3d_params *, CUcontext)) \
    X(cuGraphAddMemsetNode, CUresult,                                                        \
      (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const memset_node_params *, CUcontext)) \
    X(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec *, CUgraph, unsigned long long))   \
    X(cuGraphLaunch, CUresult, (CUgraphExec, CUstream))                                      \
    X(cuGraphExecDestroy, CUresult, (CUgraphExec))                                           \
    X(cuGraphExecKernelNodeSetParams_v2, CUresult, (CUgraphExec, CUgraphNode, const kernel_node_params *))  \
    X(cuGraphAddNode_v2, CUresult,                                                           \
      (CUgraphNode *, CUgraph, const CUgraphNode *, const void *, size_t, graph_node_params *)) \
    X(cuGraphConditionalHandleCreate, CUresult,                                              \
      (unsigned long long *, CUgraph, CUcontext, unsigned, unsigned))                        \
    X(cuGraphAddMemAllocNode, CUresult,                                                      \
      (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, mem_alloc_node_params *))        \
    X(cuGraphAddMemFreeNode, CUresult, (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr)) \
    X(cuGraphAddDependencies_v2, CUresult,                                                   \
      (CUgraph, const CUgraphNode *, const CUgraphNode *, const void *, size_t))             \
    X(cuDeviceGetGraphMemAttribute, CUresult, (int, int, void *))                            \
    X(cuDeviceSetGraphMemAttribute, CUresult, (int, int, void *))                            \
    X(cuDeviceGraphMemTrim, CUresult, (int))

/* CUDA arrays, texture and surface objects (server_gpu_array.c). */
#define ARRAY_FUNCTIONS(X)                                                                   \
    X(cuArray3DCreate_v2, CUresult, (void **, const array3d_desc *))                         \
    X(cuArrayDestroy, CUresult, (void *))                                                    \
    X(cuMemcpy3DAsync_v2, CUresult, (const memcpy3d_params *, CUstream))                     \
    X(cuTexObjectCreate, CUresult,                                                           \
      (unsigned long long *, const resource_desc *, const texture_desc *, const view_desc *)) \
    X(cuTexObjectDestroy, CUresult, (unsigned long long))                                    \
    X(cuSurfObjectCreate, CUresult, (unsigned long long *, const resource_desc *))           \
    X(cuSurfObjectDestroy, CUresult, (unsigned long long))

/* cudaDeviceProp fields beyond attributes. */
#define PROPERTY_FUNCTIONS(X) X(cuDeviceGetUuid_v2, CUresult, (unsigned char *, int))

typedef struct {
#define DECLARE(name, ret, args) ret(*name) args;
    DRIVER_FUNCTIONS(DECLARE)
    TENANCY_FUNCTIONS(DECLARE)
    GRAPH_FUNCTIONS(DECLARE)
    ARRAY_FUNCTIONS(DECLARE)
    PROPERTY_FUNCTIONS(DECLARE)
#undef DECLARE
} driver;

#endif
