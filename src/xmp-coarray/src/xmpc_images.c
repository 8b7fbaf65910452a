/* Image control: sync memory / sync all / barrier / sync images, the collective calls
 * (allocation, deallocation, the end of the program), stopped and failed images, and
 * error termination.
 *
 * Every wait here is a polling loop over the transport's control words (xmpc_ctl),
 * never a blocking collective, and every SLOW_EVERY polls it looks at what the images
 * it waits for are doing:
 *   - an image that has stopped (xmpc_stop, xmpc_finalize) ends a synchronisation
 *     that involves it with XMPC_STAT_STOPPED_IMAGE (error termination without stat);
 *   - an image in error termination ends this one, with that image's message;
 *   - an image waited for in sync images that is itself waiting in a collective call
 *     this image has not made can never notify it: a deadlock, named;
 *   - XMPC_WAIT_TIMEOUT (seconds; unset or 0: no limit) bounds any one wait.
 * Collective calls first agree (each image writes the call it is in, with the
 * allocation's shape, into every other image's control memory and waits until all
 * have arrived: a barrier that also compares the calls) and reach the transport's own
 * collectives (a window's allocation and free) only when every image made the same
 * call, so different calls on different images are a named error, never a hang.
 * A transport without control words (gasnet) keeps its blocking barrier and sync
 * images and detects none of this. */
#define _POSIX_C_SOURCE 200809L
#include "xmpc_internal.h"

#include "umstudy/support.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define g xmpc_g

enum { SLOW_EVERY = 256 };

static struct {
    const xmpc_ctl *ctl;
    long *expected;     /* sync images: notifications awaited so far from each image */
    unsigned long seq;  /* collective calls this image has completed */
    double timeout;     /* XMPC_WAIT_TIMEOUT, 0: none */
    int terminating;
} s;

void xmpc_images_init(void)
{
    s.ctl = g.b->ctl;
    s.expected = calloc((size_t)g.n, sizeof *s.expected);
    if (!s.expected)
        xmpc_fatal(NULL, 0, "out of memory");
    const char *t = getenv("XMPC_WAIT_TIMEOUT");
    if (t && *t) {
        char *end;
        s.timeout = strtod(t, &end);
        if (*end || !(s.timeout >= 0))
            xmpc_fatal(NULL, 0, "XMPC_WAIT_TIMEOUT=%s is not a number of seconds (0: no limit)", t);
    }
}

const char *xmpc_errmsg(void) { return g.errmsg; }

int xmpc_stat_error(int *status, int code, int image, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (status) {
        vsnprintf(g.errmsg, sizeof g.errmsg, fmt, ap);
        va_end(ap);
        *status = code;
        return 1;
    }
    const char *line = xmpc_vreport(NULL, image, NULL, fmt, ap);
    va_end(ap);
    if (g.b)
        xmpc_error_termination(line, UMS_EXIT_FAILED);
    exit(UMS_EXIT_FAILED);
}

static int running_or_stat(int *status, const char *fn)
{
    char why[160];
    if (!xmpc_not_running(fn, why, sizeof why)) {
        xmpc_need_init(fn); /* the thread check */
        return 1;
    }
    xmpc_stat_error(status, XMPC_STAT_NOT_RUNNING, 0, "%s", why);
    return 0;
}

/* ---- error termination -------------------------------------------------------------- */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The message goes into this image's control area before it is marked failed, so an
 * image that sees the mark reads the whole message.  The abort waits (2 s at most)
 * until the others have printed it: the ones waiting in image control calls see it
 * within SLOW_EVERY polls and mark themselves failed after printing. */
_Noreturn void xmpc_error_termination(const char *line, int code)
{
    fflush(stdout);
    fflush(stderr);
    if (s.ctl && !s.terminating && g.state == XMPC_RUNNING) {
        s.terminating = 1;
        char msg[XMPC_MSG_BYTES] = "";
        snprintf(msg, sizeof msg, "%s", line);
        s.ctl->put_msg(g.me, msg);
        s.ctl->write(g.me, XMPC_W_LIFE, XMPC_LIFE_FAILED);
        /* Done when every other image has printed the message (it then marks itself
         * failed too) or is ending in error itself. */
        double t0 = ums_now();
        while (ums_now() - t0 < 2.0) {
            long gone = 0;
            for (int r = 0; r < g.n; ++r)
                gone += r != g.me && s.ctl->read(r, XMPC_W_LIFE) == XMPC_LIFE_FAILED;
            if (gone >= g.n - 1)
                break;
            sleep_ms(1);
        }
    }
    g.b->abort(code);
    exit(code);
}

