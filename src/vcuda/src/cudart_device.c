/* Device management, attributes and properties, limits and flags, peer access,
 * versions and error strings of the libcudart stand-in.  Device properties and
 * attributes are the server's device's, except the ones that describe memory the
 * network cannot carry (cudart_managed.c).  Device settings without effect on results
 * (cache and shared-memory configuration) are kept per device here, where they are
 * asked back. */
#define _GNU_SOURCE
#include "cudart_internal.h"

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    cudaError_t e = rt_ready();
    if (!count) return rt_record(cudaErrorInvalidValue);
    *count = e ? 0 : vcuda_client_device_count();
    return rt_record(e);
}

EXPORT cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (device < 0 || device >= vcuda_client_device_count()) return rt_record(cudaErrorInvalidDevice);
    rt_current_device = device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDevice(int *device)
{
    if (!device) return rt_record(cudaErrorInvalidValue);
    *device = rt_current_device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    vcuda_msg r;
    uint64_t v = (uint64_t)(int64_t)(int)attr;
    if (!value) return rt_record(cudaErrorInvalidValue);
    int saved = rt_current_device;
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (device < 0 || device >= vcuda_client_device_count()) return rt_record(cudaErrorInvalidDevice);
    if (rt_managed_attribute(attr, value)) return cudaSuccess;
    rt_current_device = device;
    e = rt_call(VCUDA_OP_DEVICE_GET_ATTRIBUTE, &v, 1, &r, "cudaDeviceGetAttribute");
    rt_current_device = saved;
    if (!e) *value = (int)(int64_t)r.v[0];
    return e;
}

EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    vcuda_msg r;
    uint64_t v = 0;
    if (!p) return rt_record(cudaErrorInvalidValue);
    int saved = rt_current_device;
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (device < 0 || device >= vcuda_client_device_count()) return rt_record(cudaErrorInvalidDevice);
    rt_current_device = device;
    e = rt_call(VCUDA_OP_GET_DEVICE_PROPERTIES, &v, 1, &r, "cudaGetDeviceProperties");
    rt_current_device = saved;
    if (e) return e;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%.*s", (int)r.str_len, (const char *)r.str);
    p->totalGlobalMem = r.v[0], p->sharedMemPerBlock = r.v[1], p->l2CacheSize = (int)r.v[2];
    p->major = (int)r.v[3], p->minor = (int)r.v[4], p->multiProcessorCount = (int)r.v[5];
    p->warpSize = (int)r.v[6], p->maxThreadsPerBlock = (int)r.v[7], p->memoryBusWidth = (int)r.v[10];
    /* the rest through attributes (managed memory and host memory: rt_managed_attribute) */
    struct { int *field; enum cudaDeviceAttr attr; } more[] = {
        {&p->maxThreadsDim[0], cudaDevAttrMaxBlockDimX}, {&p->maxThreadsDim[1], cudaDevAttrMaxBlockDimY},
        {&p->maxThreadsDim[2], cudaDevAttrMaxBlockDimZ}, {&p->maxGridSize[0], cudaDevAttrMaxGridDimX},
        {&p->maxGridSize[1], cudaDevAttrMaxGridDimY}, {&p->maxGridSize[2], cudaDevAttrMaxGridDimZ},
        {&p->regsPerBlock, cudaDevAttrMaxRegistersPerBlock}, {&p->pciBusID, cudaDevAttrPciBusId},
        {&p->pciDeviceID, cudaDevAttrPciDeviceId}, {&p->pciDomainID, cudaDevAttrPciDomainId},
        {&p->maxThreadsPerMultiProcessor, cudaDevAttrMaxThreadsPerMultiProcessor},
        {&p->unifiedAddressing, cudaDevAttrUnifiedAddressing}};
    for (size_t i = 0; i < sizeof more / sizeof *more; ++i)
        if ((e = cudaDeviceGetAttribute(more[i].field, more[i].attr, device))) return e;
    struct { int *field; enum cudaDeviceAttr attr; } flags[] = {
        {&p->integrated, cudaDevAttrIntegrated}, {&p->canMapHostMemory, cudaDevAttrCanMapHostMemory},
        {&p->managedMemory, cudaDevAttrManagedMemory}, {&p->concurrentManagedAccess, cudaDevAttrConcurrentManagedAccess},
        {&p->pageableMemoryAccess, cudaDevAttrPageableMemoryAccess},
        {&p->pageableMemoryAccessUsesHostPageTables, cudaDevAttrPageableMemoryAccessUsesHostPageTables},
        {&p->directManagedMemAccessFromHost, cudaDevAttrDirectManagedMemAccessFromHost},
        {&p->concurrentKernels, cudaDevAttrConcurrentKernels}, {&p->ECCEnabled, cudaDevAttrEccEnabled},
        {&p->tccDriver, cudaDevAttrTccDriver}, {&p->asyncEngineCount, cudaDevAttrAsyncEngineCount},
        {&p->persistingL2CacheMaxSize, cudaDevAttrMaxPersistingL2CacheSize},
        {&p->streamPrioritiesSupported, cudaDevAttrStreamPrioritiesSupported},
        {&p->globalL1CacheSupported, cudaDevAttrGlobalL1CacheSupported},
        {&p->localL1CacheSupported, cudaDevAttrLocalL1CacheSupported},
        {&p->regsPerMultiprocessor, cudaDevAttrMaxRegistersPerMultiprocessor},
        {&p->isMultiGpuBoard, cudaDevAttrIsMultiGpuBoard}, {&p->multiGpuBoardGroupID, cudaDevAttrMultiGpuBoardGroupID},
        {&p->hostNativeAtomicSupported, cudaDevAttrHostNativeAtomicSupported},
        {&p->computePreemptionSupported, cudaDevAttrComputePreemptionSupported},
        {&p->canUseHostPointerForRegisteredMem, cudaDevAttrCanUseHostPointerForRegisteredMem},
        {&p->cooperativeLaunch, cudaDevAttrCooperativeLaunch},
        {&p->maxBlocksPerMultiProcessor, cudaDevAttrMaxBlocksPerMultiprocessor},
        {&p->accessPolicyMaxWindowSize, cudaDevAttrMaxAccessPolicyWindowSize},
        {&p->hostRegisterSupported, cudaDevAttrHostRegisterSupported},
        {&p->memoryPoolsSupported, cudaDevAttrMemoryPoolsSupported}, {&p->clusterLaunch, cudaDevAttrClusterLaunch},
        /* texture and surface limits, and the rest the runtime fills from attributes */
        {&p->maxTexture1D, cudaDevAttrMaxTexture1DWidth}, {&p->maxTexture1DMipmap, cudaDevAttrMaxTexture1DMipmappedWidth},
        {&p->maxTexture2D[0], cudaDevAttrMaxTexture2DWidth}, {&p->maxTexture2D[1], cudaDevAttrMaxTexture2DHeight},
        {&p->maxTexture2DMipmap[0], cudaDevAttrMaxTexture2DMipmappedWidth},
        {&p->maxTexture2DMipmap[1], cudaDevAttrMaxTexture2DMipmappedHeight},
        {&p->maxTexture2DLinear[0], cudaDevAttrMaxTexture2DLinearWidth},
        {&p->maxTexture2DLinear[1], cudaDevAttrMaxTexture2DLinearHeight},
        {&p->maxTexture2DLinear[2], cudaDevAttrMaxTexture2DLinearPitch},
        {&p->maxTexture2DGather[0], cudaDevAttrMaxTexture2DGatherWidth},
        {&p->maxTexture2DGather[1], cudaDevAttrMaxTexture2DGatherHeight},
        {&p->maxTexture3D[0], cudaDevAttrMaxTexture3DWidth}, {&p->maxTexture3D[1], cudaDevAttrMaxTexture3DHeight},
        {&p->maxTexture3D[2], cudaDevAttrMaxTexture3DDepth}, {&p->maxTexture3DAlt[0], cudaDevAttrMaxTexture3DWidthAlt},
        {&p->maxTexture3DAlt[1], cudaDevAttrMaxTexture3DHeightAlt}, {&p->maxTexture3DAlt[2], cudaDevAttrMaxTexture3DDepthAlt},
        {&p->maxTextureCubemap, cudaDevAttrMaxTextureCubemapWidth},
        {&p->maxTexture1DLayered[0], cudaDevAttrMaxTexture1DLayeredWidth},
        {&p->maxTexture1DLayered[1], cudaDevAttrMaxTexture1DLayeredLayers},
        {&p->maxTexture2DLayered[0], cudaDevAttrMaxTexture2DLayeredWidth},
        {&p->maxTexture2DLayered[1], cudaDevAttrMaxTexture2DLayeredHeight},
        {&p->maxTexture2DLayered[2], cudaDevAttrMaxTexture2DLayeredLayers},
        {&p->maxTextureCubemapLayered[0], cudaDevAttrMaxTextureCubemapLayeredWidth},
        {&p->maxTextureCubemapLayered[1], cudaDevAttrMaxTextureCubemapLayeredLayers},
        {&p->maxSurface1D, cudaDevAttrMaxSurface1DWidth}, {&p->maxSurface2D[0], cudaDevAttrMaxSurface2DWidth},
        {&p->maxSurface2D[1], cudaDevAttrMaxSurface2DHeight}, {&p->maxSurface3D[0], cudaDevAttrMaxSurface3DWidth},
        {&p->maxSurface3D[1], cudaDevAttrMaxSurface3DHeight}, {&p->maxSurface3D[2], cudaDevAttrMaxSurface3DDepth},
        {&p->maxSurface1DLayered[0], cudaDevAttrMaxSurface1DLayeredWidth},
        {&p->maxSurface1DLayered[1], cudaDevAttrMaxSurface1DLayeredLayers},
        {&p->maxSurface2DLayered[0], cudaDevAttrMaxSurface2DLayeredWidth},
        {&p->maxSurface2DLayered[1], cudaDevAttrMaxSurface2DLayeredHeight},
        {&p->maxSurface2DLayered[2], cudaDevAttrMaxSurface2DLayeredLayers},
        {&p->maxSurfaceCubemap, cudaDevAttrMaxSurfaceCubemapWidth},
        {&p->maxSurfaceCubemapLayered[0], cudaDevAttrMaxSurfaceCubemapLayeredWidth},
        {&p->maxSurfaceCubemapLayered[1], cudaDevAttrMaxSurfaceCubemapLayeredLayers},
        {&p->sparseCudaArraySupported, cudaDevAttrSparseCudaArraySupported},
        {&p->hostRegisterReadOnlySupported, cudaDevAttrHostRegisterReadOnlySupported},
        {&p->timelineSemaphoreInteropSupported, cudaDevAttrTimelineSemaphoreInteropSupported},
        {&p->gpuDirectRDMASupported, cudaDevAttrGPUDirectRDMASupported},
        {(int *)&p->gpuDirectRDMAFlushWritesOptions, cudaDevAttrGPUDirectRDMAFlushWritesOptions},
        {&p->gpuDirectRDMAWritesOrdering, cudaDevAttrGPUDirectRDMAWritesOrdering},
        {(int *)&p->memoryPoolSupportedHandleTypes, cudaDevAttrMemoryPoolSupportedHandleTypes},
        {&p->deferredMappingCudaArraySupported, cudaDevAttrDeferredMappingCudaArraySupported},
        {&p->ipcEventSupported, cudaDevAttrIpcEventSupport}, {&p->unifiedFunctionPointers, (enum cudaDeviceAttr)129 /* the driver's UNIFIED_FUNCTION_POINTERS */},
        {&p->deviceNumaConfig, cudaDevAttrNumaConfig}, {&p->deviceNumaId, cudaDevAttrNumaId},
        {&p->mpsEnabled, cudaDevAttrMpsEnabled}, {&p->hostNumaId, cudaDevAttrHostNumaId},
        {(int *)&p->gpuPciDeviceID, cudaDevAttrGpuPciDeviceId}, {(int *)&p->gpuPciSubsystemID, cudaDevAttrGpuPciSubsystemId},
        {&p->hostNumaMultinodeIpcSupported, cudaDevAttrHostNumaMultinodeIpcSupported}};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; ++i)
        if ((e = cudaDeviceGetAttribute(flags[i].field, flags[i].attr, device))) return e;
    rt_current_device = device;
    e = rt_call(VCUDA_OP_DEVICE_UUID, NULL, 0, &r, "cudaGetDeviceProperties");
    rt_current_device = saved;
    if (e) return e;
    if (r.blob_len == sizeof p->uuid.bytes) memcpy(p->uuid.bytes, r.blob, sizeof p->uuid.bytes);
    struct { size_t *field; enum cudaDeviceAttr attr; } sizes[] = {
        {&p->sharedMemPerMultiprocessor, cudaDevAttrMaxSharedMemoryPerMultiprocessor},
        {&p->totalConstMem, cudaDevAttrTotalConstantMemory}, {&p->memPitch, cudaDevAttrMaxPitch},
        {&p->textureAlignment, cudaDevAttrTextureAlignment}, {&p->texturePitchAlignment, cudaDevAttrTexturePitchAlignment},
        {&p->surfaceAlignment, cudaDevAttrSurfaceAlignment},
        {&p->sharedMemPerBlockOptin, cudaDevAttrMaxSharedMemoryPerBlockOptin},
        {&p->reservedSharedMemPerBlock, cudaDevAttrReservedSharedMemoryPerBlock}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; ++i) {
        int v = 0;
        if ((e = cudaDeviceGetAttribute(&v, sizes[i].attr, device))) return e;
        *sizes[i].field = (size_t)(unsigned)v;
    }
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetPCIBusId(char *out, int len, int device)
{
    int dom, bus, dev;
    cudaError_t e;
    if (!out || len <= 0) return rt_record(cudaErrorInvalidValue);
    if ((e = cudaDeviceGetAttribute(&dom, cudaDevAttrPciDomainId, device)) ||
        (e = cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, device)) ||
        (e = cudaDeviceGetAttribute(&dev, cudaDevAttrPciDeviceId, device)))
        return e;
    snprintf(out, (size_t)len, "%08x:%02x:%02x.0", (unsigned)dom, (unsigned)bus, (unsigned)dev);
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    vcuda_msg r;
    cudaError_t e = rt_call(VCUDA_OP_DEVICE_SYNCHRONIZE, NULL, 0, &r, "cudaDeviceSynchronize");
    if (!e) rt_managed_synchronized(); /* the host may touch managed memory without waiting */
    return e;
}

