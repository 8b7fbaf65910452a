/* The SIGSEGV engines of P004: R3, R58 and R77.
 *
 * The DLM area is a memfd mapped twice: the program's view, PROT_NONE where a page is
 * not resident and read-write where it is, and an always-writable alias through which
 * DLM's threads fill and drain pages.  A touch of a non-resident page raises SIGSEGV;
 * the handler queues the page on the internal queue (once, however many threads
 * touch it) and waits until it is installed.  How a queued page is brought in is what
 * tells the engines apart (P004 §3):
 *
 *   R3   the communication thread dequeues, requests, receives into a buffer, stops
 *        the user threads, copies the page in, swaps a victim out, resumes.
 *   R58  the communication thread only sends requests and installs; a receive
 *        thread receives pages into buffers and queues "install" requests on the
 *        external queue; the communication thread alternates between the queues.
 *   R77  the receive thread receives straight into the page (through the alias),
 *        then stops the user threads, swaps a victim out and resumes; the
 *        communication thread only sends requests.
 *
 * Stopping the user threads is what P004's engines do to install and evict safely,
 * and it is their main cost; it is kept (dlm_stop_world) though the alias alone
 * would make installing safe.  The page-table lock is taken before the world stops,
 * so no stopped thread can hold it.
 *
 * The mapping, the SIGSEGV handler and installing and dropping pages are the pager's
 * (umstudy/pager.h, engine UMS_PAGER_SEGV); the queues, threads and stops are DLM's. */
#define _GNU_SOURCE
#include "dlm_internal.h"
#include "umstudy/pager.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { R3, R58, R77 };
enum { QCAP = 8192, MAXOUT = 1024, NBUF = 16 };

static int g_kind;
static ums_pager *g_pager;
static char *g_alias;
static _Atomic int g_running;
static _Atomic uint32_t g_bell; /* rung on every enqueue (internal or external) */
static pthread_t g_comm, g_recv;
static int g_have_recv;
static char *g_wbbuf; /* the victim's bytes, copied out while the world is stopped */

/* Internal queue (faulted pages) and external queue (R58: received, to install). */
static size_t g_iq[QCAP], g_iq_head, g_iq_len;
static struct {
    size_t page;
    int buf;
} g_xq[NBUF];
static size_t g_xq_head, g_xq_len;
/* Requests sent and not yet received (R58, R77); the slot index is the reply's tag. */
static struct {
    size_t page;
    double t_req;
    int used;
} g_out[MAXOUT];
static _Atomic uint32_t g_nout; /* requests in flight: the receive thread sleeps at 0 */
static char *g_bufs; /* R3: one buffer; R58: the pool */
static int g_buf_free[NBUF], g_nbuf_free;

static size_t page_bytes(void) { return dlm_g.cfg.page_size; }
static char *alias_of(size_t p) { return g_alias + p * page_bytes(); }

static void ring_bell(void)
{
    atomic_fetch_add(&g_bell, 1);
    dlm_futex_wake(&g_bell);
}

/* ---- the fault handler ----------------------------------------------------------------- */

/* Called by the pager's SIGSEGV handler on the faulting thread. */
static void segv_fault(ums_pager *pager, void *ctx, size_t p, int flags, int worker)
{
    (void)pager, (void)ctx, (void)flags, (void)worker;
    dlm_state *g = &dlm_g;
    dlm_page *pg = &g->pages[p];
    /* The stamps of the exchange this thread asked for live here while it waits. */
    int timing = dlm_timing_on;
    dlm_fault_clock clk;
    uint64_t t_fault = timing ? dlm_tick() : 0;
    int mine = 0;
    for (;;) {
        uint64_t asked = 0, resumed = 0, ran = 0;
        int queued = 0, done = 0;
        dlm_lock();
        uint32_t seq = atomic_load(&pg->seq);
        if (mine && timing && clk.t[M_RESUMED]) {
            /* The exchange is over and this thread runs again.  Its page may be gone
             * already (swapped out before the thread ran): a new fault from now. */
            asked = clk.t[M_FAULT];
            resumed = clk.t[M_RESUMED];
            ran = t_fault = dlm_tick();
            mine = 0;
        }
        if (pg->state == PG_RESIDENT) {
            done = 1;
        } else if (pg->state == PG_REMOTE && pg->remote_ops == 0 && g_iq_len < QCAP) {
            pg->state = PG_QUEUED;
            if (timing) {
                memset(&clk, 0, sizeof clk);
                clk.t[M_FAULT] = t_fault;
                pg->clock = &clk;
                dlm_timing_begin();
            }
            g_iq[(g_iq_head + g_iq_len++) % QCAP] = p;
            dlm_page_changed(p);
            seq = atomic_load(&pg->seq);
            mine = queued = 1;
        }
        dlm_unlock();
        if (queued) {
            atomic_fetch_add(&dlm_st.faults, 1); /* one per page fetched, as uffd counts */
            ring_bell();
        }
        if (resumed) {
            dlm_timing_span(DLM_TP_WAKE, resumed, ran);
            dlm_timing_span(DLM_TP_STALL, asked, ran);
        }
        if (done)
            break;
        dlm_wait_page(p, seq);
    }
}