/* Another image is in error termination: this one ends too, with its message. */
static _Noreturn void peer_failed(int rank)
{
    char msg[XMPC_MSG_BYTES];
    s.ctl->get_msg(rank, msg);
    const char *text = strncmp(msg, "xmpc: error: ", 13) ? msg : msg + 13;
    char line[XMPC_MSG_BYTES + 96];
    snprintf(line, sizeof line, "xmpc: error: image %d of %d (%s): error termination: image %d "
             "failed: %s", g.me + 1, g.n, g.b->name, rank + 1, text);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    s.terminating = 1;
    s.ctl->put_msg(g.me, msg); /* images waiting for this one see the first message */
    s.ctl->write(g.me, XMPC_W_LIFE, XMPC_LIFE_FAILED);
    g.b->abort(UMS_EXIT_FAILED);
    exit(UMS_EXIT_FAILED);
}

/* ---- waiting -------------------------------------------------------------------------- */

typedef struct {
    unsigned long polls;
    double start;
} waiter;

/* 1 on every SLOW_EVERY-th poll: time for the slow checks.  Ends this image if another
 * one is in error termination or the wait has passed XMPC_WAIT_TIMEOUT (the message
 * then says what `what` was waiting for). */
static int slow_check(waiter *w, const char *what)
{
    if (++w->polls % SLOW_EVERY)
        return 0;
    for (int r = 0; r < g.n; ++r)
        if (r != g.me && s.ctl->read(r, XMPC_W_LIFE) == XMPC_LIFE_FAILED)
            peer_failed(r);
    if (s.timeout > 0) {
        double now = ums_now();
        if (w->start == 0)
            w->start = now;
        else if (now - w->start > s.timeout)
            xmpc_fatal(NULL, 0, "%s: no progress for %g s (XMPC_WAIT_TIMEOUT)", what,
                       s.timeout);
    }
    return 1;
}

static const char *describe(const xmpc_coll *c, char *buf, size_t cap)
{
    switch (c->kind) {
    case XMPC_COLL_SYNC: snprintf(buf, cap, "sync all / barrier"); break;
    case XMPC_COLL_ALLOC:
        snprintf(buf, cap, "xmpc_coarray_alloc of '%s' (allocation #%lu)", c->name, c->gen);
        break;
    case XMPC_COLL_FREE:
        snprintf(buf, cap, "xmpc_coarray_free of '%s' (allocation #%lu)", c->name, c->gen);
        break;
    case XMPC_COLL_END: snprintf(buf, cap, "xmpc_finalize / xmpc_stop"); break;
    default: snprintf(buf, cap, "collective call kind %d", c->kind); break;
    }
    return buf;
}

static void format_shape(char *buf, size_t cap, const xmpc_shape *sh)
{
    size_t len = (size_t)snprintf(buf, cap, "%s", xmpc_type_name((xmpc_type)sh->type));
    if (sh->type == XMPC_BYTE && len < cap)
        len += (size_t)snprintf(buf + len, cap - len, "(%zu B)", sh->esize);
    for (int d = 0; d < sh->ndims && d < XMPC_MAX_DIMS && len < cap; ++d)
        len += (size_t)snprintf(buf + len, cap - len, "[%ld]", sh->dims[d]);
}

/* The images that have not stopped must all have made the same call; every image
 * compares with the same reference (the lowest such image), so all of them print the
 * same message. */