EXPORT cudaError_t cudaDeviceReset(void)
{
    vcuda_msg r;
    cudaError_t e = rt_call(VCUDA_OP_DEVICE_RESET, NULL, 0, &r, "cudaDeviceReset");
    if (e) return e;
    /* the server dropped this client's modules and functions on this device too, and its
     * streams: every thread's per-thread stream of the device is made anew (thread_stream) */
    atomic_fetch_add(&rt_resets[rt_current_device], 1);
    rt_managed_reset(); /* its managed memory went too: the host side goes as well */
    pthread_mutex_lock(&rt_reg_mu);
    for (size_t i = 0; i < rt_nkernels; ++i) rt_kernels[i]->handle[rt_current_device] = 0, rt_kernels[i]->fb->module[rt_current_device] = 0;
    for (size_t i = 0; i < rt_nvars; ++i) rt_vars[i]->dptr[rt_current_device] = 0, rt_vars[i]->fb->module[rt_current_device] = 0;
    pthread_mutex_unlock(&rt_reg_mu);
    pthread_mutex_lock(&rt_alloc_mu);
    for (size_t i = 0; i < rt_nalloc;)
        if (rt_allocs[i].device == rt_current_device) rt_allocs[i] = rt_allocs[--rt_nalloc];
        else ++i;
    pthread_mutex_unlock(&rt_alloc_mu);
    rt_staging_forget(rt_current_device);
    return cudaSuccess;
}

