/* dlm-host-probe: what this machine charges for the steps DLM's timing points are made
 * of, one page at a time, without MPI, so that a breakdown (fault-breakdown.sh) can be
 * read against the host:
 *   copy_resident     memcpy of a page into memory touched before (R3 and R58 receive
 *                     into such a buffer; uffd's workers fetch into one)
 *   copy_first_touch  memcpy of a page into a memfd page whose memory was just given back
 *                     (FALLOC_FL_PUNCH_HOLE, as a SIGSEGV engine's eviction leaves it): the
 *                     kernel allocates and zeroes it under the copy (R3 and R58: in c;
 *                     R77, which receives straight into the page: in b)
 *   uffd_copy         UFFDIO_COPY of a page into a dropped (MADV_DONTNEED) page of a
 *                     registered range: uffd's install
 *   mprotect_pair     mprotect of a page to PROT_NONE and back (a SIGSEGV install and
 *                     swap-out change two pages' protection)
 *   futex_wake        one thread wakes another sleeping in FUTEX_WAIT until it runs: each
 *                     hand-off between DLM's threads (a: fault -> communication thread;
 *                     R58/R77's b: communication -> receive thread; wake: resume ->
 *                     the faulting thread)
 * Each: median, min and p99 of --iterations, in us.  A step the kernel refuses
 * (userfaultfd not permitted) is reported as unsupported with the reason. */
#define _GNU_SOURCE
#include "umstudy/pager.h"
#include "umstudy/support.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static size_t g_page;
static long long g_iters;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void emit(const char *step, double *v, const char *what)
{
    qsort(v, (size_t)g_iters, sizeof *v, cmp);
    ums_rec r;
    ums_rec_begin(&r, step, v[g_iters / 2], "us");
    ums_rec_num(&r, "min_us", v[0]);
    ums_rec_num(&r, "p99_us", v[(size_t)((double)(g_iters - 1) * 0.99)]);
    ums_rec_str(&r, "what", what);
    ums_rec_emit(&r);
    fprintf(stderr, "dlm-host-probe: %-16s median %8.2f us  (min %.2f, p99 %.2f)\n", step, v[g_iters / 2], v[0],
            v[(size_t)((double)(g_iters - 1) * 0.99)]);
}

static void fail(const char *what)
{
    ums_fail("%s: %s", what, strerror(errno));
}

/* The probe's regions are never touched: their pages are dropped and filled directly. */
static void no_fault(ums_pager *pg, void *ctx, size_t page, int flags, int worker)
{
    (void)pg, (void)ctx, (void)page, (void)flags, (void)worker;
}

static void copies(char *src, double *v)
{
    char *dst = malloc(g_page);
    if (!dst)
        fail("malloc");
    memset(dst, 1, g_page);
    for (long long i = 0; i < g_iters; ++i) {
        src[0] = (char)i;
        double t0 = now_us();
        memcpy(dst, src, g_page);
        v[i] = now_us() - t0;
    }
    emit("copy_resident", v, "memcpy of a page into memory touched before");
    free(dst);

    /* the SIGSEGV engines' page: dropped as their eviction drops it, filled through the alias */
    char why[400];
    ums_pager *pg;
    ums_pager_config c = {.bytes = g_page, .page_size = g_page, .engine = UMS_PAGER_SEGV, .fault = no_fault,
                          .name = "dlm-host-probe"};
    if (ums_pager_create(&c, &pg, why, sizeof why) != 0)
        ums_fail("%s", why);
    char *m = ums_pager_alias(pg);
    for (long long i = 0; i < g_iters; ++i) {
        if (ums_pager_drop(pg, 0, 1) != 0)
            fail("dropping the page");
        double t0 = now_us();
        memcpy(m, src, g_page);
        v[i] = now_us() - t0;
    }
    emit("copy_first_touch", v, "memcpy of a page into a memfd page just hole-punched (allocated under the copy)");
    ums_pager_destroy(pg);
}