static void compare_calls(const xmpc_coll *all, const char *fn)
{
    int ref = -1;
    for (int r = 0; r < g.n && ref < 0; ++r)
        if (all[r].kind != XMPC_COLL_END)
            ref = r;
    for (int r = ref + 1; ref >= 0 && r < g.n; ++r) {
        const xmpc_coll *a = &all[ref], *b = &all[r];
        if (b->kind == XMPC_COLL_END)
            continue;
        if (a->kind == XMPC_COLL_ALLOC && b->kind == XMPC_COLL_ALLOC && a->gen == b->gen &&
            memcmp(&a->shape, &b->shape, sizeof a->shape) != 0) {
            char s0[192], sr[192];
            format_shape(s0, sizeof s0, &a->shape);
            format_shape(sr, sizeof sr, &b->shape);
            xmpc_fatal(NULL, 0, "coarray '%s' (allocation #%lu): xmpc_coarray_alloc: images "
                       "allocate this coarray with different shapes: %s on image %d, %s on "
                       "image %d", a->name, a->gen, s0, ref + 1, sr, r + 1);
        }
        if (a->kind != b->kind || a->gen != b->gen) {
            char da[160], db[160];
            xmpc_fatal(NULL, 0, "%s: images make different collective calls: image %d is in %s, "
                       "image %d in %s (allocation, deallocation and sync all are collective: "
                       "every image makes them in the same order)", fn, ref + 1,
                       describe(a, da, sizeof da), r + 1, describe(b, db, sizeof db));
        }
    }
}

_Static_assert(sizeof(xmpc_coll) <= XMPC_DESC_BYTES, "a collective call's slot is too small");

/* Collective call number s.seq + 1: arrives (the call's kind in the word, the whole
 * call in the slot unless it is a plain sync), waits until every image has arrived
 * there, and fills all[] with what each one called. */
static void arrive_and_wait(const xmpc_coll *mine, xmpc_coll *all, const char *fn)
{
    unsigned long k = ++s.seq;
    int parity = (int)(k & 1);
    long want = (long)(k << 8);
    s.ctl->arrive(want | mine->kind, mine->kind == XMPC_COLL_SYNC ? NULL : mine, sizeof *mine,
                  parity);
    waiter w = {0};
    for (int r = 0; r < g.n; ++r) {
        if (r == g.me) {
            all[r] = *mine;
            continue;
        }
        long a;
        while (((a = s.ctl->local(XMPC_W_ARRIVE(g.n) + 2 * r + parity)) & ~0xffL) != want)
            slow_check(&w, fn);
        if ((a & 0xff) == XMPC_COLL_SYNC) {
            memset(&all[r], 0, sizeof all[r]);
            all[r].kind = XMPC_COLL_SYNC;
        } else
            s.ctl->desc(r, parity, &all[r], sizeof all[r]);
    }
}

/* The collective call image r waits in or has made last (seq << 8 | kind), 0: none. */
static unsigned long last_arrival(int r)
{
    unsigned long a = (unsigned long)s.ctl->local(XMPC_W_ARRIVE(g.n) + 2 * r),
                  b = (unsigned long)s.ctl->local(XMPC_W_ARRIVE(g.n) + 2 * r + 1);
    return a > b ? a : b;
}

/* One collective call on every image: compares, then the stopped images. */
static int collective(const xmpc_coll *mine, int *status, const char *fn, int *ended)
{
    xmpc_coll *all = xmpc_xmalloc(sizeof *all * (size_t)g.n);
    arrive_and_wait(mine, all, fn);
    compare_calls(all, fn);
    int stopped = -1, n_end = 0;
    for (int r = 0; r < g.n; ++r) {
        int end = all[r].kind == XMPC_COLL_END;
        n_end += end;
        if (end && stopped < 0 && r != g.me)
            stopped = r;
    }
    free(all);
    if (ended)
        *ended = n_end;
    if (stopped < 0 || mine->kind == XMPC_COLL_END)
        return XMPC_STAT_OK;
    char d[160];
    xmpc_stat_error(status, XMPC_STAT_STOPPED_IMAGE, stopped + 1, "%s: image %d has stopped "
                    "(STAT_STOPPED_IMAGE): %s cannot complete", fn, stopped + 1,
                    describe(mine, d, sizeof d));
    return XMPC_STAT_STOPPED_IMAGE;
}

int xmpc_collective(const xmpc_coll *mine, int *status, const char *fn)
{
    if (!s.ctl) { /* no control words: the transport's own collectives */
        if (mine->kind == XMPC_COLL_ALLOC && g.b->allgather && g.n > 1) {
            xmpc_coll *all = xmpc_xmalloc(sizeof *all * (size_t)g.n);
            g.b->allgather(mine, all, sizeof *mine);
            compare_calls(all, fn);
            free(all);
        } else if (mine->kind == XMPC_COLL_SYNC)
            g.b->barrier();
        return XMPC_STAT_OK;
    }
    if (g.n == 1) {
        ++s.seq;
        return XMPC_STAT_OK;
    }
    return collective(mine, status, fn, NULL);
}

