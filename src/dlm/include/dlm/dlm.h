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
 *   DLM_FAULT_TIMING  1: time every fault (dlm_fault_timing_get); default 0, and then
 *                     the fault path takes no time stamps for it
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
    int fault_timing;       /* 0: DLM_FAULT_TIMING or off; 1 on; -1 off */
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
    int fault_timing;        /* per-fault timing on */
} dlm_config;
const dlm_config *dlm_get_config(void);

/* Fault statistics since startup or the last reset. */
typedef struct dlm_stats {
    uint64_t faults, evictions, writebacks, stops, remote_gets, remote_puts;
    uint64_t bytes_in, bytes_out;
} dlm_stats;
void dlm_stats_get(dlm_stats *out);
/* Zeroes the statistics and the fault timing (which first waits for the exchanges in
 * flight to end, so that none straddles the reset). */
void dlm_stats_reset(void);

/* Per-fault timing, P004 figs. 2.4 (R58) and 3.2 (R77), when DLM_FAULT_TIMING is on.
 * The moments of one page exchange, as P004 names them:
 *   A1  the fault handler runs (P004: "Segv 発生直後")
 *   A2  the communication thread takes the request off the internal queue and sends it
 *   A3  the page has been received
 *   A4  installing begins: the user threads are being stopped
 *   A5  the user threads resume
 *   A6  the whole exchange is over (the victim written back to its memory rank)
 *   R   the faulting thread runs again
 * Points (each a distribution over the faults):
 *   a = A2-A1    b = A3-A2    q = A4-A3 (R58's external queue; P004 fig. 2.4 calls it C)
 *   c = A5-A4 (install + swap-out with the threads stopped)    d = A6-A5
 *   wake = R-A5 (not in P004)    exchange = A6-A1 (= a+b+q+c+d)    stall = R-A1
 * The SIGSEGV engines copy the victim out while the threads are stopped and send it
 * after they resume, so P004's "send the swap-out page" falls in d, not c.
 * uffd: the kernel raises the fault and wakes the thread, so a, wake and stall are not
 * observable (n = 0); its exchange runs from A2 (a worker reads the fault message) to
 * A6, and c is the swap-out before the fetch plus UFFDIO_COPY after it.
 * Counts: every point an engine observes has one entry per fault. */
enum {
    DLM_TP_A, DLM_TP_B, DLM_TP_Q, DLM_TP_C, DLM_TP_D,
    DLM_TP_WAKE, DLM_TP_EXCHANGE, DLM_TP_STALL, DLM_TP_N
};
typedef struct dlm_timing_point {
    uint64_t n;
    double sum, max; /* seconds */
    double p50, p99; /* seconds, from a log histogram: within 1/128 of the value */
} dlm_timing_point;
typedef struct dlm_fault_timing {
    int enabled;
    dlm_timing_point pt[DLM_TP_N];
    uint64_t backwards; /* intervals with a missing or out-of-order stamp: 0 */
    uint64_t in_flight; /* exchanges still running when read (after waiting the timeout) */
} dlm_fault_timing;
/* Waits (up to the timeout) for the exchanges in flight, then reads; enabled = 0 when off. */
void dlm_fault_timing_get(dlm_fault_timing *out);
const char *dlm_timing_point_name(int point); /* "a", "b", "q", "c", "d", "wake", ... */

/* MPI point-to-point bandwidth between the memory ranks and rank 0 over the same
 * communicator the pages travel on: each of `ranks` memory ranks (1..) sends `reps`
 * messages of `bytes` at once; returns bytes/s received by rank 0 (-1 on error). */
double dlm_measure_bandwidth(size_t bytes, int reps, int ranks);

#ifdef __cplusplus
}
#endif
#endif