/* ---- installing a page and swapping a victim out (all engines) --------------------------- */

static void check_protect(int rc, size_t p)
{
    if (rc != 0)
        dlm_fatal("mprotect of DLM page %zu failed: %s%s", p, strerror(errno),
                  errno == ENOMEM ? " (the mapping count reached vm.max_map_count)" : "");
}

/* No access, and the frame's memory given back. */
static void drop_page(size_t p) { check_protect(ums_pager_drop(g_pager, p, 1), p); }

/* src: the received page, or NULL when it was received into the alias already. */
static void install(size_t p, const char *src)
{
    dlm_state *g = &dlm_g;
    uint64_t t_install = dlm_timing_on ? dlm_tick() : 0;
    dlm_fault_clock clk;
    size_t victim = 0;
    int have_victim = 0;
    dlm_lock();
    dlm_stop_world();
    if (g->frames_used >= g->frames)
        have_victim = dlm_pick_victim(&victim);
    if (!have_victim)
        g->frames_used++; /* room, or every resident page pinned: over capacity for now */
    if (have_victim) {
        memcpy(g_wbbuf, alias_of(victim), page_bytes());
        drop_page(victim);
    }
    check_protect(ums_pager_install(g_pager, p, 1, src, UMS_PAGER_RW), p);
    g->pages[p].state = PG_RESIDENT;
    dlm_ring_push(p);
    /* The faulting thread's stamps are copied now: once it runs, they are gone. */
    dlm_fault_clock *fc = g->pages[p].clock;
    if (fc) {
        fc->t[M_INSTALL] = t_install;
        fc->t[M_RESUMED] = dlm_tick();
        clk = *fc;
        g->pages[p].clock = NULL;
    }
    dlm_page_changed(p);
    dlm_resume_world();
    dlm_unlock();
    dlm_wake_page(p);
    if (have_victim) {
        /* Every victim goes back: these engines do not track dirtiness. */
        dlm_write_back(victim, g_wbbuf);
        dlm_lock();
        g->pages[victim].state = PG_REMOTE;
        dlm_page_changed(victim);
        dlm_unlock();
        dlm_wake_page(victim);
        atomic_fetch_add(&dlm_st.evictions, 1);
    }
    if (fc) {
        clk.t[M_DONE] = dlm_tick();
        dlm_timing_exchange(&clk);
        dlm_timing_end();
    }
}

/* ---- queues --------------------------------------------------------------------------------- */

static int iq_pop(size_t *p)
{
    int ok = 0;
    dlm_lock();
    if (g_iq_len) {
        *p = g_iq[g_iq_head];
        g_iq_head = (g_iq_head + 1) % QCAP;
        g_iq_len--;
        ok = 1;
        if (dlm_g.pages[*p].clock)
            dlm_g.pages[*p].clock->t[M_DEQUEUED] = dlm_tick();
    }
    dlm_unlock();
    return ok;
}

static void wait_bell(uint32_t seen)
{
    if (atomic_load(&g_bell) == seen)
        dlm_futex_wait(&g_bell, seen);
}

/* Sends the request for page p, remembering it under a free slot (its reply tag).
 * Returns 0 when every slot is taken (the page goes back to the queue front). */
static int send_request(size_t p)
{
    int slot = -1;
    dlm_lock();
    for (int i = 0; i < MAXOUT; ++i)
        if (!g_out[i].used) {
            slot = i;
            g_out[i].used = 1;
            g_out[i].page = p;
            g_out[i].t_req = dlm_now();
            break;
        }
    dlm_unlock();
    if (slot < 0)
        return 0;
    /* Counted before the request leaves, so no reply can come while the count is 0. */
    if (atomic_fetch_add(&g_nout, 1) == 0)
        dlm_futex_wake(&g_nout);
    dlm_msg m = {OP_GET_PAGE, slot, dlm_slot(p), 0, page_bytes()};
    dlm_send_msg(dlm_owner(p), &m, "a page request");
    return 1;
}

/* The receive thread's wait: probes for any page; a request older than the timeout
 * names its memory rank as dead or hung.  Returns 0 at shutdown. */
