/* Modules and kernels of the libcudart stand-in: what nvcc emits (the fatbinary,
 * function and variable registration, the call configuration push/pop,
 * __cudaGetKernel and __cudaLaunchKernel, and their _ptsz/_ptds forms through
 * cudart_ptds.c), launches, function attributes, occupancy and __device__ symbols.
 * Images are loaded on a server lazily, per device; each kernel's parameter sizes come
 * from the server (cuFuncGetParamInfo on the loaded image) and are cached per function,
 * so the arguments nvcc passes as void*[] are packed without recompiling anything. */
#define _GNU_SOURCE
#include "cudart_internal.h"

#define FATBIN_WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xba55ed50u

/* ---- registered images and kernels ------------------------------------------------- */

pthread_mutex_t rt_reg_mu = PTHREAD_MUTEX_INITIALIZER; /* also serializes lazy loads */
kernel **rt_kernels;
size_t rt_nkernels, rt_cap_kernels;

typedef struct {
    int magic;
    int version;
    const unsigned long long *data;
    void *filename_or_fatbins;
} fatbin_wrapper;

EXPORT void **__cudaRegisterFatBinary(void *fat_cubin)
{
    const fatbin_wrapper *w = fat_cubin;
    fatbin *fb = calloc(1, sizeof *fb);
    if (!fb) {
        fprintf(stderr, "vcuda: __cudaRegisterFatBinary: out of memory\n");
        abort();
    }
    if (!w || (unsigned)w->magic != FATBIN_WRAPPER_MAGIC || !w->data) {
        fprintf(stderr, "vcuda: __cudaRegisterFatBinary: not an nvcc fatbinary wrapper; its kernels cannot run\n");
        return (void **)fb;
    }
    const uint8_t *p = (const uint8_t *)w->data;
    uint32_t magic = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    uint16_t hsize = (uint16_t)(p[6] | p[7] << 8);
    uint64_t fsize;
    memcpy(&fsize, p + 8, sizeof fsize); /* little-endian hosts only, like nvcc's output */
    if (magic != FATBIN_MAGIC) {
        fprintf(stderr, "vcuda: __cudaRegisterFatBinary: fatbin magic 0x%08x unknown; its kernels cannot run\n", magic);
        return (void **)fb;
    }
    fb->image = p;
    fb->size = hsize + fsize;
    return (void **)fb;
}

EXPORT void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }
/* nvcc calls it before a translation unit's first host access to a __managed__ variable. */
EXPORT char __cudaInitModule(void **handle) { return rt_managed_init_module(handle); }

/* At exit: the server keeps the image cached; our side has nothing worth freeing. */
EXPORT void __cudaUnregisterFatBinary(void **handle) { (void)handle; }

/* Appends item to a registration list; a program whose registration fails cannot run
 * (nvcc's start-up code has no way to hear of it), so that stops it with the reason. */
static void add_registered(void *list, size_t *n, size_t *cap, void *item, const char *api, const char *name)
{
    pthread_mutex_lock(&rt_reg_mu);
    if (!item || rt_grow(list, cap, *n, sizeof item)) {
        fprintf(stderr, "vcuda: %s(%s): out of memory\n", api, name);
        abort();
    }
    (*(void ***)list)[(*n)++] = item;
    pthread_mutex_unlock(&rt_reg_mu);
}

EXPORT void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                                   const char *device_name, int thread_limit, uint3 *tid,
                                   uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize)
{
    (void)device_fun, (void)thread_limit, (void)tid, (void)bid, (void)bdim, (void)gdim, (void)wsize;
    kernel *k = calloc(1, sizeof *k);
    if (k) k->host_fun = host_fun, k->name = device_name, k->fb = (fatbin *)handle;
    add_registered(&rt_kernels, &rt_nkernels, &rt_cap_kernels, k, "__cudaRegisterFunction", device_name);
}

device_var **rt_vars;
size_t rt_nvars, rt_cap_vars;