/* ---- normal termination --------------------------------------------------------------- */

void xmpc_images_end(void)
{
    g.b->sync_memory(g.list);
    if (!s.ctl)
        g.b->barrier();
    else {
        /* Stopped from here on; this image takes part in the others' collective calls
         * (as "ended") until every image has ended. */
        s.ctl->write(g.me, XMPC_W_LIFE, XMPC_LIFE_STOPPED);
        xmpc_coll end;
        memset(&end, 0, sizeof end);
        end.kind = XMPC_COLL_END;
        for (int ended = 0; g.n > 1 && ended < g.n;)
            collective(&end, NULL, "xmpc_finalize", &ended);
    }
    /* Every image agreed on every allocation and free, so the lists are the same
     * everywhere and the transport's collective frees pair up. */
    while (g.list) {
        xmpc_coarray *ca = g.list;
        g.list = ca->next;
        g.b->free(ca);
        ca->magic = XMPC_MAGIC_FREED;
        ca->data = ca->bk = NULL;
        ca->next = g.freed;
        g.freed = ca;
    }
    g.last_ok = NULL;
    free(s.expected);
    s.expected = NULL;
}

int xmpc_image_status(int image)
{
    xmpc_need_init("xmpc_image_status");
    if (image < 1 || image > g.n)
        xmpc_fatal(NULL, image, "xmpc_image_status: image %d is outside 1..%d", image, g.n);
    if (!s.ctl || image == g.me + 1)
        return XMPC_STAT_OK;
    long life = s.ctl->read(image - 1, XMPC_W_LIFE);
    return life == XMPC_LIFE_STOPPED ? XMPC_STAT_STOPPED_IMAGE
         : life == XMPC_LIFE_FAILED  ? XMPC_STAT_FAILED_IMAGE : XMPC_STAT_OK;
}

/* ---- the synchronising calls ----------------------------------------------------------- */

void xmpc_sync_memory_stat(int *status)
{
    /* The running, right-thread case first: a polling loop calls this millions of times. */
    if (g.state == XMPC_RUNNING && xmpc_on_init_thread()) {
        g.b->sync_memory(g.list);
        if (status)
            *status = XMPC_STAT_OK;
        return;
    }
    if (!running_or_stat(status, "xmpc_sync_memory"))
        return;
    g.b->sync_memory(g.list);
    if (status)
        *status = XMPC_STAT_OK;
}

void xmpc_sync_memory(void) { xmpc_sync_memory_stat(NULL); }

static const xmpc_coll k_sync = {.kind = XMPC_COLL_SYNC};

void xmpc_barrier_stat(int *status)
{
    if (!running_or_stat(status, "xmpc_barrier"))
        return;
    if (xmpc_collective(&k_sync, status, "xmpc_barrier") == XMPC_STAT_OK && status)
        *status = XMPC_STAT_OK;
}

void xmpc_barrier(void) { xmpc_barrier_stat(NULL); }

void xmpc_sync_all_stat(int *status)
{
    if (!running_or_stat(status, "xmpc_sync_all"))
        return;
    g.b->sync_memory(g.list);
    int rc = xmpc_collective(&k_sync, status, "xmpc_sync_all");
    /* Again after the synchronisation: the others' puts, complete before it, must also
     * become visible to this image's loads (MPI-3 RMA: MPI_Win_sync after it). */
    g.b->sync_memory(g.list);
    if (rc == XMPC_STAT_OK && status)
        *status = XMPC_STAT_OK;
}

void xmpc_sync_all(void) { xmpc_sync_all_stat(NULL); }

/* Waits for one notification from each of ranks[0..n) (want[i] in all).  Returns the
 * first stopped image that can no longer notify (0-based), or -1. */
