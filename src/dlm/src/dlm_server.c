/* A memory rank: holds slots_per_rank pages (its part of every DLM page, page p lives
 * on rank 1 + p % memory_ranks in slot p / memory_ranks) and answers rank 0's
 * requests in the order they arrive, which is what keeps a write-back ahead of the
 * next fetch of the same page.
 *
 * Replies go out non-blocking and the loop goes straight back to receiving: a memory
 * rank blocked in a send would deadlock against a rank-0 thread that must finish a
 * send to it (e.g. R77's receive thread writing a victim back) before it receives
 * again. */
#define _GNU_SOURCE
#include "dlm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

enum { CHUNK = 1 << 30, MAX_PENDING = 4096 };

/* Replies in flight, with the store range each reads from. */
static MPI_Request g_req[MAX_PENDING];
static const char *g_lo[MAX_PENDING], *g_hi[MAX_PENDING];
static int g_npending;

static void reap(int wait_one)
{
    int done[MAX_PENDING], ndone = 0;
    if (!g_npending)
        return;
    if (wait_one)
        MPI_Waitsome(g_npending, g_req, &ndone, done, MPI_STATUSES_IGNORE);
    else
        MPI_Testsome(g_npending, g_req, &ndone, done, MPI_STATUSES_IGNORE);
    if (ndone == MPI_UNDEFINED || ndone == 0)
        return;
    int k = 0;
    for (int i = 0; i < g_npending; ++i)
        if (g_req[i] != MPI_REQUEST_NULL) {
            g_req[k] = g_req[i];
            g_lo[k] = g_lo[i];
            g_hi[k] = g_hi[i];
            ++k;
        }
    g_npending = k;
}

static void send_all(const char *p, size_t len, int tag, MPI_Comm comm)
{
    for (size_t off = 0; off < len; off += CHUNK) {
        size_t n = len - off < CHUNK ? len - off : CHUNK;
        while (g_npending == MAX_PENDING)
            reap(1);
        MPI_Isend(p + off, (int)n, MPI_BYTE, 0, tag, comm, &g_req[g_npending]);
        g_lo[g_npending] = p + off;
        g_hi[g_npending] = p + off + n;
        g_npending++;
    }
}

/* Before [lo, hi) of the store changes: replies still reading it must finish.  The
 * receive is posted first, so both make progress whatever rank 0 does first. */
static void recv_into(char *at, size_t len, int tag)
{
    for (size_t off = 0; off < len; off += CHUNK) {
        size_t n = len - off < CHUNK ? len - off : CHUNK;
        MPI_Request r;
        MPI_Irecv(at + off, (int)n, MPI_BYTE, 0, tag, dlm_g.comm_req, &r);
        for (int i = 0; i < g_npending; ++i)
            if (g_lo[i] < at + off + n && at + off < g_hi[i])
                MPI_Wait(&g_req[i], MPI_STATUS_IGNORE);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    reap(0);
}

/* The next request.  MPI_Recv would poll a core flat out for the whole run; instead
 * poll while requests come (a fault's gap is well under 2 ms), then, with no reply in
 * flight (those need this rank's progress), sleep in growing steps up to 1 ms. */
static void next_request(dlm_msg *m)
{
    MPI_Request r;
    MPI_Irecv(m, (int)sizeof *m, MPI_BYTE, 0, TAG_REQ, dlm_g.comm_req, &r);
    double idle_since = 0;
    long nap_ns = 20000;
    for (unsigned spin = 1;; ++spin) {
        int done = 0;
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        if (spin % 64)
            continue;
        reap(0);
        double now = dlm_now();
        if (g_npending || !idle_since) {
            idle_since = g_npending ? 0 : now;
            continue;
        }
        if (now - idle_since > 0.002) {
            struct timespec ts = {0, nap_ns};
            nanosleep(&ts, NULL);
            nap_ns = nap_ns * 2 > 1000000 ? 1000000 : nap_ns * 2;
        }
    }
}

void dlm_serve(void)
{
    const dlm_config *c = &dlm_g.cfg;
    size_t slots = c->mem_capacity / c->page_size, ps = c->page_size;
    /* Untouched slots cost nothing and read as zeros (a fresh dlm_alloc). */
    char *store = mmap(NULL, slots * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (store == MAP_FAILED) {
        int me;
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
        fprintf(stderr, "dlm: memory rank %d: cannot reserve %zu bytes (DLM_MEM_CAPACITY)\n", me, slots * ps);
        MPI_Abort(MPI_COMM_WORLD, DLM_EFAILED);
    }
    for (;;) {
        dlm_msg m;
        next_request(&m);
        reap(0);
        char *at = store + m.slot * ps + m.off;
        switch (m.op) {
        case OP_GET_PAGE:
            send_all(store + m.slot * ps, ps, m.tag, dlm_g.comm_page);
            break;
        case OP_GET_RANGE:
            send_all(at, m.len, m.tag, dlm_g.comm_bulk);
            break;
        case OP_PUT:
            recv_into(at, m.len, m.tag);
            break;
        case OP_DISCARD:
            while (g_npending)
                reap(1);
            madvise(store + m.slot * ps, m.len * ps, MADV_DONTNEED);
            break;
        case OP_BANDWIDTH:
            /* Sent from the store, as pages are (off = repetitions, len = bytes). */
            for (uint64_t i = 0; i < m.off; ++i)
                send_all(store, m.len, m.tag, dlm_g.comm_bulk);
            break;
        case OP_SHUTDOWN:
            while (g_npending)
                reap(1);
            /* The acknowledgement rank 0 waits for (with its deadline) before MPI_Finalize. */
            MPI_Send(NULL, 0, MPI_BYTE, 0, m.tag, dlm_g.comm_bulk);
            munmap(store, slots * ps);
            return;
        default:
            fprintf(stderr, "dlm: memory rank: unknown request %d\n", m.op);
            MPI_Abort(MPI_COMM_WORLD, DLM_EFAILED);
        }
    }
}
