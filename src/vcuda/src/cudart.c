/* libcudart stand-in: the CUDA runtime API of unmodified programs (nvcc -cudart
 * shared), forwarded to vcuda servers.  Built as libcudart.so.<major> with the
 * runtime's own symbol version, so the dynamic linker takes it in place of NVIDIA's
 * when its directory comes first on LD_LIBRARY_PATH (or with LD_PRELOAD).
 *
 * What nvcc emits is covered: the fatbinary/function registration, the call
 * configuration push/pop, __cudaGetKernel and __cudaLaunchKernel (CUDA 12.8+) and
 * cudaLaunchKernel.  Each kernel's parameter sizes come from the server
 * (cuFuncGetParamInfo on the loaded image) and are cached per function, so the
 * arguments nvcc passes as void*[] are packed without recompiling anything.  An API
 * this library does not export stops the program at load or first call with the
 * dynamic linker naming it; the few exported ones vcuda cannot provide (managed
 * memory) print their name and return cudaErrorNotSupported. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include "vcuda/client.h"
#include "vcuda/sha256.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define FATBIN_WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xba55ed50u

/* ---- per-thread state, as in the real runtime ------------------------------------- */

static _Thread_local int current_device;
static _Thread_local cudaError_t last_error;

static cudaError_t record(cudaError_t e)
{
    if (e != cudaSuccess) last_error = e;
    return e;
}

/* ---- connection set-up, once per process ----------------------------------------- */

static pthread_once_t open_once = PTHREAD_ONCE_INIT;
static cudaError_t open_error;
static int async_launch = 1;

static void open_servers(void)
{
    char why[VCUDA_WHY_LEN];
    const char *l = getenv("VCUDA_LAUNCH");
    if (l && *l) {
        if (strcmp(l, "async") && strcmp(l, "sync")) {
            fprintf(stderr, "vcuda: VCUDA_LAUNCH='%s' is not async or sync\n", l);
            open_error = cudaErrorInitializationError;
            return;
        }
        async_launch = !strcmp(l, "async");
    }
    if (vcuda_client_open(why)) {
        fprintf(stderr, "vcuda: %s\n", why);
        open_error = cudaErrorInitializationError;
    } else if (vcuda_client_device_count() == 0) {
        fprintf(stderr, "vcuda: no reachable server: no devices\n");
        open_error = cudaErrorNoDevice;
    }
}

/* Every API entry that needs a server starts here. */
static cudaError_t ready(void)
{
    pthread_once(&open_once, open_servers);
    return open_error;
}

/* Status of a call -> cudaError_t, with the server's code for its own errors. */
static cudaError_t result(vcuda_client_status s, const vcuda_msg *reply, const char *api, const char *why)
{
    if (s == VCUDA_CLIENT_OK) return cudaSuccess;
    if (s == VCUDA_CLIENT_REMOTE_ERROR) return record((cudaError_t)(int)(int64_t)reply->v[0]);
    if (s != VCUDA_CLIENT_UNAVAILABLE) fprintf(stderr, "vcuda: %s: %s\n", api, why);
    return record((cudaError_t)vcuda_client_cuda_error(s));
}

static cudaError_t call(unsigned op, const uint64_t *v, unsigned nv, vcuda_msg *reply, const char *api)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m;
    cudaError_t e = ready();
    if (e) return record(e);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = (uint16_t)op;
    for (unsigned i = 0; i < nv; ++i) m.v[i] = v[i];
    m.nv = nv;
    return result(vcuda_client_call(current_device, &m, reply, 0, why), reply, api, why);
}

static cudaError_t unsupported(const char *api, const char *reason)
{
    fprintf(stderr, "vcuda: %s is not supported: %s\n", api, reason);
    return record(cudaErrorNotSupported);
}

/* ---- remote streams and events ---------------------------------------------------- */

/* cudaStream_t / cudaEvent_t point at one of these: the server's handle and the device
 * it lives on.  The magic catches a handle of the other kind or a stale one. */
typedef struct {
    uint32_t magic;
    int device;
    uint64_t handle;
} remote_object;
#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x45564e54u

