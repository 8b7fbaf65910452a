/* Managed memory in the libcudart stand-in: cudaMallocManaged, cudaMemPrefetchAsync,
 * cudaMemAdvise, __managed__ variables (__cudaRegisterManagedVar), and the device
 * attributes that advertise managed, pageable or mapped host memory.  Kept together
 * because they are one model of memory, whose handling changes in one place: each call
 * is refused by name (a __managed__ variable ends the program at registration), and the
 * attributes read as absent so that programs which check take their explicit-copy path.
 * cudaMemRangeGetAttribute(s) and cudaStreamAttachMemAsync are the generated refusals
 * (cudart_stub.h). */
#define _GNU_SOURCE
#include "cudart_internal.h"

EXPORT void __cudaRegisterManagedVar(void **handle, void **host_var_ptr, char *device_address,
                                     const char *device_name, int ext, size_t size, int constant, int global)
{
    (void)handle, (void)host_var_ptr, (void)device_address, (void)ext, (void)size, (void)constant, (void)global;
    fprintf(stderr, "vcuda: __managed__ variable %s: managed memory cannot be remoted; this program cannot run under vcuda\n",
            device_name);
    exit(1);
}

/* Managed, pageable and mapped (zero-copy) host memory cannot cross the network: report them absent, so that
 * programs which check (umbench does) take their explicit-copy path. */
int rt_hidden_attribute(int attr)
{
    return attr == cudaDevAttrManagedMemory || attr == cudaDevAttrConcurrentManagedAccess ||
           attr == cudaDevAttrPageableMemoryAccess || attr == cudaDevAttrPageableMemoryAccessUsesHostPageTables ||
           attr == cudaDevAttrDirectManagedMemAccessFromHost || attr == cudaDevAttrCanMapHostMemory ||
           attr == cudaDevAttrHostNativeAtomicSupported || attr == cudaDevAttrCanUseHostPointerForRegisteredMem;
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