EXPORT void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *device_name,
                              int ext, size_t size, int constant, int global)
{
    (void)device_address, (void)ext, (void)size, (void)constant, (void)global;
    device_var *v = calloc(1, sizeof *v);
    if (v) v->host_var = host_var, v->name = device_name, v->fb = (fatbin *)handle;
    add_registered(&rt_vars, &rt_nvars, &rt_cap_vars, v, "__cudaRegisterVar", device_name);
}

kernel *rt_find_kernel(const void *host_fun)
{
    kernel *k = NULL;
    pthread_mutex_lock(&rt_reg_mu);
    for (size_t i = 0; i < rt_nkernels && !k; ++i)
        if (rt_kernels[i]->host_fun == host_fun) k = rt_kernels[i];
    pthread_mutex_unlock(&rt_reg_mu);
    return k;
}

/* Module on the current device: by hash if the server has it, else the image. */
static cudaError_t load_module(fatbin *fb, uint64_t *module)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    vcuda_client_status s;
    if (!fb->image) return rt_record(cudaErrorInvalidKernelImage);
    if (!fb->hashed) vcuda_sha256(fb->image, fb->size, fb->hash), fb->hashed = 1;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MODULE_LOOKUP;
    memcpy(m.hash, fb->hash, VCUDA_HASH_SIZE);
    s = vcuda_client_call(rt_current_device, &m, &r, 0, why);
    if (s == VCUDA_CLIENT_REMOTE_ERROR && (int64_t)r.v[0] == cudaErrorSymbolNotFound) {
        if (fb->size > VCUDA_MAX_CHUNK) {
            fprintf(stderr, "vcuda: module image of %zu bytes exceeds the %u-byte frame limit\n", fb->size, VCUDA_MAX_CHUNK);
            return rt_record(cudaErrorInvalidKernelImage);
        }
        m.hdr.opcode = VCUDA_OP_MODULE_LOAD;
        m.blob = fb->image, m.blob_len = (uint32_t)fb->size;
        s = vcuda_client_call(rt_current_device, &m, &r, 0, why);
    }
    if (s == VCUDA_CLIENT_REMOTE_ERROR)
        fprintf(stderr, "vcuda: loading a module on device %d: %.*s\n", rt_current_device, (int)r.str_len, (const char *)r.str);
    cudaError_t e = rt_result(s, &r, "module load", why);
    if (!e) *module = r.v[0];
    return e;
}

/* A name in fb's module on device d (a kernel: FUNCTION_GET, a variable: MODULE_GLOBAL),
 * loading the module first where it is not.  rt_reg_mu held. */
cudaError_t rt_module_lookup(fatbin *fb, int d, unsigned op, const char *name, vcuda_msg *r)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m;
    cudaError_t e = fb->module[d] ? cudaSuccess : load_module(fb, &fb->module[d]);
    if (e) return e;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = (uint16_t)op;
    m.v[0] = fb->module[d], m.nv = 1;
    m.str = (const uint8_t *)name, m.str_len = (uint32_t)strlen(name);
    vcuda_client_status s = vcuda_client_call(d, &m, r, 0, why);
    if (s == VCUDA_CLIENT_REMOTE_ERROR) fprintf(stderr, "vcuda: %s: %.*s\n", name, (int)r->str_len, (const char *)r->str);
    return rt_result(s, r, op == VCUDA_OP_FUNCTION_GET ? "function lookup" : "symbol lookup", why);
}

/* The kernel's function handle on the current device, loading what is missing. */
cudaError_t rt_resolve(kernel *k, uint64_t *fn)
{
    cudaError_t e = rt_ready();
    int d = rt_current_device;
    if (e) return rt_record(e);
    if (d < 0 || d >= vcuda_client_device_count()) return rt_record(cudaErrorInvalidDevice);
    pthread_mutex_lock(&rt_reg_mu);
    if (!k->handle[d]) {
        vcuda_msg r;
        if (!(e = rt_module_lookup(k->fb, d, VCUDA_OP_FUNCTION_GET, k->name, &r))) {
            k->handle[d] = r.v[0];
            k->nparams = r.nsizes;
            memcpy(k->sizes, r.sizes, r.nsizes * sizeof *r.sizes);
            k->have_sizes = 1;
        }
    }
    *fn = k->handle[d];
    pthread_mutex_unlock(&rt_reg_mu);
    return e;
}