/* Stream -> server handle (0: default stream).  Invalid handle if it is not a stream of
 * the current device. */
static cudaError_t stream_handle(cudaStream_t s, uint64_t *h)
{
    const remote_object *o = (const remote_object *)s;
    *h = 0;
    if (!s || s == cudaStreamLegacy) return cudaSuccess;
    if (s == cudaStreamPerThread) return unsupported("cudaStreamPerThread", "per-thread default streams are not forwarded");
    if (o->magic != STREAM_MAGIC || o->device != current_device) return record(cudaErrorInvalidResourceHandle);
    *h = o->handle;
    return cudaSuccess;
}

static cudaError_t create_object(unsigned op, unsigned flags, uint32_t magic, void **out, const char *api)
{
    vcuda_msg r;
    uint64_t v = flags;
    if (!out) return record(cudaErrorInvalidValue);
    cudaError_t e = call(op, &v, 1, &r, api);
    if (e) return e;
    remote_object *o = malloc(sizeof *o);
    if (!o) return record(cudaErrorMemoryAllocation);
    *o = (remote_object){magic, current_device, r.v[0]};
    *out = o;
    return cudaSuccess;
}

static cudaError_t object_call(unsigned op, const void *obj, uint32_t magic, const char *api, vcuda_msg *r)
{
    const remote_object *o = obj;
    vcuda_msg local;
    if (!o || o->magic != magic) return record(cudaErrorInvalidResourceHandle);
    int saved = current_device;
    current_device = o->device; /* an object is served by the server that made it */
    cudaError_t e = call(op, &o->handle, 1, r ? r : &local, api);
    current_device = saved;
    return e;
}

static cudaError_t destroy_object(unsigned op, void *obj, uint32_t magic, const char *api)
{
    cudaError_t e = object_call(op, obj, magic, api, NULL);
    if (e != cudaErrorInvalidResourceHandle) {
        ((remote_object *)obj)->magic = 0;
        free(obj);
    }
    return e;
}

/* ---- device allocations known to this process ------------------------------------- */

typedef struct {
    int device;
    uint64_t base, size;
} allocation;

static pthread_mutex_t alloc_mu = PTHREAD_MUTEX_INITIALIZER;
static allocation *allocs;
static size_t nalloc, cap_alloc;

/* Is p inside an allocation of the current device?  (cudaMemcpyDefault's question.) */
static int is_device_pointer(const void *p)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    int found = 0;
    pthread_mutex_lock(&alloc_mu);
    for (size_t i = 0; i < nalloc && !found; ++i)
        found = allocs[i].device == current_device && a >= allocs[i].base && a - allocs[i].base < allocs[i].size;
    pthread_mutex_unlock(&alloc_mu);
    return found;
}

/* ---- registered images and kernels ------------------------------------------------- */

typedef struct {
    const uint8_t *image;
    size_t size;
    int hashed;
    uint8_t hash[VCUDA_HASH_SIZE];
    uint64_t module[VCUDA_MAX_DEVICES]; /* server handle per device, 0: not loaded */
} fatbin;

typedef struct {
    const void *host_fun;
    const char *name;
    fatbin *fb;
    uint64_t handle[VCUDA_MAX_DEVICES];
    int have_sizes;
    uint32_t nparams;
    uint32_t sizes[VCUDA_MAX_PARAMS];
} kernel;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER; /* also serializes lazy loads */
static kernel **kernels;
static size_t nkernels, cap_kernels;

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
EXPORT char __cudaInitModule(void **handle) { (void)handle; return 1; }

/* At exit: the server keeps the image cached; our side has nothing worth freeing. */
EXPORT void __cudaUnregisterFatBinary(void **handle) { (void)handle; }

