/* The userfaultfd engine: what P004's bottlenecks (stopping every thread to install a
 * page, one receive thread) look like without them.
 *
 * The DLM area is anonymous memory registered for missing-page and write-protect
 * faults.  DLM_UFFD_WORKERS threads each read fault messages and handle one at a
 * time, so as many faults as workers are in flight at once:
 *   missing page   reserve a frame (swapping a victim out if needed), fetch the page
 *                  into the worker's buffer, UFFDIO_COPY it in write-protected: the
 *                  kernel installs it atomically and wakes every thread waiting on
 *                  it; nobody is stopped.
 *   write-protect  the first write to a clean page: mark it dirty, lift the
 *                  protection (which wakes the writer).
 *   victim         clean: dropped (MADV_DONTNEED), its memory rank has it already;
 *                  dirty: write-protected (writers now wait), sent from where it
 *                  is, dropped, writers woken (they fault it back in).
 * Fault timing (dlm.h): the fault is raised and its thread woken inside the kernel, so
 * the exchange is timed from the moment a worker has read the fault message (A2):
 * c = reserving a frame and swapping the victim out (before the fetch) + UFFDIO_COPY,
 * b = the fetch, q = fetched -> copy, d = the bookkeeping after the copy. */
#define _GNU_SOURCE
#include "dlm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { MAX_WORKERS = 64 };
static int g_uffd = -1;
static _Atomic int g_running;
static pthread_t g_workers[MAX_WORKERS];
static int g_nworkers;

static size_t ps(void) { return dlm_g.cfg.page_size; }

static void uffd_ioctl(unsigned long req, void *arg, const char *what)
{
    while (ioctl(g_uffd, req, arg) != 0) {
        if (errno == EAGAIN)
            continue; /* the mm changed under the call (e.g. a concurrent munmap): retry */
        dlm_fatal("userfaultfd %s failed: %s", what, strerror(errno));
    }
}

static void write_protect(size_t p, int on)
{
    struct uffdio_writeprotect wp = {
        .range = {(unsigned long)dlm_page_addr(p), ps()},
        .mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0};
    uffd_ioctl(UFFDIO_WRITEPROTECT, &wp, "write-protect");
}

static void wake_range(size_t p)
{
    struct uffdio_range r = {(unsigned long)dlm_page_addr(p), ps()};
    uffd_ioctl(UFFDIO_WAKE, &r, "wake");
}

/* Victim p is PG_EVICTING (dlm_pick_victim): after this it is remote.  A dirty page
 * is write-protected and sent from where it is (no copy); writers wait on the
 * protection until it is dropped, then retry and fault it back in. */
static void evict(size_t p)
{
    dlm_state *g = &dlm_g;
    dlm_lock();
    int dirty = g->pages[p].dirty;
    dlm_unlock();
    if (dirty) {
        write_protect(p, 1);
        dlm_write_back(p, dlm_page_addr(p));
    }
    madvise(dlm_page_addr(p), ps(), MADV_DONTNEED);
    wake_range(p);
    dlm_lock();
    g->pages[p].state = PG_REMOTE;
    g->pages[p].dirty = 0;
    dlm_page_changed(p);
    dlm_unlock();
    dlm_wake_page(p);
    atomic_fetch_add(&dlm_st.evictions, 1);
}