static int probe_page(MPI_Message *msg, MPI_Status *st)
{
    for (unsigned spin = 0;; ++spin) {
        /* Nothing asked for: sleep instead of polling MPI (the cores are the program's). */
        while (atomic_load(&g_nout) == 0 && atomic_load(&g_running))
            dlm_futex_wait(&g_nout, 0);
        int flag = 0;
        int rc = MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, dlm_g.comm_page, &flag, msg, st);
        if (rc != MPI_SUCCESS)
            dlm_fatal("receiving pages failed (MPI error %d): a memory rank died", rc);
        if (flag)
            return 1;
        if (!atomic_load(&g_running))
            return 0;
        if ((spin & 255) == 255) {
            double now = dlm_now();
            dlm_lock();
            int late = -1;
            for (int i = 0; i < MAXOUT; ++i)
                if (g_out[i].used && now - g_out[i].t_req > dlm_g.cfg.timeout) {
                    late = i;
                    break;
                }
            size_t page = late >= 0 ? g_out[late].page : 0;
            dlm_unlock();
            if (late >= 0)
                dlm_fatal("memory rank %d did not answer within %.1f s during a page request (page %zu): it "
                          "died or hangs",
                          dlm_owner(page), dlm_g.cfg.timeout, page);
            sched_yield();
        }
    }
}

/* Receives a probed page within the deadline: a memory rank that dies after its reply
 * was matched but before all of it arrived would leave a blocking receive waiting
 * forever (seen with Open MPI's shared-memory transport under load). */
static void recv_page(void *dst, MPI_Message *msg, const MPI_Status *st)
{
    MPI_Request req;
    MPI_Imrecv(dst, (int)page_bytes(), MPI_BYTE, msg, &req);
    dlm_wait_req(&req, st->MPI_SOURCE, "a page transfer");
}

/* Takes the reply's slot: the page it carries (moment A3). */
static size_t finish_request(int slot)
{
    dlm_lock();
    size_t p = g_out[slot].page;
    g_out[slot].used = 0;
    if (dlm_g.pages[p].clock)
        dlm_g.pages[p].clock->t[M_RECEIVED] = dlm_tick();
    dlm_unlock();
    atomic_fetch_sub(&g_nout, 1);
    atomic_fetch_add(&dlm_st.bytes_in, page_bytes());
    return p;
}

/* ---- R3 ---------------------------------------------------------------------------------------- */

/* The next faulting page from the internal queue, sleeping on the bell while it is
 * empty; 0 once the engine stops. */
static int next_fault(size_t *p)
{
    while (atomic_load(&g_running)) {
        uint32_t seen = atomic_load(&g_bell);
        if (iq_pop(p)) return 1;
        wait_bell(seen);
    }
    return 0;
}

static void *r3_comm(void *arg)
{
    (void)arg;
    size_t p;
    while (next_fault(&p)) {
        int rank = dlm_owner(p);
        MPI_Request req;
        MPI_Irecv(g_bufs, (int)page_bytes(), MPI_BYTE, rank, 0, dlm_g.comm_page, &req);
        dlm_msg m = {OP_GET_PAGE, 0, dlm_slot(p), 0, page_bytes()};
        dlm_send_msg(rank, &m, "a page request");
        dlm_wait_req(&req, rank, "a page transfer");
        if (dlm_g.pages[p].clock) /* only this thread touches the exchange until install */
            dlm_g.pages[p].clock->t[M_RECEIVED] = dlm_tick();
        atomic_fetch_add(&dlm_st.bytes_in, page_bytes());
        install(p, g_bufs);
    }
    return NULL;
}

/* ---- R58 --------------------------------------------------------------------------------------- */

static void *r58_comm(void *arg)
{
    (void)arg;
    while (atomic_load(&g_running)) {
        uint32_t seen = atomic_load(&g_bell);
        int did = 0;
        /* External queue: one install. */
        size_t p = 0;
        int buf = -1;
        dlm_lock();
        if (g_xq_len) {
            p = g_xq[g_xq_head].page;
            buf = g_xq[g_xq_head].buf;
            g_xq_head = (g_xq_head + 1) % NBUF;
            g_xq_len--;
        }
        dlm_unlock();
        if (buf >= 0) {
            install(p, g_bufs + (size_t)buf * page_bytes());
            dlm_lock();
            g_buf_free[g_nbuf_free++] = buf;
            dlm_unlock();
            ring_bell(); /* the receive thread may be waiting for a buffer */
            did = 1;
        }
        /* Internal queue: one request. */
        if (iq_pop(&p)) {
            if (!send_request(p)) {
                dlm_lock();
                g_iq_head = (g_iq_head + QCAP - 1) % QCAP;
                g_iq[g_iq_head] = p;
                g_iq_len++;
                dlm_unlock();
            }
            did = 1;
        }
        if (!did)
            wait_bell(seen);
    }
    return NULL;
}