/* Per device, fetched once: the launch limits the driver would check. */
typedef struct {
    int known;
    int max_threads, block[3], grid[3], smem_optin;
} launch_limits;
static launch_limits limits[VCUDA_MAX_DEVICES];

EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device);

static cudaError_t check_limits(dim3 grid, dim3 block, size_t shmem)
{
    launch_limits *L = &limits[rt_current_device];
    cudaError_t e;
    if (!L->known) {
        struct { int *v; enum cudaDeviceAttr a; } q[] = {
            {&L->max_threads, cudaDevAttrMaxThreadsPerBlock}, {&L->block[0], cudaDevAttrMaxBlockDimX},
            {&L->block[1], cudaDevAttrMaxBlockDimY}, {&L->block[2], cudaDevAttrMaxBlockDimZ},
            {&L->grid[0], cudaDevAttrMaxGridDimX}, {&L->grid[1], cudaDevAttrMaxGridDimY},
            {&L->grid[2], cudaDevAttrMaxGridDimZ}, {&L->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin}};
        for (size_t i = 0; i < sizeof q / sizeof *q; ++i)
            if ((e = cudaDeviceGetAttribute(q[i].v, q[i].a, rt_current_device))) return e;
        L->known = 1;
    }
    if ((uint64_t)block.x * block.y * block.z > (uint64_t)L->max_threads || block.x > (unsigned)L->block[0] ||
        block.y > (unsigned)L->block[1] || block.z > (unsigned)L->block[2] || grid.x > (unsigned)L->grid[0] ||
        grid.y > (unsigned)L->grid[1] || grid.z > (unsigned)L->grid[2])
        return rt_record(cudaErrorInvalidValue); /* what the driver (and CUDA 13's runtime) say */
    if (shmem > (size_t)L->smem_optin) return rt_record(cudaErrorInvalidValue);
    return cudaSuccess;
}

/* LAUNCH, LAUNCH_COOPERATIVE, or LAUNCH_EX with ex: its attribute scalars (attributes,
 * cluster x, y, z, priority, sync domain; see VCUDA_LAUNCH_EX_LAYOUT). */
static cudaError_t launch_op(kernel *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t stream,
                             unsigned op, const char *api, const uint64_t *ex)
{
    static _Thread_local uint8_t packed[VCUDA_MAX_PARAM_BYTES];
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    uint64_t fn, sh;
    cudaError_t e;
    if (!k) return rt_record(cudaErrorInvalidDeviceFunction);
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z) return rt_record(cudaErrorInvalidConfiguration);
    if (shmem > UINT32_MAX) return rt_record(cudaErrorInvalidValue);
    /* a captured node keeps no attributes: those that only allow overlap or order may go,
     * a cooperative or clustered kernel cannot run as a plain one */
    if (op == VCUDA_OP_LAUNCH_EX && (ex[0] & (VCUDA_LAUNCH_CLUSTER | VCUDA_LAUNCH_COOPERATIVE)) && rt_capturing(stream))
        return unsupported(api, "cooperative kernels and thread block clusters in a stream capture");
    if (op != VCUDA_OP_LAUNCH_COOPERATIVE && rt_capture_kernel(stream, k, grid, block, args, shmem, &e)) return e;
    if ((e = rt_resolve(k, &fn)) || (e = rt_stream_handle(stream, &sh))) return e;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = (uint16_t)op;
    uint64_t v[] = {fn, grid.x, grid.y, grid.z, block.x, block.y, block.z, shmem, sh};
    memcpy(m.v, v, sizeof v);
    m.nv = 9;
    if (op == VCUDA_OP_LAUNCH_EX) memcpy(m.v + 9, ex, 6 * sizeof *ex), m.nv = 15;
    /* the kernel's parameters, in order, each as many bytes as the kernel declares */
    size_t at = 0;
    for (uint32_t i = 0; i < k->nparams; ++i) {
        memcpy(packed + at, args[i], k->sizes[i]);
        at += k->sizes[i];
    }
    if ((e = rt_host_arg(api, packed, k->nparams, k->sizes))) return e;
    if ((e = rt_managed_launch(stream, api))) return e; /* the host's writes go first */
    m.nsizes = k->nparams;
    memcpy(m.sizes, k->sizes, k->nparams * sizeof *k->sizes);
    m.blob = packed, m.blob_len = (uint32_t)at;
    r.hdr.flags = 0; /* (no reply when posted) */
    if (rt_async_launch && (op == VCUDA_OP_LAUNCH || (op == VCUDA_OP_LAUNCH_EX && !(ex[0] & VCUDA_LAUNCH_COOPERATIVE)))) {
        /* like the real runtime: the launch returns once queued; what fails on the
         * server is returned by this device's next call (limits are checked here first,
         * so a bad configuration is still reported at the launch) */
        if ((e = check_limits(grid, block, shmem))) return e;
        return rt_result(vcuda_client_post(rt_current_device, &m, why), &r, "kernel launch", why);
    }
    return rt_result(vcuda_client_call(rt_current_device, &m, &r, 0, why), &r, "kernel launch", why);
}