EXPORT void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                                   const char *device_name, int thread_limit, uint3 *tid,
                                   uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize)
{
    (void)device_fun, (void)thread_limit, (void)tid, (void)bid, (void)bdim, (void)gdim, (void)wsize;
    kernel *k = calloc(1, sizeof *k);
    pthread_mutex_lock(&reg_mu);
    if (k && nkernels == cap_kernels) {
        size_t n = cap_kernels ? 2 * cap_kernels : 64;
        kernel **q = realloc(kernels, n * sizeof *q);
        if (q) kernels = q, cap_kernels = n;
    }
    if (!k || nkernels == cap_kernels) {
        fprintf(stderr, "vcuda: __cudaRegisterFunction(%s): out of memory\n", device_name);
        abort();
    }
    k->host_fun = host_fun, k->name = device_name, k->fb = (fatbin *)handle;
    kernels[nkernels++] = k;
    pthread_mutex_unlock(&reg_mu);
}

/* __device__ variables need no host-side action unless the program copies to or from
 * them by symbol, which this library does not export (the loader says so). */
EXPORT void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *device_name,
                              int ext, size_t size, int constant, int global)
{
    (void)handle, (void)host_var, (void)device_address, (void)device_name, (void)ext, (void)size, (void)constant, (void)global;
}

EXPORT void __cudaRegisterManagedVar(void **handle, void **host_var_ptr, char *device_address,
                                     const char *device_name, int ext, size_t size, int constant, int global)
{
    (void)handle, (void)host_var_ptr, (void)device_address, (void)ext, (void)size, (void)constant, (void)global;
    fprintf(stderr, "vcuda: __managed__ variable %s: managed memory cannot be remoted; this program cannot run under vcuda\n",
            device_name);
    exit(1);
}

static kernel *find_kernel(const void *host_fun)
{
    kernel *k = NULL;
    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < nkernels && !k; ++i)
        if (kernels[i]->host_fun == host_fun) k = kernels[i];
    pthread_mutex_unlock(&reg_mu);
    return k;
}

/* Module on the current device: by hash if the server has it, else the image. */
static cudaError_t load_module(fatbin *fb, uint64_t *module)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    vcuda_client_status s;
    if (!fb->image) return record(cudaErrorInvalidKernelImage);
    if (!fb->hashed) vcuda_sha256(fb->image, fb->size, fb->hash), fb->hashed = 1;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MODULE_LOOKUP;
    memcpy(m.hash, fb->hash, VCUDA_HASH_SIZE);
    s = vcuda_client_call(current_device, &m, &r, 0, why);
    if (s == VCUDA_CLIENT_REMOTE_ERROR && (int64_t)r.v[0] == cudaErrorSymbolNotFound) {
        if (fb->size > VCUDA_MAX_CHUNK) {
            fprintf(stderr, "vcuda: module image of %zu bytes exceeds the %u-byte frame limit\n", fb->size, VCUDA_MAX_CHUNK);
            return record(cudaErrorInvalidKernelImage);
        }
        m.hdr.opcode = VCUDA_OP_MODULE_LOAD;
        m.blob = fb->image, m.blob_len = (uint32_t)fb->size;
        s = vcuda_client_call(current_device, &m, &r, 0, why);
    }
    if (s == VCUDA_CLIENT_REMOTE_ERROR)
        fprintf(stderr, "vcuda: loading a module on device %d: %.*s\n", current_device, (int)r.str_len, (const char *)r.str);
    cudaError_t e = result(s, &r, "module load", why);
    if (!e) *module = r.v[0];
    return e;
}