static void *r58_recv(void *arg)
{
    (void)arg;
    MPI_Message msg;
    MPI_Status st;
    while (probe_page(&msg, &st)) {
        int buf = -1;
        while (buf < 0) {
            uint32_t seen = atomic_load(&g_bell);
            dlm_lock();
            if (g_nbuf_free)
                buf = g_buf_free[--g_nbuf_free];
            dlm_unlock();
            if (buf < 0)
                wait_bell(seen);
        }
        recv_page(g_bufs + (size_t)buf * page_bytes(), &msg, &st);
        size_t p = finish_request(st.MPI_TAG);
        dlm_lock();
        g_xq[(g_xq_head + g_xq_len++) % NBUF].page = p;
        g_xq[(g_xq_head + g_xq_len - 1) % NBUF].buf = buf;
        dlm_unlock();
        ring_bell();
    }
    return NULL;
}

/* ---- R77 --------------------------------------------------------------------------------------- */

static void *r77_comm(void *arg)
{
    (void)arg;
    size_t p;
    while (next_fault(&p)) {
        while (!send_request(p))
            sched_yield();
    }
    return NULL;
}

static void *r77_recv(void *arg)
{
    (void)arg;
    MPI_Message msg;
    MPI_Status st;
    while (probe_page(&msg, &st)) {
        dlm_lock();
        size_t p = g_out[st.MPI_TAG].page;
        dlm_unlock();
        /* Straight into the page: the program's view stays PROT_NONE until install. */
        recv_page(alias_of(p), &msg, &st);
        finish_request(st.MPI_TAG);
        install(p, NULL);
    }
    return NULL;
}

/* ---- engine interface ------------------------------------------------------------------------- */

static int start(int kind)
{
    dlm_state *g = &dlm_g;
    size_t bytes = g->area_pages * page_bytes();
    g_kind = kind;
    int nbuf = kind == R58 ? NBUF : 1;
    g_wbbuf = malloc(page_bytes());
    g_bufs = malloc(page_bytes() * (size_t)nbuf);
    if (!g_wbbuf || !g_bufs) {
        dlm_set_error("out of memory for %d page buffers", nbuf + 1);
        return DLM_EFAILED;
    }
    memset(g_bufs, 0, page_bytes() * (size_t)nbuf); /* no first-touch faults in the timings */
    memset(g_wbbuf, 0, page_bytes());
    for (int i = 0; i < nbuf; ++i)
        g_buf_free[i] = i;
    g_nbuf_free = nbuf;
    if (dlm_threads_init(SIGRTMIN + 4) != 0) {
        dlm_set_error("cannot install the thread-stop signal handler: %s", strerror(errno));
        return DLM_EFAILED;
    }
    ums_pager_config pc = {.bytes = bytes, .page_size = page_bytes(), .engine = UMS_PAGER_SEGV,
                           .fault = segv_fault, .name = "dlm-area"};
    char why[300];
    if (ums_pager_create(&pc, &g_pager, why, sizeof why) != 0) {
        dlm_set_error("cannot set up the %zu-byte DLM area: %s", bytes, why);
        return DLM_EFAILED;
    }
    g->area = ums_pager_base(g_pager);
    g_alias = ums_pager_alias(g_pager);
    atomic_store(&g_running, 1);
    void *(*comm)(void *) = kind == R3 ? r3_comm : kind == R58 ? r58_comm : r77_comm;
    void *(*recv)(void *) = kind == R58 ? r58_recv : kind == R77 ? r77_recv : NULL;
    if (pthread_create(&g_comm, NULL, comm, NULL) != 0 ||
        (recv && pthread_create(&g_recv, NULL, recv, NULL) != 0)) {
        dlm_set_error("cannot start the DLM threads");
        return DLM_EFAILED;
    }
    g_have_recv = recv != NULL;
    dlm_threads_snapshot(); /* MPI's and DLM's threads are never stopped */
    return DLM_OK;
}

static void stop(void)
{
    atomic_store(&g_running, 0);
    ring_bell();
    dlm_futex_wake(&g_nout);
    pthread_join(g_comm, NULL);
    if (g_have_recv)
        pthread_join(g_recv, NULL);
    ums_pager_stop(g_pager); /* the area stays mapped: the program may still hold pointers */
}

static void discard(size_t first, size_t n) { dlm_discard_range(first, n, drop_page); }

static char *local_page(size_t p) { return alias_of(p); }

static int start_r3(void) { return start(R3); }
static int start_r58(void) { return start(R58); }
static int start_r77(void) { return start(R77); }

const dlm_engine dlm_engine_r3 = {"r3", start_r3, stop, discard, local_page, local_page};
const dlm_engine dlm_engine_r58 = {"r58", start_r58, stop, discard, local_page, local_page};
const dlm_engine dlm_engine_r77 = {"r77", start_r77, stop, discard, local_page, local_page};
