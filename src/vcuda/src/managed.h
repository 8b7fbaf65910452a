/* vcuda managed memory: the host side of cudaMallocManaged allocations and __managed__
 * variables, kept coherent with the device across the network (no CUDA types here; the
 * runtime entry points are cudart_managed.c's).
 *
 * A managed range has one address on both sides: the server's device allocation (or
 * module global) at D, and a host mapping at D made by the pager (umstudy/pager.h), so a
 * pointer means the same to the program, to kernels and inside data structures.  The
 * semantics are those of a device whose concurrentManagedAccess is 0:
 *   - before device work that may touch a range (a kernel or graph launch on a stream
 *     the range is visible to, a copy or set, a prefetch to the device), the pages the
 *     host wrote since the last such point go to the server: runs of dirty pages, each
 *     one chunked transfer (VCUDA_FLAG_SYNC: complete before the work is queued);
 *   - a launch leaves the host's copy invalid: the pages are dropped, and the host's
 *     first touch of one after that fetches it (VCUDA_MANAGED_PAGE bytes, default 64
 *     KiB, with readahead of up to VCUDA_MANAGED_READAHEAD pages, default 32, on
 *     sequential faults); pages are installed read-only and the first write to one
 *     marks it dirty;
 *   - a host touch between a launch and the synchronization that follows (an error on
 *     such a device with the real runtime) is defined here: the touch waits, the fault
 *     synchronizes the device (cudaDeviceSynchronize) and then fetches the page;
 *   - ranges attached to the host (cudaMemAttachHost) are not touched by launches;
 *     ranges attached to one stream only by launches on that stream;
 *   - a newly allocated range is zeros on the server (set there), so first touches
 *     before any device work install zeros without a transfer (a write: the readahead
 *     window writable and dirty at once, as a program initializing its data needs).
 * Faults are caught by userfaultfd where the process may use it with write-protect
 * faults (VCUDA_MANAGED_ENGINE=uffd), else by mprotect + SIGSEGV (=segv); the default
 * (auto) takes the first that works.  A system call given an absent page fails with
 * EFAULT under SIGSEGV and user-mode-only userfaultfd (read(2) into managed memory:
 * touch it first).  The runtime itself reads and writes managed memory only where it is
 * present (a flush), or not at all (copies take it as device memory).
 *
 * Failures in a fault (the server lost) cannot be returned to the access that faulted:
 * they are written to stderr with the address and the process aborts. */
#ifndef VCUDA_MANAGED_H
#define VCUDA_MANAGED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The reasons below: at most this many bytes (the callbacks' why: VCUDA_WHY_LEN). */
#define VCUDA_MANAGED_WHY_LEN 512

enum { VCUDA_ATTACH_GLOBAL = 1, VCUDA_ATTACH_HOST = 2, VCUDA_ATTACH_SINGLE = 4 }; /* = cudaMemAttach* */

/* How pages cross, given by the runtime (its calls, with its error handling and device
 * output): 0, or -1 with the reason in why (VCUDA_WHY_LEN bytes). */
typedef struct {
    int (*to_device)(int dev, uint64_t dst, const void *src, size_t n, char *why);
    int (*from_device)(int dev, void *dst, uint64_t src, size_t n, char *why);
    int (*synchronize)(int dev, char *why);
} vcuda_managed_ops;
void vcuda_managed_init(const vcuda_managed_ops *ops);

/* Where a managed allocation of `size` bytes goes: `bytes` of device memory are to be
 * allocated, and the range starts at the first multiple of `align` in them (whole
 * pages of its own, so no two ranges share a page).  0, or -1 with the reason for a
 * bad VCUDA_MANAGED_* setting (read once, at the first call). */
int vcuda_managed_layout(size_t size, size_t *bytes, size_t *align, char *why);

/* The host side of a new managed allocation [dptr, +size) of device dev (inside the
 * device allocation at raw, see vcuda_managed_layout), zeros on the server: 0, or -1
 * with the reason (errno EEXIST: the address is taken in this process, EINVAL: a bad
 * VCUDA_MANAGED_* setting). */
int vcuda_managed_map(int dev, uint64_t dptr, size_t size, unsigned attach, uint64_t raw, char *why);
/* Forgets the allocation at dptr (unmapping it), its device allocation's start in *raw;
 * 0 if there is none. */
int vcuda_managed_unmap(uint64_t dptr, uint64_t *raw);
/* The n __managed__ variables [dptr[i], +size[i]) of a module on device dev: the pages
 * holding them mapped (variables whose pages touch share a range); only their bytes
 * ever cross.  0 or -1 with the reason. */
int vcuda_managed_map_vars(int dev, const uint64_t *dptr, const size_t *size, size_t n, char *why);
/* Every range of device dev forgotten and unmapped (cudaDeviceReset freed them). */
void vcuda_managed_forget_device(int dev);

/* Is [p, +n) inside one managed range?  (n 0: is p.)  Its device in *dev. */
int vcuda_managed_find(const void *p, size_t n, int *dev);

/* Device work on device dev in the stream `stream` (an opaque key, NULL for the default
 * ones) is about to be queued: dirty pages of the ranges it may touch go to the server
 * and the host copies are dropped.  0, or -1 with the reason. */
int vcuda_managed_before_launch(int dev, const void *stream, char *why);
/* A copy or set reads [p, +n) on the device: its dirty pages go first. */
int vcuda_managed_device_reads(const void *p, size_t n, char *why);
/* A copy or set writes [p, +n) on the device: dirty pages go first, then the host's
 * copies of the pages are dropped. */
int vcuda_managed_device_writes(const void *p, size_t n, char *why);
/* The device has finished all work queued (cudaDeviceSynchronize succeeded). */
void vcuda_managed_synchronized(int dev);
/* Prefetch [p, +n): to the device (dirty pages sent) or to the host (absent pages
 * fetched now).  0 or -1 with the reason. */
int vcuda_managed_prefetch(const void *p, size_t n, int to_host, int location, char *why);
/* cudaStreamAttachMemAsync: the range starting at p attached as given. */
int vcuda_managed_attach(const void *p, unsigned attach, const void *stream);

/* Advice for the pages of [p, +n), and the attributes of those pages (locations: device
 * ordinals, -1 the host, -2 none or not all the same). */
enum { VCUDA_ADVICE_READ_MOSTLY = 1, VCUDA_ADVICE_PREFERRED, VCUDA_ADVICE_ACCESSED_BY };
int vcuda_managed_advise(const void *p, size_t n, int what, int set, int location);
typedef struct {
    int read_mostly, preferred_location, last_prefetch_location;
    uint64_t accessed_by; /* bit d: device d; bit 63: the host */
} vcuda_managed_attrs;
int vcuda_managed_attributes(const void *p, size_t n, vcuda_managed_attrs *out);

/* What moved, since the start.  Printed as one JSON line on stderr at exit with
 * VCUDA_STATS=1 (vcuda_managed_stats_print); vcuda_managed_get_stats is exported by the
 * stand-in (a program or test finds it with dlsym, as vcuda_stand_in). */
typedef struct {
    uint64_t launches;       /* device work that could touch managed memory */
    uint64_t flushes;        /* of those, with dirty pages to send */
    uint64_t bytes_to_device, transfers_to_device;
    uint64_t faults, pages_fetched, bytes_from_device, transfers_from_device, zero_fills;
    uint64_t write_faults, fault_syncs, pages_dropped, prefetches;
} vcuda_managed_stats;
void vcuda_managed_get_stats(vcuda_managed_stats *out);
void vcuda_managed_stats_print(void);

#ifdef __cplusplus
}
#endif
#endif