/* The kernel's function handle on the current device, loading what is missing. */
static cudaError_t resolve(kernel *k, uint64_t *fn)
{
    cudaError_t e = ready();
    int d = current_device;
    if (e) return record(e);
    if (d < 0 || d >= vcuda_client_device_count()) return record(cudaErrorInvalidDevice);
    pthread_mutex_lock(&reg_mu);
    if (!k->handle[d]) {
        if (!k->fb->module[d]) e = load_module(k->fb, &k->fb->module[d]);
        if (!e) {
            char why[VCUDA_WHY_LEN];
            vcuda_msg m, r;
            memset(&m, 0, sizeof m);
            m.hdr.opcode = VCUDA_OP_FUNCTION_GET;
            m.v[0] = k->fb->module[d], m.nv = 1;
            m.str = (const uint8_t *)k->name, m.str_len = (uint32_t)strlen(k->name);
            vcuda_client_status s = vcuda_client_call(d, &m, &r, 0, why);
            if (s == VCUDA_CLIENT_REMOTE_ERROR)
                fprintf(stderr, "vcuda: kernel %s: %.*s\n", k->name, (int)r.str_len, (const char *)r.str);
            if (!(e = result(s, &r, "function lookup", why))) {
                k->handle[d] = r.v[0];
                k->nparams = r.nsizes;
                memcpy(k->sizes, r.sizes, r.nsizes * sizeof *r.sizes);
                k->have_sizes = 1;
            }
        }
    }
    *fn = k->handle[d];
    pthread_mutex_unlock(&reg_mu);
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
    launch_limits *L = &limits[current_device];
    cudaError_t e;
    if (!L->known) {
        struct { int *v; enum cudaDeviceAttr a; } q[] = {
            {&L->max_threads, cudaDevAttrMaxThreadsPerBlock}, {&L->block[0], cudaDevAttrMaxBlockDimX},
            {&L->block[1], cudaDevAttrMaxBlockDimY}, {&L->block[2], cudaDevAttrMaxBlockDimZ},
            {&L->grid[0], cudaDevAttrMaxGridDimX}, {&L->grid[1], cudaDevAttrMaxGridDimY},
            {&L->grid[2], cudaDevAttrMaxGridDimZ}, {&L->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin}};
        for (size_t i = 0; i < sizeof q / sizeof *q; ++i)
            if ((e = cudaDeviceGetAttribute(q[i].v, q[i].a, current_device))) return e;
        L->known = 1;
    }
    if ((uint64_t)block.x * block.y * block.z > (uint64_t)L->max_threads || block.x > (unsigned)L->block[0] ||
        block.y > (unsigned)L->block[1] || block.z > (unsigned)L->block[2] || grid.x > (unsigned)L->grid[0] ||
        grid.y > (unsigned)L->grid[1] || grid.z > (unsigned)L->grid[2])
        return record(cudaErrorInvalidValue); /* what the driver (and CUDA 13's runtime) say */
    if (shmem > (size_t)L->smem_optin) return record(cudaErrorInvalidValue);
    return cudaSuccess;
}

static cudaError_t launch(kernel *k, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t stream)
{
    static _Thread_local uint8_t packed[VCUDA_MAX_PARAM_BYTES];
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    uint64_t fn, sh;
    cudaError_t e;
    if (!k) return record(cudaErrorInvalidDeviceFunction);
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z) return record(cudaErrorInvalidConfiguration);
    if (shmem > UINT32_MAX) return record(cudaErrorInvalidValue);
    if ((e = resolve(k, &fn)) || (e = stream_handle(stream, &sh))) return e;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_LAUNCH;
    uint64_t v[] = {fn, grid.x, grid.y, grid.z, block.x, block.y, block.z, shmem, sh};
    memcpy(m.v, v, sizeof v);
    m.nv = 9;
    /* the kernel's parameters, in order, each as many bytes as the kernel declares */
    size_t at = 0;
    for (uint32_t i = 0; i < k->nparams; ++i) {
        memcpy(packed + at, args[i], k->sizes[i]);
        at += k->sizes[i];
    }
    m.nsizes = k->nparams;
    memcpy(m.sizes, k->sizes, k->nparams * sizeof *k->sizes);
    m.blob = packed, m.blob_len = (uint32_t)at;
    if (async_launch) {
        /* like the real runtime: the launch returns once queued; what fails on the
         * server is returned by this device's next call (limits are checked here first,
         * so a bad configuration is still reported at the launch) */
        if ((e = check_limits(grid, block, shmem))) return e;
        return result(vcuda_client_post(current_device, &m, why), &r, "kernel launch", why);
    }
    return result(vcuda_client_call(current_device, &m, &r, 0, why), &r, "kernel launch", why);
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
    if (config_depth == 0) return record(cudaErrorMissingConfiguration);
    launch_config c = config_stack[--config_depth];
    *grid = c.grid, *block = c.block, *shmem = c.shmem, *(void **)stream = c.stream;
    return cudaSuccess;
}

EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel_out, const void *host_fun)
{
    kernel *k = find_kernel(host_fun);
    if (!k) return record(cudaErrorInvalidDeviceFunction);
    *kernel_out = (cudaKernel_t)k;
    return cudaSuccess;
}

EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t shmem,
                                      cudaStream_t stream)
{
    return launch((kernel *)k, grid, block, args, shmem, stream);
}

EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                    cudaStream_t stream)
{
    return launch(find_kernel(func), grid, block, args, shmem, stream);
}

/* ---- device management ------------------------------------------------------------ */

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    cudaError_t e = ready();
    if (!count) return record(cudaErrorInvalidValue);
    *count = e ? 0 : vcuda_client_device_count();
    return record(e);
}

EXPORT cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = ready();
    if (e) return record(e);
    if (device < 0 || device >= vcuda_client_device_count()) return record(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDevice(int *device)
{
    if (!device) return record(cudaErrorInvalidValue);
    *device = current_device;
    return cudaSuccess;
}

/* Managed and pageable memory cannot cross the network: report them absent, so that
 * programs which check (umbench does) take their explicit-copy path. */
static int hidden_attribute(int attr)
{
    return attr == cudaDevAttrManagedMemory || attr == cudaDevAttrConcurrentManagedAccess ||
           attr == cudaDevAttrPageableMemoryAccess || attr == cudaDevAttrPageableMemoryAccessUsesHostPageTables ||
           attr == cudaDevAttrDirectManagedMemAccessFromHost;
}

EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    vcuda_msg r;
    uint64_t v = (uint64_t)(int64_t)(int)attr;
    if (!value) return record(cudaErrorInvalidValue);
    int saved = current_device;
    cudaError_t e = ready();
    if (e) return record(e);
    if (device < 0 || device >= vcuda_client_device_count()) return record(cudaErrorInvalidDevice);
    if (hidden_attribute(attr)) return *value = 0, cudaSuccess;
    current_device = device;
    e = call(VCUDA_OP_DEVICE_GET_ATTRIBUTE, &v, 1, &r, "cudaDeviceGetAttribute");
    current_device = saved;
    if (!e) *value = (int)(int64_t)r.v[0];
    return e;
}

EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    vcuda_msg r;
    uint64_t v = 0;
    if (!p) return record(cudaErrorInvalidValue);
    int saved = current_device;
    cudaError_t e = ready();
    if (e) return record(e);
    if (device < 0 || device >= vcuda_client_device_count()) return record(cudaErrorInvalidDevice);
    current_device = device;
    e = call(VCUDA_OP_GET_DEVICE_PROPERTIES, &v, 1, &r, "cudaGetDeviceProperties");
    current_device = saved;
    if (e) return e;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%.*s", (int)r.str_len, (const char *)r.str);
    p->totalGlobalMem = r.v[0], p->sharedMemPerBlock = r.v[1], p->l2CacheSize = (int)r.v[2];
    p->major = (int)r.v[3], p->minor = (int)r.v[4], p->multiProcessorCount = (int)r.v[5];
    p->warpSize = (int)r.v[6], p->maxThreadsPerBlock = (int)r.v[7], p->memoryBusWidth = (int)r.v[10];
    /* the rest through attributes (managed/pageable stay 0, see hidden_attribute) */
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
    int smem_sm = 0, const_mem = 0;
    if ((e = cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device)) ||
        (e = cudaDeviceGetAttribute(&const_mem, cudaDevAttrTotalConstantMemory, device)))
        return e;
    p->sharedMemPerMultiprocessor = (size_t)smem_sm, p->totalConstMem = (size_t)const_mem;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetPCIBusId(char *out, int len, int device)
{
    int dom, bus, dev;
    cudaError_t e;
    if (!out || len <= 0) return record(cudaErrorInvalidValue);
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
    return call(VCUDA_OP_DEVICE_SYNCHRONIZE, NULL, 0, &r, "cudaDeviceSynchronize");
}