EXPORT cudaError_t cudaDriverGetVersion(int *version)
{
    vcuda_msg r;
    if (!version) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = rt_call(VCUDA_OP_DRIVER_GET_VERSION, NULL, 0, &r, "cudaDriverGetVersion");
    if (!e) *version = (int)r.v[0];
    return e;
}

EXPORT cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (!version) return rt_record(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

/* ---- errors ----------------------------------------------------------------------- */

EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = rt_last_error;
    rt_last_error = cudaSuccess;
    return e;
}

EXPORT cudaError_t cudaPeekAtLastError(void) { return rt_last_error; }

/* The runtime's own names and texts for every code it names (generated from it); any
 * other code is an "unrecognized error code", as there. */
EXPORT const char *cudaGetErrorName(cudaError_t e)
{
    switch ((int)e) {
#define X(code, name, text) case code: return name;
#include "cudart_errors.h"
#undef X
    default: return "unrecognized error code";
    }
}

EXPORT const char *cudaGetErrorString(cudaError_t e)
{
    switch ((int)e) {
#define X(code, name, text) case code: return text;
#include "cudart_errors.h"
#undef X
    default: return "unrecognized error code";
    }
}

/* ---- device flags, limits, peers and choice ---------------------------------------- */

static struct {
    unsigned flags;
    enum cudaFuncCache cache;
    enum cudaSharedMemConfig smem;
} device_config[VCUDA_MAX_DEVICES];