/* t_read: when the fault message was read (fault timing; 0 when off). */
static void missing(size_t p, char *buf, int worker, uint64_t t_read)
{
    dlm_state *g = &dlm_g;
    dlm_page *pg = &g->pages[p];
    for (;;) {
        dlm_lock();
        uint32_t seq = atomic_load(&pg->seq);
        if (pg->state == PG_RESIDENT) {
            dlm_unlock();
            wake_range(p); /* installed since the fault was raised */
            return;
        }
        if (pg->state == PG_QUEUED) {
            dlm_unlock(); /* another worker's UFFDIO_COPY will wake this thread too */
            return;
        }
        if (pg->state == PG_EVICTING || pg->remote_ops) {
            dlm_unlock();
            dlm_wait_page(p, seq);
            continue;
        }
        pg->state = PG_QUEUED;
        dlm_page_changed(p);
        if (t_read)
            dlm_timing_begin();
        size_t victim = 0;
        int have_victim = 0;
        if (g->frames_used >= g->frames)
            have_victim = dlm_pick_victim(&victim);
        if (!have_victim)
            g->frames_used++; /* room, or every resident page pinned: over capacity for now */
        dlm_unlock();
        if (have_victim)
            evict(victim);
        uint64_t t_req = t_read ? dlm_tick() : 0;
        int rank = dlm_owner(p), tag = 1 + worker; /* comm_page tags: one per worker */
        MPI_Request req;
        MPI_Irecv(buf, (int)ps(), MPI_BYTE, rank, tag, g->comm_page, &req);
        dlm_msg m = {OP_GET_PAGE, tag, dlm_slot(p), 0, ps()};
        dlm_send_msg(rank, &m, "a page request");
        dlm_wait_req(&req, rank, "a page transfer");
        uint64_t t_recv = t_read ? dlm_tick() : 0;
        atomic_fetch_add(&dlm_st.bytes_in, ps());
        struct uffdio_copy c = {.dst = (unsigned long)dlm_page_addr(p), .src = (unsigned long)buf,
                                .len = ps(), .mode = UFFDIO_COPY_MODE_WP};
        uint64_t t_copy = t_read ? dlm_tick() : 0;
        uffd_ioctl(UFFDIO_COPY, &c, "copy");
        uint64_t t_woken = t_read ? dlm_tick() : 0; /* the copy wakes the waiting threads */
        dlm_lock();
        pg->state = PG_RESIDENT;
        pg->dirty = 0;
        dlm_ring_push(p);
        dlm_page_changed(p);
        dlm_unlock();
        dlm_wake_page(p);
        atomic_fetch_add(&dlm_st.faults, 1);
        if (t_read) {
            uint64_t t_done = dlm_tick();
            dlm_timing_span(DLM_TP_B, t_req, t_recv);
            dlm_timing_span(DLM_TP_Q, t_recv, t_copy);
            dlm_timing_ns(DLM_TP_C, (t_req - t_read) + (t_woken - t_copy));
            dlm_timing_span(DLM_TP_D, t_woken, t_done);
            dlm_timing_span(DLM_TP_EXCHANGE, t_read, t_done);
            dlm_timing_end();
        }
        return;
    }
}

static void wp_fault(size_t p)
{
    dlm_state *g = &dlm_g;
    dlm_lock();
    int resident = g->pages[p].state == PG_RESIDENT;
    if (resident) {
        g->pages[p].dirty = 1;
        /* Pinned: a victim chosen now would write-protect it and copy it out while
         * the protection is being lifted here, and lose the write it lets through. */
        g->pages[p].pins++;
    }
    int evicting = g->pages[p].state == PG_EVICTING;
    dlm_unlock();
    if (evicting)
        return; /* evict() wakes the writer once the page is gone */
    if (!resident) {
        wake_range(p); /* gone already: the writer retries and faults it back in */
        return;
    }
    write_protect(p, 0); /* also wakes the writer */
    dlm_lock();
    g->pages[p].pins--;
    /* Waiters on the page (dlm_free's dlm_lock_settled) wait for its sequence to move:
     * the writer may be done and the program freeing the array before this point. */
    dlm_page_changed(p);
    dlm_unlock();
    dlm_wake_page(p);
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    char *buf = malloc(ps());
    if (!buf)
        dlm_fatal("uffd worker: out of memory for a page buffer");
    memset(buf, 0, ps()); /* no first-touch faults in the timings */
    struct pollfd pfd = {g_uffd, POLLIN, 0};
    while (atomic_load(&g_running)) {
        if (poll(&pfd, 1, 20) <= 0)
            continue;
        struct uffd_msg msg;
        ssize_t n = read(g_uffd, &msg, sizeof msg);
        if (n != sizeof msg)
            continue; /* another worker took it (EAGAIN) */
        uint64_t t_read = dlm_timing_on ? dlm_tick() : 0;
        if (msg.event != UFFD_EVENT_PAGEFAULT)
            continue;
        size_t p = (size_t)((char *)(uintptr_t)msg.arg.pagefault.address - dlm_g.area) / ps();
        if (msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP)
            wp_fault(p);
        else
            missing(p, buf, id, t_read);
    }
    free(buf);
    return NULL;
}

