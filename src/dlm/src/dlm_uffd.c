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
 * b = the fetch, q = fetched -> copy, d = the bookkeeping after the copy.
 *
 * The userfaultfd, its workers and the ioctls are the pager's (umstudy/pager.h, engine
 * UMS_PAGER_UFFD with write tracking); frames, victims and the fetch are DLM's. */
#define _GNU_SOURCE
#include "dlm_internal.h"
#include "umstudy/pager.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_WORKERS = 64 };
static ums_pager *g_pager;
static char *g_bufs[MAX_WORKERS]; /* one page buffer per worker */

static size_t ps(void) { return dlm_g.cfg.page_size; }

static void check(int rc, const char *what)
{
    if (rc != 0)
        dlm_fatal("userfaultfd %s failed: %s", what, strerror(errno));
}

static void write_protect(size_t p, int on)
{
    check(ums_pager_protect(g_pager, p, 1, on ? UMS_PAGER_RO : UMS_PAGER_RW), "write-protect");
}

static void wake_range(size_t p) { check(ums_pager_wake(g_pager, p, 1), "wake"); }

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
    ums_pager_drop(g_pager, p, 1);
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
        uint64_t t_copy = t_read ? dlm_tick() : 0;
        check(ums_pager_install(g_pager, p, 1, buf, UMS_PAGER_RO), "copy");
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

/* Called by the pager's workers with each fault read from the userfaultfd. */
static void uffd_fault(ums_pager *pager, void *ctx, size_t p, int flags, int worker)
{
    (void)pager, (void)ctx;
    uint64_t t_read = dlm_timing_on ? dlm_tick() : 0;
    if (flags & UMS_PAGER_WP) {
        wp_fault(p);
        return;
    }
    /* The pool may be larger than DLM_UFFD_WORKERS where another region of the process
     * asked for more: those workers get their buffer on first use. */
    if (!g_bufs[worker] && !(g_bufs[worker] = calloc(1, ps())))
        dlm_fatal("uffd worker %d: out of memory for a page buffer", worker);
    missing(p, g_bufs[worker], worker, t_read);
}

static int start(void)
{
    dlm_state *g = &dlm_g;
    int workers = g->cfg.uffd_workers;
    for (int i = 0; i < workers; ++i) {
        g_bufs[i] = malloc(ps());
        if (!g_bufs[i]) {
            dlm_set_error("uffd worker %d: out of memory for a page buffer", i);
            return DLM_EFAILED;
        }
        memset(g_bufs[i], 0, ps()); /* no first-touch faults in the timings */
    }
    size_t bytes = g->area_pages * ps();
    ums_pager_config pc = {.bytes = bytes, .page_size = ps(), .engine = UMS_PAGER_UFFD, .track_writes = 1,
                           .workers = workers, .fault = uffd_fault};
    char why[400];
    if (ums_pager_create(&pc, &g_pager, why, sizeof why) != 0) {
        if (errno == EPERM || errno == ENOSYS) {
            dlm_set_error("%s, or use DLM_ENGINE=r77%s", why,
                          errno == EPERM ? " (DLM_UFFD_FALLBACK=r77 does so automatically)" : "");
            return DLM_EUNSUPPORTED;
        }
        dlm_set_error("cannot set up the %zu-byte DLM area: %s", bytes, why);
        return DLM_EFAILED;
    }
    g->area = ums_pager_base(g_pager);
    g->cfg.uffd_user_mode_only = ums_pager_user_mode_only(g_pager);
    g->cfg.uffd_write_protect = 1;
    return DLM_OK;
}

static void stop(void)
{
    ums_pager_stop(g_pager); /* the area stays mapped: the program may still hold pointers */
    for (int i = 0; i < MAX_WORKERS; ++i) {
        free(g_bufs[i]);
        g_bufs[i] = NULL;
    }
}

static void discard(size_t first, size_t n)
{
    dlm_discard_range(first, n, NULL);
    ums_pager_drop(g_pager, first, n); /* the next touch faults again */
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