EXPORT cudaError_t cudaDeviceReset(void)
{
    vcuda_msg r;
    cudaError_t e = call(VCUDA_OP_DEVICE_RESET, NULL, 0, &r, "cudaDeviceReset");
    if (e) return e;
    /* the server dropped this client's modules and functions on this device too */
    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < nkernels; ++i) kernels[i]->handle[current_device] = 0, kernels[i]->fb->module[current_device] = 0;
    pthread_mutex_unlock(&reg_mu);
    pthread_mutex_lock(&alloc_mu);
    for (size_t i = 0; i < nalloc;)
        if (allocs[i].device == current_device) allocs[i] = allocs[--nalloc];
        else ++i;
    pthread_mutex_unlock(&alloc_mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    vcuda_msg r;
    if (!free_bytes || !total) return record(cudaErrorInvalidValue);
    cudaError_t e = call(VCUDA_OP_MEM_GET_INFO, NULL, 0, &r, "cudaMemGetInfo");
    if (!e) *free_bytes = r.v[0], *total = r.v[1];
    return e;
}

EXPORT cudaError_t cudaDriverGetVersion(int *version)
{
    vcuda_msg r;
    if (!version) return record(cudaErrorInvalidValue);
    cudaError_t e = call(VCUDA_OP_DRIVER_GET_VERSION, NULL, 0, &r, "cudaDriverGetVersion");
    if (!e) *version = (int)r.v[0];
    return e;
}

EXPORT cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (!version) return record(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

/* ---- errors ----------------------------------------------------------------------- */

EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

EXPORT cudaError_t cudaPeekAtLastError(void) { return last_error; }

#define ERRORS(X)                                                                            \
    X(cudaSuccess, "no error")                                                               \
    X(cudaErrorInvalidValue, "invalid argument")                                             \
    X(cudaErrorMemoryAllocation, "out of memory")                                            \
    X(cudaErrorInitializationError, "initialization error (vcuda: see VCUDA_SERVERS and the message above)") \
    X(cudaErrorInvalidConfiguration, "invalid configuration argument")                       \
    X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                   \
    X(cudaErrorMissingConfiguration, "__global__ function call is not configured")           \
    X(cudaErrorDevicesUnavailable, "CUDA-capable device(s) is/are busy or unavailable (vcuda: server lost)") \
    X(cudaErrorInvalidDeviceFunction, "invalid device function")                             \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                               \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                      \
    X(cudaErrorInvalidKernelImage, "device kernel image is invalid")                         \
    X(cudaErrorNoKernelImageForDevice, "no kernel image is available for execution on the device") \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")                             \
    X(cudaErrorSymbolNotFound, "named symbol not found")                                     \
    X(cudaErrorNotReady, "device not ready")                                                 \
    X(cudaErrorIllegalAddress, "an illegal memory access was encountered")                   \
    X(cudaErrorLaunchOutOfResources, "too many resources requested for launch")              \
    X(cudaErrorLaunchFailure, "unspecified launch failure")                                  \
    X(cudaErrorNotPermitted, "operation not permitted (vcuda: authentication)")              \
    X(cudaErrorNotSupported, "operation not supported")                                      \
    X(cudaErrorUnknown, "unknown error")

EXPORT const char *cudaGetErrorName(cudaError_t e)
{
#define NAME(code, text) if (e == code) return #code;
    ERRORS(NAME)
#undef NAME
    return "cudaErrorUnknown";
}

EXPORT const char *cudaGetErrorString(cudaError_t e)
{
#define TEXT(code, text) if (e == code) return text;
    ERRORS(TEXT)
#undef TEXT
    static _Thread_local char other[48];
    snprintf(other, sizeof other, "CUDA error %d", (int)e);
    return other;
}

/* ---- memory ------------------------------------------------------------------------ */

EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
    vcuda_msg r;
    uint64_t v = size;
    if (!p) return record(cudaErrorInvalidValue);
    if (size == 0) return *p = NULL, cudaSuccess;
    cudaError_t e = call(VCUDA_OP_MALLOC, &v, 1, &r, "cudaMalloc");
    if (e) return e;
    pthread_mutex_lock(&alloc_mu);
    if (nalloc == cap_alloc) {
        size_t n = cap_alloc ? 2 * cap_alloc : 64;
        allocation *q = realloc(allocs, n * sizeof *q);
        if (q) allocs = q, cap_alloc = n;
    }
    int ok = nalloc < cap_alloc;
    if (ok) allocs[nalloc++] = (allocation){current_device, r.v[0], size};
    pthread_mutex_unlock(&alloc_mu);
    if (!ok) {
        uint64_t fv = r.v[0];
        call(VCUDA_OP_FREE, &fv, 1, &r, "cudaFree");
        return record(cudaErrorMemoryAllocation);
    }
    *p = (void *)(uintptr_t)r.v[0];
    return cudaSuccess;
}

