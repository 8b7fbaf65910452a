/* DLM: distributed large memory (P004).  One compute rank (MPI rank 0) runs the user
 * program; ranks >= 1 are memory ranks that hold the pages that do not fit in the
 * compute rank's resident capacity.  A DLM array is ordinary memory to the program:
 * touching a non-resident page faults, the fault engine fetches the page from its
 * memory rank and swaps a resident victim out.
 *
 * Engines (DLM_ENGINE, faithful to P004's thread structure):
 *   r3    one communication thread does everything (dequeue, request, receive, stop
 *         the user threads, install, swap a victim out, resume)
 *   r58   + a receive thread that receives into a buffer and queues an install
 *         request; the communication thread alternates between the two queues
 *   r77   the receive thread receives straight into the page, stops the user
 *         threads, swaps a victim out and resumes
 *   uffd  Linux userfaultfd: UFFDIO_COPY installs atomically (no thread is stopped),
 *         several faults in flight, write-protect tracks dirty pages (clean victims
 *         are dropped without write-back)
 *
 * Configuration (environment; dlm_startup_opts overrides it field by field):
 *   DLM_ENGINE        r3 | r58 | r77 | uffd              (default r77)
 *   DLM_PAGE_SIZE     bytes, K/M/G suffixes; a multiple of the OS page   (1M)
 *   DLM_CAPACITY      compute rank's resident capacity, >= 2 pages        (1G)
 *   DLM_MEM_CAPACITY  capacity of each memory rank                        (4G)
 *   DLM_TIMEOUT       seconds to wait for a memory rank before declaring it
 *                     dead or hung (default 30)
 *   DLM_UFFD_WORKERS  uffd engine: fault-handling threads (default 4; at most half
 *                     the resident pages, so that faults in flight cannot evict
 *                     each other's pages before their threads run)
 *   DLM_UFFD_FALLBACK an engine to use, with a message, where userfaultfd is not
 *                     permitted (default: none, dlm_startup fails as unsupported)
 *
 * Limits: a DLM address must not be handed to a system call or to MPI as a buffer
 * (the kernel would fault on it); use dlm_get/dlm_put to move DLM data in bulk. */
#ifndef DLM_DLM_H
#define DLM_DLM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit statuses dlm_startup leaves with on the memory ranks and reports to rank 0. */
enum { DLM_OK = 0, DLM_EFAILED = 1, DLM_EUSAGE = 2, DLM_EUNSUPPORTED = 77 };

typedef struct dlm_options {
    const char *engine;     /* NULL: DLM_ENGINE or r77 */
    size_t page_size;       /* 0: DLM_PAGE_SIZE or 1 MiB */
    size_t capacity;        /* 0: DLM_CAPACITY or 1 GiB */
    size_t mem_capacity;    /* 0: DLM_MEM_CAPACITY or 4 GiB */
    double timeout;         /* 0: DLM_TIMEOUT or 30 s */
    int uffd_workers;       /* 0: DLM_UFFD_WORKERS or 4 */
} dlm_options;

/* Collective over MPI_COMM_WORLD (initialises MPI with MPI_THREAD_MULTIPLE).  Rank 0
 * returns DLM_OK, or an error status with the reason in dlm_error(); it must then
 * leave through dlm_exit/dlm_shutdown (a bad configuration has ended the memory ranks
 * already with the same status; an engine that could not start has left them serving).
 * Memory ranks never return: they serve pages until rank 0 calls dlm_shutdown, then
 * exit(0).  On rank 0 start-up is bounded by the timeout: a memory rank that dies or
 * hangs meanwhile is named and rank 0 exits with DLM_EFAILED. */
int dlm_startup(int *argc, char ***argv);
int dlm_startup_opts(int *argc, char ***argv, const dlm_options *opts);
/* Rank 0: ends the memory ranks (each acknowledges) and MPI, every wait bounded by the
 * timeout (a dead memory rank: named, exit status DLM_EFAILED).  Safe after a failed
 * dlm_startup. */
void dlm_shutdown(void);
/* dlm_shutdown, then exit(status). */
void dlm_exit(int status)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

/* Zeroed DLM memory, page-aligned; NULL (reason in dlm_error()) when the memory
 * ranks cannot hold it beside what is allocated already. */
void *dlm_alloc(size_t size);
void dlm_free(void *ptr);

/* Bulk copies between DLM memory and ordinary memory: any size and alignment, across
 * pages; neither faults nor changes residency (resident pages are copied locally,
 * the rest moves straight to/from the memory ranks).  0 on success. */
int dlm_get(const void *dlm_addr, void *local, size_t size);
int dlm_put(void *dlm_addr, const void *local, size_t size);
/* count blocks of blocklen bytes, dlm_stride apart in DLM memory and local_stride
 * apart locally (a multi-dimensional sub-block). */
int dlm_get_strided(const void *dlm_addr, size_t dlm_stride, void *local, size_t local_stride,
                    size_t blocklen, size_t count);
int dlm_put_strided(void *dlm_addr, size_t dlm_stride, const void *local, size_t local_stride,
                    size_t blocklen, size_t count);

const char *dlm_error(void);

/* The configuration in force (after defaults and validation). */
typedef struct dlm_config {
    char engine[8];
    size_t page_size, capacity, mem_capacity;
    int memory_ranks, uffd_workers;
    double timeout;
    int uffd_write_protect; /* uffd: dirty pages tracked by write-protect */
    int uffd_user_mode_only; /* uffd: opened with UFFD_USER_MODE_ONLY (unprivileged) */
} dlm_config;
const dlm_config *dlm_get_config(void);

/* Fault statistics since startup or the last reset.  Timing points per fault, as
 * P004 measured them:  A segv -> dequeued by the communication thread,
 * B request sent -> page received, C install + swap-out (threads stopped),
 * D resume -> the faulting thread continues.  Sums in seconds. */
typedef struct dlm_stats {
    uint64_t faults, evictions, writebacks, stops, remote_gets, remote_puts;
    uint64_t bytes_in, bytes_out;
    double a_sum, b_sum, c_sum, d_sum;
    uint64_t a_n, b_n, c_n, d_n;
} dlm_stats;
void dlm_stats_get(dlm_stats *out);
void dlm_stats_reset(void);

/* MPI point-to-point bandwidth between the memory ranks and rank 0 over the same
 * communicator the pages travel on: each of `ranks` memory ranks (1..) sends `reps`
 * messages of `bytes` at once; returns bytes/s received by rank 0 (-1 on error). */
double dlm_measure_bandwidth(size_t bytes, int reps, int ranks);

#ifdef __cplusplus
}
#endif
#endif