static void mprotects(double *v)
{
    char *m = mmap(NULL, 3 * g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        fail("mmap");
    memset(m, 0, 3 * g_page);
    for (long long i = 0; i < g_iters; ++i) {
        double t0 = now_us();
        if (mprotect(m + g_page, g_page, PROT_NONE) != 0 || mprotect(m + g_page, g_page, PROT_READ | PROT_WRITE) != 0)
            fail("mprotect");
        v[i] = now_us() - t0;
    }
    emit("mprotect_pair", v, "mprotect of a page inside a mapping to PROT_NONE and back");
    munmap(m, 3 * g_page);
}

/* uffd's install: a dropped page of the region filled by the pager (UFFDIO_COPY). */
static void uffd_copies(char *src, double *v)
{
    char why[400];
    ums_pager *pg;
    ums_pager_config c = {.bytes = g_page, .page_size = g_page, .engine = UMS_PAGER_UFFD, .workers = 1,
                          .fault = no_fault};
    if (ums_pager_create(&c, &pg, why, sizeof why) != 0) {
        if (errno != EPERM && errno != ENOSYS)
            ums_fail("%s", why);
        ums_rec r;
        ums_rec_begin_status(&r, "unsupported");
        ums_rec_str(&r, "step", "uffd_copy");
        ums_rec_str(&r, "reason", why);
        ums_rec_emit(&r);
        fprintf(stderr, "dlm-host-probe: uffd_copy not measured: %s\n", why);
        return;
    }
    for (long long i = 0; i < g_iters; ++i) {
        if (ums_pager_drop(pg, 0, 1) != 0)
            fail("dropping the page");
        double t0 = now_us();
        if (ums_pager_install(pg, 0, 1, src, UMS_PAGER_RW) != 0)
            fail("UFFDIO_COPY");
        v[i] = now_us() - t0;
    }
    emit("uffd_copy", v, "UFFDIO_COPY of a page into a dropped page of a registered range");
    ums_pager_destroy(pg);
}

/* futex ping: the waker stamps and wakes; the sleeper stamps when it runs. */
static _Atomic uint32_t g_word, g_done;
static double g_t_wake;

static void *sleeper(void *arg)
{
    double *v = arg;
    for (long long i = 0; i < g_iters; ++i) {
        while (atomic_load(&g_word) == 0)
            syscall(SYS_futex, &g_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        v[i] = now_us() - g_t_wake;
        atomic_store(&g_word, 0);
        atomic_store(&g_done, 1);
    }
    return NULL;
}

static void wakes(double *v)
{
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, v) != 0)
        fail("pthread_create");
    for (long long i = 0; i < g_iters; ++i) {
        struct timespec nap = {0, 200000}; /* let the sleeper reach FUTEX_WAIT */
        nanosleep(&nap, NULL);
        g_t_wake = now_us();
        atomic_store(&g_word, 1);
        syscall(SYS_futex, &g_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        while (!atomic_load(&g_done))
            sched_yield();
        atomic_store(&g_done, 0);
    }
    pthread_join(t, NULL);
    emit("futex_wake", v, "a thread asleep in FUTEX_WAIT, from FUTEX_WAKE until it runs");
}

int main(int argc, char **argv)
{
    size_t page = 64 << 10;
    long long iterations = 2000;
    const ums_arg args[] = {
        {"page-size", UMS_ARG_SIZE, &page, "bytes per page, a multiple of the OS page (default 64K, the quick size)",
         4096, 1e10, NULL},
        {"iterations", UMS_ARG_INT, &iterations, "repetitions of each step (default 2000)", 10, 1e7, NULL},
    };
    ums_args_parse(argc, argv,
                   "What this machine charges for the steps of a DLM page exchange (copies, UFFDIO_COPY, "
                   "mprotect, a futex hand-off), per page; JSON lines on stdout.",
                   args, sizeof args / sizeof args[0]);
    if (page % (size_t)sysconf(_SC_PAGESIZE))
        ums_usage_fail("--page-size %zu is not a multiple of the OS page size %ld", page, sysconf(_SC_PAGESIZE));
    g_page = page;
    g_iters = iterations;
    ums_json_init("dlm-host-probe");
    ums_param_int("page_size", (long long)page);
    ums_param_int("iterations", iterations);
    double *v = malloc(sizeof *v * (size_t)iterations);
    char *src = malloc(page);
    if (!v || !src)
        fail("malloc");
    memset(src, 7, page);
    copies(src, v);
    uffd_copies(src, v);
    mprotects(v);
    wakes(v);
    free(src);
    free(v);
    return 0;
}