/* Scheduling flags decide how the host thread waits: here it waits on a socket, so they
 * are kept (and reported back) but change nothing. */
EXPORT cudaError_t cudaSetDeviceFlags(unsigned flags)
{
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    if (flags & ~(unsigned)cudaDeviceMask) return rt_record(cudaErrorInvalidValue);
    device_config[rt_current_device].flags = flags;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDeviceFlags(unsigned *flags)
{
    if (!flags) return rt_record(cudaErrorInvalidValue);
    *flags = device_config[rt_current_device].flags;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value)
{
    vcuda_msg r;
    uint64_t v[] = {(uint64_t)limit, value};
    return rt_call(VCUDA_OP_LIMIT_SET, v, 2, &r, "cudaDeviceSetLimit");
}

EXPORT cudaError_t cudaDeviceGetLimit(size_t *value, enum cudaLimit limit)
{
    vcuda_msg r;
    uint64_t v = (uint64_t)limit;
    if (!value) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = rt_call(VCUDA_OP_LIMIT_GET, &v, 1, &r, "cudaDeviceGetLimit");
    if (!e) *value = r.v[0];
    return e;
}

/* Cache and shared-memory preferences are hints the driver may ignore (Hopper does for
 * the bank size): kept and reported, not forwarded. */
#define DEVICE_SETTING(set, get, type, field)                                                  \
    EXPORT cudaError_t set(type c)                                                             \
    {                                                                                          \
        device_config[rt_current_device].field = c;                                            \
        return cudaSuccess;                                                                    \
    }                                                                                          \
    EXPORT cudaError_t get(type *c)                                                            \
    {                                                                                          \
        if (!c) return rt_record(cudaErrorInvalidValue);                                       \
        *c = device_config[rt_current_device].field;                                           \
        return cudaSuccess;                                                                    \
    }
DEVICE_SETTING(cudaDeviceSetCacheConfig, cudaDeviceGetCacheConfig, enum cudaFuncCache, cache)
DEVICE_SETTING(cudaDeviceSetSharedMemConfig, cudaDeviceGetSharedMemConfig, enum cudaSharedMemConfig, smem)
#undef DEVICE_SETTING

cudaError_t rt_valid_device(int d)
{
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    return d < 0 || d >= vcuda_client_device_count() ? rt_record(cudaErrorInvalidDevice) : cudaSuccess;
}

/* Each server exports one GPU, so no two vcuda devices share a server: no peer access. */
EXPORT cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
    cudaError_t e;
    if (!can) return rt_record(cudaErrorInvalidValue);
    if ((e = rt_valid_device(device)) || (e = rt_valid_device(peer))) return e;
    *can = 0;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
    cudaError_t e = rt_valid_device(peer);
    if (e) return e;
    return flags ? rt_record(cudaErrorInvalidValue) : rt_record(cudaErrorPeerAccessUnsupported);
}

EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
    cudaError_t e = rt_valid_device(peer);
    return e ? e : rt_record(cudaErrorPeerAccessNotEnabled);
}

EXPORT cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int src, int dst)
{
    cudaError_t e;
    (void)attr;
    if (!value) return rt_record(cudaErrorInvalidValue);
    if ((e = rt_valid_device(src)) || (e = rt_valid_device(dst))) return e;
    *value = 0;
    return cudaSuccess;
}

EXPORT cudaError_t cudaInitDevice(int device, unsigned device_flags, unsigned flags)
{
    (void)device_flags, (void)flags;
    return rt_valid_device(device);
}

EXPORT cudaError_t cudaSetValidDevices(int *devices, int n)
{
    cudaError_t e;
    if (n < 0 || (n && !devices)) return rt_record(cudaErrorInvalidValue);
    for (int i = 0; i < n; ++i)
        if ((e = rt_valid_device(devices[i]))) return e;
    return n ? cudaSetDevice(devices[0]) : cudaSuccess;
}

/* The device whose major.minor is closest to what is asked (the runtime's criterion). */
EXPORT cudaError_t cudaChooseDevice(int *device, const struct cudaDeviceProp *want)
{
    cudaError_t e = rt_ready();
    if (!device || !want) return rt_record(cudaErrorInvalidValue);
    if (e) return rt_record(e);
    int best = 0, best_d = INT32_MAX;
    for (int d = 0; d < vcuda_client_device_count(); ++d) {
        int major = 0, minor = 0;
        if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d)) ||
            (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d)))
            return e;
        int dist = abs((major * 10 + minor) - (want->major * 10 + want->minor));
        if (dist < best_d) best_d = dist, best = d;
    }
    *device = best;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *bus_id)
{
    char id[32];
    cudaError_t e = rt_ready();
    if (!device || !bus_id) return rt_record(cudaErrorInvalidValue);
    if (e) return rt_record(e);
    for (int d = 0; d < vcuda_client_device_count(); ++d) {
        if ((e = cudaDeviceGetPCIBusId(id, sizeof id, d))) return e;
        if (!strcasecmp(id, bus_id) || !strcasecmp(id + 4, bus_id)) return *device = d, cudaSuccess;
    }
    return rt_record(cudaErrorInvalidDevice);
}

EXPORT cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(enum cudaFlushGPUDirectRDMAWritesTarget t,
                                                      enum cudaFlushGPUDirectRDMAWritesScope scope)
{
    (void)t, (void)scope;
    return cudaSuccess; /* no third-party device writes into a vcuda client's GPU memory */
}

/* Persisting L2 lines are a cache hint (see cudaStreamSetAttribute): nothing to reset. */
EXPORT cudaError_t cudaCtxResetPersistingL2Cache(void) { return cudaSuccess; }

EXPORT cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
EXPORT cudaError_t cudaProfilerStop(void) { return cudaSuccess; }