/* userfaultfd(2) as an unprivileged process may use it: all faults where
 * vm.unprivileged_userfaultfd=1 (or with CAP_SYS_PTRACE), else user-mode faults only
 * (Linux >= 5.11), which is all DLM needs as long as no DLM address is handed to the
 * kernel (see dlm.h). */
static int open_uffd(char *why, size_t n)
{
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0)
        return fd;
    int e1 = errno;
    fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd >= 0) {
        dlm_g.cfg.uffd_user_mode_only = 1;
        return fd;
    }
    char sysctl[16] = "?";
    FILE *f = fopen("/proc/sys/vm/unprivileged_userfaultfd", "r");
    if (f) {
        if (!fgets(sysctl, sizeof sysctl, f))
            snprintf(sysctl, sizeof sysctl, "?");
        sysctl[strcspn(sysctl, "\n")] = 0;
        fclose(f);
    }
    snprintf(why, n,
             "userfaultfd is not permitted here (%s; with UFFD_USER_MODE_ONLY: %s; "
             "vm.unprivileged_userfaultfd=%s): set it to 1, run with CAP_SYS_PTRACE, or use "
             "DLM_ENGINE=r77 (DLM_UFFD_FALLBACK=r77 does so automatically)",
             strerror(e1), strerror(errno), sysctl);
    return -1;
}

static int start(void)
{
    dlm_state *g = &dlm_g;
    char why[400];
    g_uffd = open_uffd(why, sizeof why);
    if (g_uffd < 0) {
        dlm_set_error("%s", why);
        return DLM_EUNSUPPORTED;
    }
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP};
    if (ioctl(g_uffd, UFFDIO_API, &api) != 0) {
        dlm_set_error("userfaultfd has no write-protect support here (UFFDIO_API: %s; Linux >= 5.7 on "
                      "x86-64 needed to track dirty pages): use DLM_ENGINE=r77",
                      strerror(errno));
        close(g_uffd);
        return DLM_EUNSUPPORTED;
    }
    size_t bytes = g->area_pages * ps();
    g->area = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (g->area == MAP_FAILED) {
        dlm_set_error("cannot map the %zu-byte DLM area: %s", bytes, strerror(errno));
        return DLM_EFAILED;
    }
    struct uffdio_register reg = {.range = {(unsigned long)g->area, bytes},
                                  .mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP};
    if (ioctl(g_uffd, UFFDIO_REGISTER, &reg) != 0 || !(reg.ioctls & (1ULL << _UFFDIO_WRITEPROTECT))) {
        dlm_set_error("cannot register the DLM area with userfaultfd for missing and write-protect faults "
                      "(%s): use DLM_ENGINE=r77",
                      strerror(errno));
        return DLM_EUNSUPPORTED;
    }
    g->cfg.uffd_write_protect = 1;
    atomic_store(&g_running, 1);
    g_nworkers = g->cfg.uffd_workers;
    for (int i = 0; i < g_nworkers; ++i)
        if (pthread_create(&g_workers[i], NULL, worker, (void *)(intptr_t)i) != 0) {
            dlm_set_error("cannot start uffd worker %d", i);
            return DLM_EFAILED;
        }
    return DLM_OK;
}

static void stop(void)
{
    atomic_store(&g_running, 0);
    for (int i = 0; i < g_nworkers; ++i)
        pthread_join(g_workers[i], NULL);
    close(g_uffd);
}

static void discard(size_t first, size_t n)
{
    dlm_discard_range(first, n, NULL);
    madvise(dlm_page_addr(first), n * ps(), MADV_DONTNEED); /* the next touch faults again */
}

static char *for_get(size_t p) { return dlm_page_addr(p); }

static char *for_put(size_t p)
{
    dlm_lock();
    int was_dirty = dlm_g.pages[p].dirty;
    dlm_g.pages[p].dirty = 1;
    dlm_unlock();
    if (!was_dirty)
        write_protect(p, 0);
    return dlm_page_addr(p);
}

const dlm_engine dlm_engine_uffd = {"uffd", start, stop, discard, for_put, for_get};