EXPORT cudaError_t cudaFree(void *p)
{
    vcuda_msg r;
    uint64_t v = (uint64_t)(uintptr_t)p;
    if (!p) return cudaSuccess;
    cudaError_t e = call(VCUDA_OP_FREE, &v, 1, &r, "cudaFree");
    if (e) return e;
    pthread_mutex_lock(&alloc_mu);
    for (size_t i = 0; i < nalloc; ++i)
        if (allocs[i].device == current_device && allocs[i].base == v) {
            allocs[i] = allocs[--nalloc];
            break;
        }
    pthread_mutex_unlock(&alloc_mu);
    return cudaSuccess;
}

/* Host memory stays on this host: "pinned" means nothing to a copy that crosses a
 * socket, so page-aligned ordinary memory does. */
EXPORT cudaError_t cudaMallocHost(void **p, size_t size)
{
    if (!p) return record(cudaErrorInvalidValue);
    if (posix_memalign(p, 4096, size ? size : 1)) return *p = NULL, record(cudaErrorMemoryAllocation);
    return cudaSuccess;
}

EXPORT cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags)
{
    (void)flags;
    return cudaMallocHost(p, size);
}

EXPORT cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMallocManaged(void **p, size_t size, unsigned flags)
{
    (void)p, (void)size, (void)flags;
    return unsupported("cudaMallocManaged", "managed memory cannot be remoted");
}

EXPORT cudaError_t cudaMemPrefetchAsync(const void *p, size_t n, struct cudaMemLocation loc, unsigned flags,
                                        cudaStream_t s)
{
    (void)p, (void)n, (void)loc, (void)flags, (void)s;
    return unsupported("cudaMemPrefetchAsync", "managed memory cannot be remoted");
}

EXPORT cudaError_t cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise a, struct cudaMemLocation loc)
{
    (void)p, (void)n, (void)a, (void)loc;
    return unsupported("cudaMemAdvise", "managed memory cannot be remoted");
}

static cudaError_t memcpy_remote(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream,
                                 const char *api)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    uint64_t sh;
    cudaError_t e = ready();
    if (e || (e = stream_handle(stream, &sh))) return record(e);
    if (kind == cudaMemcpyDefault)
        kind = is_device_pointer(dst) ? (is_device_pointer(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                      : (is_device_pointer(src) ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return record(cudaErrorInvalidValue);
    memset(&m, 0, sizeof m);
    switch (kind) {
    case cudaMemcpyHostToHost: memmove(dst, src, n); return cudaSuccess;
    case cudaMemcpyHostToDevice:
        m.hdr.opcode = VCUDA_OP_MEMCPY_H2D;
        m.v[0] = (uint64_t)(uintptr_t)dst, m.v[1] = sh, m.nv = 2;
        return result(vcuda_client_send_chunks(current_device, &m, 0, src, n, vcuda_client_chunk(), &r, why), &r, api, why);
    case cudaMemcpyDeviceToHost:
        m.hdr.opcode = VCUDA_OP_MEMCPY_D2H;
        m.v[0] = (uint64_t)(uintptr_t)src, m.v[1] = n, m.v[2] = sh, m.nv = 3;
        return result(vcuda_client_recv_chunks(current_device, &m, dst, n, &r, why), &r, api, why);
    case cudaMemcpyDeviceToDevice:
        m.hdr.opcode = VCUDA_OP_MEMCPY_D2D;
        m.v[0] = (uint64_t)(uintptr_t)dst, m.v[1] = (uint64_t)(uintptr_t)src, m.v[2] = n, m.v[3] = sh, m.nv = 4;
        return result(vcuda_client_call(current_device, &m, &r, 0, why), &r, api, why);
    default: return record(cudaErrorInvalidMemcpyDirection);
    }
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    return memcpy_remote(dst, src, n, kind, NULL, "cudaMemcpy");
}

/* Ordered in its stream, and complete on return: in-order semantics without overlap. */
EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
    return memcpy_remote(dst, src, n, kind, s, "cudaMemcpyAsync");
}

EXPORT cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t stream)
{
    vcuda_msg r;
    uint64_t sh;
    cudaError_t e = ready();
    if (e || (e = stream_handle(stream, &sh))) return record(e);
    if (n == 0) return cudaSuccess;
    uint64_t v[] = {(uint64_t)(uintptr_t)p, (uint64_t)(int64_t)value, n, sh};
    return call(VCUDA_OP_MEMSET, v, 4, &r, "cudaMemset");
}