cudaError_t rt_launch(kernel *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t stream,
                      const char *api)
{
    return launch_op(k, grid, block, args, shmem, stream, VCUDA_OP_LAUNCH, api, NULL);
}

typedef struct {
    dim3 grid, block;
    size_t shmem;
    void *stream;
} launch_config;
static _Thread_local launch_config config_stack[16];
static _Thread_local int config_depth;

EXPORT unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, void *stream)
{
    if (config_depth == 16) return 1; /* nvcc's stub then skips the launch */
    config_stack[config_depth++] = (launch_config){grid, block, shmem, stream};
    return 0;
}

EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream)
{
    if (config_depth == 0) return rt_record(cudaErrorMissingConfiguration);
    launch_config c = config_stack[--config_depth];
    *grid = c.grid, *block = c.block, *shmem = c.shmem, *(void **)stream = c.stream;
    return cudaSuccess;
}

EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel_out, const void *host_fun)
{
    kernel *k = rt_find_kernel(host_fun);
    if (!k) return rt_record(cudaErrorInvalidDeviceFunction);
    *kernel_out = (cudaKernel_t)k;
    return cudaSuccess;
}

EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t shmem,
                                      cudaStream_t stream)
{
    return rt_launch((kernel *)k, grid, block, args, shmem, stream, "cudaLaunchKernel");
}

EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                    cudaStream_t stream)
{
    return rt_launch(rt_find_kernel(func), grid, block, args, shmem, stream, "cudaLaunchKernel");
}

/* Per kernel the same hints: accepted for a kernel this program registered. */
#define FUNC_HINT(name, type)                                                                  \
    EXPORT cudaError_t name(const void *func, type c)                                          \
    {                                                                                          \
        (void)c;                                                                               \
        return rt_find_kernel(func) ? cudaSuccess : rt_record(cudaErrorInvalidDeviceFunction); \
    }
FUNC_HINT(cudaFuncSetCacheConfig, enum cudaFuncCache)
FUNC_HINT(cudaFuncSetSharedMemConfig, enum cudaSharedMemConfig)
#undef FUNC_HINT
/* ---- kernels: attributes, occupancy (computed on the server), launches ------------ */

static cudaError_t kernel_call(const void *func, unsigned op, uint64_t *v, unsigned nv, vcuda_msg *r, const char *api)
{
    kernel *k = rt_find_kernel(func);
    cudaError_t e;
    if (!k) return rt_record(cudaErrorInvalidDeviceFunction);
    if ((e = rt_resolve(k, &v[0]))) return e;
    return rt_call(op, v, nv, r, api);
}