static int await_notifications(int n, const int *ranks, const long *want)
{
    int pending = n, stopped = -1;
    unsigned char *done = calloc((size_t)(n > 0 ? n : 1), 1);
    if (!done)
        xmpc_fatal(NULL, 0, "out of memory");
    waiter w = {0};
    while (pending) {
        for (int i = 0; i < n; ++i)
            if (!done[i] && s.ctl->local(XMPC_W_NOTIFY + ranks[i]) >= want[i]) {
                done[i] = 1;
                --pending;
            }
        if (!pending || !slow_check(&w, "xmpc_sync_images"))
            continue;
        for (int i = 0; i < n; ++i) {
            if (done[i])
                continue;
            int r = ranks[i];
            long life = s.ctl->read(r, XMPC_W_LIFE);
            unsigned long coll = last_arrival(r);
            /* Read again after the partner's state: what it did before that is here. */
            if (s.ctl->local(XMPC_W_NOTIFY + r) >= want[i])
                continue;
            if (life == XMPC_LIFE_STOPPED) {
                done[i] = 1;
                --pending;
                if (stopped < 0)
                    stopped = r;
            } else if (coll >> 8 > s.seq) {
                static const char *const k_kind[] = {"?", "sync all / barrier",
                    "xmpc_coarray_alloc", "xmpc_coarray_free", "xmpc_finalize / xmpc_stop"};
                unsigned long k = coll & 0xff;
                xmpc_fatal(NULL, r + 1, "xmpc_sync_images: deadlock: image %d waits in %s "
                           "(its collective call #%lu; this image has made %lu) and cannot "
                           "reach the sync images this image waits in for it", r + 1,
                           k_kind[k >= 1 && k <= XMPC_COLL_END ? k : 0],
                           coll >> 8, s.seq);
            }
        }
    }
    free(done);
    return stopped;
}

/* The list is checked whole before anything is sent: a duplicate would wait for a
 * second notification that never comes (a hang), a negative count reach the transport. */
void xmpc_sync_images_stat(int n, const int *images, int *status)
{
    if (!running_or_stat(status, "xmpc_sync_images"))
        return;
    if (images && n < 0) {
        xmpc_stat_error(status, XMPC_STAT_BAD_COUNT, 0, "sync images: image count %d is negative", n);
        return;
    }
    if (!images && n != 0 && n != g.n) {
        xmpc_stat_error(status, XMPC_STAT_BAD_COUNT, 0, "sync images: a NULL image list means "
                        "sync images(*) and takes n = 0 or n = num_images (%d), not %d", g.n, n);
        return;
    }
    int *ranks = xmpc_xmalloc(sizeof(int) * (size_t)(images ? (n > 0 ? n : 1) : g.n));
    unsigned char *seen = calloc((size_t)g.n, 1);
    if (!seen)
        xmpc_fatal(NULL, 0, "out of memory");
    if (!images) /* sync images(*) */
        for (n = 0; n < g.n; ++n)
            ranks[n] = n;
    int bad = 0;
    for (int i = 0; images && i < n && !bad; ++i) {
        if (images[i] < 1 || images[i] > g.n)
            bad = xmpc_stat_error(status, XMPC_STAT_BAD_IMAGE, images[i],
                                  "sync images: image %d (entry %d of the list) is outside 1..%d",
                                  images[i], i, g.n);
        else if (seen[images[i] - 1]++)
            bad = xmpc_stat_error(status, XMPC_STAT_DUPLICATE_IMAGE, images[i],
                                  "sync images: image %d is listed twice (entry %d of the list); "
                                  "an image set must not repeat an image", images[i], i);
        else
            ranks[i] = images[i] - 1;
    }
    free(seen);
    if (bad) {
        free(ranks);
        return;
    }
    g.b->sync_memory(g.list);
    int stopped = -1;
    if (!s.ctl)
        g.b->sync_images(n, ranks);
    else {
        /* Counting notifications pairs the k-th call naming an image with its k-th call
         * naming this one, which is what sync images means. */
        long *want = xmpc_xmalloc(sizeof(long) * (size_t)(n > 0 ? n : 1));
        for (int i = 0; i < n; ++i) {
            s.ctl->add(ranks[i], XMPC_W_NOTIFY + g.me, 1);
            want[i] = ++s.expected[ranks[i]];
        }
        stopped = await_notifications(n, ranks, want);
        free(want);
    }
    g.b->sync_memory(g.list); /* as in sync all: the partners' puts become visible here */
    free(ranks);
    if (stopped >= 0)
        xmpc_stat_error(status, XMPC_STAT_STOPPED_IMAGE, stopped + 1, "sync images: image %d "
                        "has stopped (STAT_STOPPED_IMAGE) without the sync images that pairs "
                        "with this one", stopped + 1);
    else if (status)
        *status = XMPC_STAT_OK;
}

void xmpc_sync_images(int n, const int *images) { xmpc_sync_images_stat(n, images, NULL); }