EXPORT cudaError_t cudaMemset(void *p, int value, size_t n) { return cudaMemsetAsync(p, value, n, NULL); }

/* ---- streams and events ------------------------------------------------------------ */

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    return create_object(VCUDA_OP_STREAM_CREATE, flags, STREAM_MAGIC, (void **)s, "cudaStreamCreate");
}
EXPORT cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    return destroy_object(VCUDA_OP_STREAM_DESTROY, s, STREAM_MAGIC, "cudaStreamDestroy");
}
EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    vcuda_msg r;
    uint64_t zero = 0;
    if (!s || s == cudaStreamLegacy) return call(VCUDA_OP_STREAM_SYNCHRONIZE, &zero, 1, &r, "cudaStreamSynchronize");
    return object_call(VCUDA_OP_STREAM_SYNCHRONIZE, s, STREAM_MAGIC, "cudaStreamSynchronize", NULL);
}

EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags)
{
    return create_object(VCUDA_OP_EVENT_CREATE, flags, EVENT_MAGIC, (void **)ev, "cudaEventCreate");
}
EXPORT cudaError_t cudaEventCreate(cudaEvent_t *ev) { return cudaEventCreateWithFlags(ev, cudaEventDefault); }
EXPORT cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    return destroy_object(VCUDA_OP_EVENT_DESTROY, ev, EVENT_MAGIC, "cudaEventDestroy");
}
EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    return object_call(VCUDA_OP_EVENT_SYNCHRONIZE, ev, EVENT_MAGIC, "cudaEventSynchronize", NULL);
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t stream)
{
    const remote_object *o = (const remote_object *)ev;
    vcuda_msg r;
    uint64_t sh;
    cudaError_t e;
    if (!o || o->magic != EVENT_MAGIC || o->device != current_device) return record(cudaErrorInvalidResourceHandle);
    if ((e = stream_handle(stream, &sh))) return e;
    uint64_t v[] = {o->handle, sh};
    return call(VCUDA_OP_EVENT_RECORD, v, 2, &r, "cudaEventRecord");
}

EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    const remote_object *a = (const remote_object *)start, *b = (const remote_object *)end;
    vcuda_msg r;
    if (!ms) return record(cudaErrorInvalidValue);
    if (!a || !b || a->magic != EVENT_MAGIC || b->magic != EVENT_MAGIC || a->device != b->device)
        return record(cudaErrorInvalidResourceHandle);
    int saved = current_device;
    current_device = a->device;
    uint64_t v[] = {a->handle, b->handle};
    cudaError_t e = call(VCUDA_OP_EVENT_ELAPSED, v, 2, &r, "cudaEventElapsedTime");
    current_device = saved;
    if (!e) {
        uint32_t bits = (uint32_t)r.v[0];
        memcpy(ms, &bits, sizeof *ms);
    }
    return e;
}