EXPORT cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *a, const void *func)
{
    vcuda_msg r;
    uint64_t v[1];
    if (!a) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = kernel_call(func, VCUDA_OP_FUNC_ATTRIBUTES, v, 1, &r, "cudaFuncGetAttributes");
    if (e) return e;
    memset(a, 0, sizeof *a);
    int x[16];
    for (int i = 0; i < 16; ++i) x[i] = (int)(int64_t)r.v[i];
    a->maxThreadsPerBlock = x[0], a->sharedSizeBytes = (size_t)x[1], a->constSizeBytes = (size_t)x[2];
    a->localSizeBytes = (size_t)x[3], a->numRegs = x[4], a->ptxVersion = x[5], a->binaryVersion = x[6];
    a->cacheModeCA = x[7], a->maxDynamicSharedSizeBytes = x[8], a->preferredShmemCarveout = x[9];
    a->clusterDimMustBeSet = x[10], a->requiredClusterWidth = x[11], a->requiredClusterHeight = x[12];
    a->requiredClusterDepth = x[13], a->nonPortableClusterSizeAllowed = x[14];
    a->clusterSchedulingPolicyPreference = x[15];
    return cudaSuccess;
}

EXPORT cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    vcuda_msg r;
    uint64_t v[] = {0, (uint64_t)(int64_t)(int)attr, (uint64_t)(int64_t)value};
    return kernel_call(func, VCUDA_OP_FUNC_SET_ATTRIBUTE, v, 3, &r, "cudaFuncSetAttribute");
}

EXPORT cudaError_t cudaFuncGetName(const char **name, const void *func)
{
    kernel *k = rt_find_kernel(func);
    if (!name) return rt_record(cudaErrorInvalidValue);
    if (!k) return rt_record(cudaErrorInvalidDeviceFunction);
    *name = k->name;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetKernel(cudaKernel_t *out, const void *func) { return __cudaGetKernel(out, func); }

EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *func, int block,
                                                                          size_t smem, unsigned flags)
{
    vcuda_msg r;
    if (!n || block <= 0) return rt_record(cudaErrorInvalidValue);
    uint64_t v[] = {0, (uint64_t)block, smem, flags};
    cudaError_t e = kernel_call(func, VCUDA_OP_OCCUPANCY_BLOCKS, v, 4, &r, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if (!e) *n = (int)(int64_t)r.v[0];
    return e;
}

EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block, size_t smem)
{
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, func, block, smem, cudaOccupancyDefault);
}

EXPORT cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t *bytes, const void *func, int blocks, int block)
{
    vcuda_msg r;
    if (!bytes || blocks <= 0 || block <= 0) return rt_record(cudaErrorInvalidValue);
    uint64_t v[] = {0, (uint64_t)blocks, (uint64_t)block};
    cudaError_t e = kernel_call(func, VCUDA_OP_OCCUPANCY_DYNAMIC_SMEM, v, 3, &r, "cudaOccupancyAvailableDynamicSMemPerBlock");
    if (!e) *bytes = r.v[0];
    return e;
}

/* Cooperative launches are answered at once: a grid too large to be co-resident fails
 * the launch itself (cudaErrorCooperativeLaunchTooLarge), as with the real runtime. */
static cudaError_t launch_cooperative(kernel *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t stream,
                                     const char *api)
{
    if (!k) return rt_record(cudaErrorInvalidDeviceFunction);
    return launch_op(k, grid, block, args, shmem, stream, VCUDA_OP_LAUNCH_COOPERATIVE, api, NULL);
}

EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                               cudaStream_t stream)
{
    return launch_cooperative(rt_find_kernel(func), grid, block, args, shmem, stream, "cudaLaunchCooperativeKernel");
}

/* cudaLaunchKernelEx (a template in cuda_runtime.h) lands here.  The attributes that
 * change how the kernel runs go to the server with it (LAUNCH_EX), where the driver
 * checks them as it would here: cooperative, programmatic stream serialization (PDL,
 * as CUB/Thrust use on sm_90), cluster dimensions, priority, memory sync domain.  Of
 * the rest, those that only tune placement -- access-policy window, shared-memory
 * carveout, scheduling preferences, a preferred cluster shape (the kernel must also run
 * with the required one), the sync-domain map -- are left out, with the same results;
 * the programmatic and launch-completion events are recorded on the stream right after
 * the launch: they fire once the kernel is done, no earlier than the real trigger, so
 * whatever waits on them still sees the kernel's work.  Device-updatable graph nodes
 * and attributes unknown here are refused by name. */
EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    uint64_t ex[6] = {0, 1, 1, 1, 0, 0}; /* attributes, cluster x y z, priority, sync domain */
    cudaEvent_t after[2];
    int after_flags[2], nafter = 0;
    if (!config || (config->numAttrs && !config->attrs)) return rt_record(cudaErrorInvalidValue);
    for (unsigned i = 0; i < config->numAttrs; ++i) {
        const cudaLaunchAttribute *a = &config->attrs[i];
        switch (a->id) {
        case cudaLaunchAttributeIgnore: case cudaLaunchAttributeAccessPolicyWindow:
        case cudaLaunchAttributeMemSyncDomainMap: case cudaLaunchAttributePreferredSharedMemoryCarveout:
        case cudaLaunchAttributeClusterSchedulingPolicyPreference: case cudaLaunchAttributeNvlinkUtilCentricScheduling:
        case cudaLaunchAttributePreferredClusterDimension:
            break;
        case cudaLaunchAttributeCooperative:
            ex[0] = a->val.cooperative ? ex[0] | VCUDA_LAUNCH_COOPERATIVE : ex[0] & ~(uint64_t)VCUDA_LAUNCH_COOPERATIVE;
            break;
        case cudaLaunchAttributeProgrammaticStreamSerialization:
            ex[0] = a->val.programmaticStreamSerializationAllowed ? ex[0] | VCUDA_LAUNCH_PROGRAMMATIC
                                                                  : ex[0] & ~(uint64_t)VCUDA_LAUNCH_PROGRAMMATIC;
            break;
        case cudaLaunchAttributeClusterDimension:
            if (!a->val.clusterDim.x || !a->val.clusterDim.y || !a->val.clusterDim.z) return rt_record(cudaErrorInvalidValue);
            ex[0] |= VCUDA_LAUNCH_CLUSTER;
            ex[1] = a->val.clusterDim.x, ex[2] = a->val.clusterDim.y, ex[3] = a->val.clusterDim.z;
            break;
        case cudaLaunchAttributePriority: ex[0] |= VCUDA_LAUNCH_PRIORITY, ex[4] = (uint64_t)(int64_t)a->val.priority; break;
        case cudaLaunchAttributeMemSyncDomain:
            if ((unsigned)a->val.memSyncDomain > 1) return rt_record(cudaErrorInvalidValue);
            ex[0] |= VCUDA_LAUNCH_SYNC_DOMAIN, ex[5] = (uint64_t)a->val.memSyncDomain;
            break;
        case cudaLaunchAttributeProgrammaticEvent:
        case cudaLaunchAttributeLaunchCompletionEvent: {
            int programmatic = a->id == cudaLaunchAttributeProgrammaticEvent;
            cudaEvent_t ev = programmatic ? a->val.programmaticEvent.event : a->val.launchCompletionEvent.event;
            int fl = programmatic ? a->val.programmaticEvent.flags : a->val.launchCompletionEvent.flags;
            if (!ev || (fl & ~(int)cudaEventRecordDefault) || nafter == 2) return rt_record(cudaErrorInvalidValue);
            after[nafter] = ev, after_flags[nafter++] = fl;
            break;
        }
        default: return unsupported("cudaLaunchKernelEx", "a launch attribute that vcuda cannot carry (device-updatable "
                                    "graph nodes, or one newer than vcuda)");
        }
    }
    kernel *k = rt_find_kernel(func);
    cudaError_t e = launch_op(k, config->gridDim, config->blockDim, args, config->dynamicSmemBytes, config->stream,
                              ex[0] ? VCUDA_OP_LAUNCH_EX : VCUDA_OP_LAUNCH, "cudaLaunchKernelEx", ex);
    for (int i = 0; i < nafter && !e; ++i) e = cudaEventRecordWithFlags(after[i], config->stream, (unsigned)after_flags[i]);
    return e;
}

/* ---- symbols ------------------------------------------------------------------------ */

/* The device address and size of a __device__/__constant__ variable on the current
 * device, from its module on the server. */
static cudaError_t symbol(const void *host_var, uint64_t *dptr, uint64_t *size)
{
    device_var *v = NULL;
    cudaError_t e = rt_ready();
    int d = rt_current_device;
    if (e) return rt_record(e);
    pthread_mutex_lock(&rt_reg_mu);
    for (size_t i = 0; i < rt_nvars && !v; ++i)
        if (rt_vars[i]->host_var == host_var) v = rt_vars[i];
    if (!v) {
        pthread_mutex_unlock(&rt_reg_mu);
        return rt_record(cudaErrorInvalidSymbol);
    }
    if (!v->dptr[d]) {
        vcuda_msg r;
        if (!(e = rt_module_lookup(v->fb, d, VCUDA_OP_MODULE_GLOBAL, v->name, &r))) v->dptr[d] = r.v[0], v->size[d] = r.v[1];
    }
    *dptr = v->dptr[d], *size = v->size[d];
    pthread_mutex_unlock(&rt_reg_mu);
    return e;
}

EXPORT cudaError_t cudaGetSymbolAddress(void **p, const void *sym)
{
    uint64_t a, n;
    if (!p) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = symbol(sym, &a, &n);
    if (!e) *p = (void *)(uintptr_t)a;
    return e;
}

EXPORT cudaError_t cudaGetSymbolSize(size_t *size, const void *sym)
{
    uint64_t a, n;
    if (!size) return rt_record(cudaErrorInvalidValue);
    cudaError_t e = symbol(sym, &a, &n);
    if (!e) *size = n;
    return e;
}

static cudaError_t symbol_copy(const void *sym, size_t count, size_t offset, enum cudaMemcpyKind kind, int to,
                               void *host, cudaStream_t stream, const char *api)
{
    uint64_t a, n;
    cudaError_t e = symbol(sym, &a, &n);
    if (e) return e;
    if (offset > n || count > n - offset) return rt_record(cudaErrorInvalidValue);
    void *dev = (void *)(uintptr_t)(a + offset);
    if (kind == cudaMemcpyDefault) kind = rt_is_device_pointer(host) ? cudaMemcpyDeviceToDevice
                                                                  : to ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    if (to && kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice) return rt_record(cudaErrorInvalidMemcpyDirection);
    if (!to && kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice) return rt_record(cudaErrorInvalidMemcpyDirection);
    return to ? rt_memcpy_remote(dev, host, count, kind, stream, api) : rt_memcpy_remote(host, dev, count, kind, stream, api);
}

EXPORT cudaError_t cudaMemcpyToSymbol(const void *sym, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind)
{
    return SYNCHRONOUS("cudaMemcpyToSymbol", symbol_copy(sym, count, offset, kind, 1, (void *)src, NULL, "cudaMemcpyToSymbol"));
}
EXPORT cudaError_t cudaMemcpyFromSymbol(void *dst, const void *sym, size_t count, size_t offset, enum cudaMemcpyKind kind)
{
    return SYNCHRONOUS("cudaMemcpyFromSymbol", symbol_copy(sym, count, offset, kind, 0, dst, NULL, "cudaMemcpyFromSymbol"));
}
EXPORT cudaError_t cudaMemcpyToSymbolAsync(const void *sym, const void *src, size_t count, size_t offset,
                                           enum cudaMemcpyKind kind, cudaStream_t s)
{
    return symbol_copy(sym, count, offset, kind, 1, (void *)src, s, "cudaMemcpyToSymbolAsync");
}
EXPORT cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *sym, size_t count, size_t offset,
                                             enum cudaMemcpyKind kind, cudaStream_t s)
{
    return symbol_copy(sym, count, offset, kind, 0, dst, s, "cudaMemcpyFromSymbolAsync");
}
