/* DLM core: configuration, start-up and shutdown, the page table, allocation, bulk
 * get/put, messaging with deadlines, statistics, and stopping the user threads. */
#define _GNU_SOURCE
#include "dlm_internal.h"
#include "umstudy/support.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

dlm_state dlm_g = {.lock = ATOMIC_FLAG_INIT};
dlm_stats_acc dlm_st;
static char g_error[512];
static int g_started, g_mpi_up;

/* ---- errors ------------------------------------------------------------------------ */

const char *dlm_error(void) { return g_error; }

void dlm_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    va_end(ap);
}

void dlm_fatal(const char *fmt, ...)
{
    /* A second failing thread must not interleave its message or abort twice. */
    if (atomic_exchange(&dlm_g.failed, 1)) {
        for (;;)
            pause();
    }
    char msg[600];
    int n = snprintf(msg, sizeof msg, "dlm: error: ");
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(msg + n, sizeof msg - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof msg - 2)
        n = (int)sizeof msg - 2;
    msg[n++] = '\n';
    /* write(2), not stdio: a user thread stopped (dlm_stop_world) or interrupted by
     * the fault handler inside fprintf holds the stream's lock, and waiting for it
     * would be a hang after all.  stdout's records are flushed only if nobody holds it. */
    for (ssize_t w, off = 0; off < n; off += w)
        if ((w = write(2, msg + off, (size_t)(n - off))) <= 0)
            break;
    if (ftrylockfile(stdout) == 0) {
        fflush_unlocked(stdout);
        funlockfile(stdout);
    }
    /* Not MPI_Abort: a launcher told to survive dead ranks (Open MPI --enable-recovery)
     * reports status 0 for it, and MPI may wait on the dead rank.  A rank leaving with
     * a status is what every launcher turns into the job's failure (and the end of
     * the remaining ranks). */
    _exit(DLM_EFAILED);
}

double dlm_now(void) { return ums_now(); }

/* ---- locks and futexes ------------------------------------------------------------- */

void dlm_lock(void)
{
    while (atomic_flag_test_and_set_explicit(&dlm_g.lock, memory_order_acquire))
        sched_yield();
}

void dlm_unlock(void) { atomic_flag_clear_explicit(&dlm_g.lock, memory_order_release); }

void dlm_futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
    /* A bounded wait: a wake lost to a race costs 10 ms, not a hang. */
    struct timespec ts = {0, 10 * 1000 * 1000};
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

void dlm_futex_wake(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void dlm_page_changed(size_t page) { atomic_fetch_add(&dlm_g.pages[page].seq, 1); }
void dlm_wake_page(size_t page) { dlm_futex_wake(&dlm_g.pages[page].seq); }

void dlm_lock_settled(size_t page)
{
    for (;;) {
        dlm_lock();
        dlm_page *pg = &dlm_g.pages[page];
        uint32_t seq = atomic_load(&pg->seq);
        if (pg->state != PG_QUEUED && pg->state != PG_EVICTING && !pg->pins && !pg->remote_ops) return;
        dlm_unlock(); /* a fault or copy racing with dlm_free: let it finish */
        dlm_wait_page(page, seq);
    }
}

void dlm_discard_range(size_t first, size_t n, void (*drop_resident)(size_t page))
{
    dlm_state *g = &dlm_g;
    for (size_t p = first; p < first + n; ++p) {
        dlm_lock_settled(p);
        dlm_page *pg = &g->pages[p];
        if (pg->state == PG_RESIDENT) {
            if (drop_resident) drop_resident(p);
            pg->state = PG_REMOTE;
            pg->dirty = 0;
            g->frames_used--;
            dlm_page_changed(p);
        }
        dlm_unlock();
    }
    dlm_lock();
    size_t kept = 0;
    for (size_t i = 0; i < g->ring_len; ++i) {
        size_t p = g->ring[(g->ring_head + i) % g->ring_cap];
        if (p < first || p >= first + n)
            g->ring[(g->ring_head + kept++) % g->ring_cap] = p;
    }
    g->ring_len = kept;
    dlm_unlock();
}

void dlm_wait_page(size_t page, uint32_t seq)
{
    while (atomic_load(&dlm_g.pages[page].seq) == seq)
        dlm_futex_wait(&dlm_g.pages[page].seq, seq);
}

/* ---- resident set ------------------------------------------------------------------ */

void dlm_ring_push(size_t page)
{
    dlm_state *g = &dlm_g;
    if (g->ring_len == g->ring_cap)
        dlm_fatal("internal: resident ring overflow (%zu pages)", g->ring_cap);
    g->ring[(g->ring_head + g->ring_len++) % g->ring_cap] = page;
}

int dlm_pick_victim(size_t *victim)
{
    dlm_state *g = &dlm_g;
    for (size_t tries = g->ring_len; tries > 0; --tries) {
        size_t p = g->ring[g->ring_head];
        g->ring_head = (g->ring_head + 1) % g->ring_cap;
        g->ring_len--;
        if (g->pages[p].state != PG_RESIDENT)
            continue; /* freed while resident: a stale entry */
        if (g->pages[p].pins) {
            dlm_ring_push(p);
            continue;
        }
        g->pages[p].state = PG_EVICTING;
        dlm_page_changed(p);
        *victim = p;
        return 1;
    }
    return 0;
}

/* ---- statistics --------------------------------------------------------------------- */

void dlm_stats_get(dlm_stats *o)
{
    memset(o, 0, sizeof *o);
    o->faults = dlm_st.faults;
    o->evictions = dlm_st.evictions;
    o->writebacks = dlm_st.writebacks;
    o->stops = dlm_st.stops;
    o->remote_gets = dlm_st.remote_gets;
    o->remote_puts = dlm_st.remote_puts;
    o->bytes_in = dlm_st.bytes_in;
    o->bytes_out = dlm_st.bytes_out;
}

void dlm_stats_reset(void)
{
    if (dlm_timing_on) {
        dlm_timing_settle(dlm_g.cfg.timeout);
        dlm_timing_reset();
    }
    _Atomic uint64_t *f = (_Atomic uint64_t *)&dlm_st;
    for (size_t i = 0; i < sizeof dlm_st / sizeof *f; ++i)
        atomic_store(&f[i], 0);
}

/* ---- messaging with deadlines -------------------------------------------------------- */

int dlm_new_tag(void)
{
    uint32_t t = atomic_fetch_add(&dlm_g.next_tag, 1);
    return TAG_DYNAMIC_BASE + (int)(t % (uint32_t)(dlm_g.tag_ub - TAG_DYNAMIC_BASE));
}

void dlm_wait_req(MPI_Request *req, int rank, const char *why)
{
    double deadline = dlm_now() + dlm_g.cfg.timeout;
    for (unsigned spin = 0;; ++spin) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            dlm_fatal("memory rank %d failed during %s (MPI error %d): it died", rank, why, rc);
        if (done)
            return;
        if ((spin & 255) == 255) {
            if (dlm_now() > deadline)
                dlm_fatal("memory rank %d did not answer within %.1f s during %s: it died or hangs",
                          rank, dlm_g.cfg.timeout, why);
            sched_yield(); /* oversubscribed machines: let the memory rank run */
        }
    }
}

void dlm_send_msg(int rank, const dlm_msg *m, const char *why)
{
    MPI_Request req;
    MPI_Isend(m, (int)sizeof *m, MPI_BYTE, rank, TAG_REQ, dlm_g.comm_req, &req);
    dlm_wait_req(&req, rank, why);
}

/* MPI counts are ints: big transfers go as several messages of at most 1 GiB. */
enum { CHUNK = 1 << 30 };

void dlm_send_data(int rank, const void *buf, size_t len, int tag, const char *why)
{
    for (size_t off = 0; off < len; off += CHUNK) {
        size_t n = len - off < CHUNK ? len - off : CHUNK;
        MPI_Request req;
        MPI_Isend((const char *)buf + off, (int)n, MPI_BYTE, rank, tag, dlm_g.comm_req, &req);
        dlm_wait_req(&req, rank, why);
    }
}

void dlm_write_back(size_t page, const void *data)
{
    int rank = dlm_owner(page), tag = dlm_new_tag();
    dlm_msg m = {OP_PUT, tag, dlm_slot(page), 0, dlm_g.cfg.page_size};
    dlm_send_msg(rank, &m, "a page write-back");
    dlm_send_data(rank, data, m.len, tag, "a page write-back");
    atomic_fetch_add(&dlm_st.writebacks, 1);
    atomic_fetch_add(&dlm_st.bytes_out, m.len);
}

/* ---- stopping the user threads -------------------------------------------------------- */

enum { MAX_TIDS = 4096 };
static pid_t g_runtime_tids[MAX_TIDS];
static int g_nruntime;
static pid_t g_main_tid;
static int g_stop_signal;
static _Atomic uint32_t g_stop_gen, g_resume_gen, g_acks;

static void stop_handler(int sig)
{
    (void)sig;
    int saved = errno;
    uint32_t gen = atomic_load(&g_stop_gen);
    atomic_fetch_add(&g_acks, 1);
    uint32_t r;
    while ((r = atomic_load(&g_resume_gen)) < gen)
        syscall(SYS_futex, (uint32_t *)&g_resume_gen, FUTEX_WAIT_PRIVATE, r, NULL, NULL, 0);
    errno = saved;
}

int dlm_threads_init(int stop_signal)
{
    g_stop_signal = stop_signal;
    g_main_tid = (pid_t)syscall(SYS_gettid);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = stop_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(stop_signal, &sa, NULL);
}

static int list_tids(pid_t *out, int max)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        dlm_fatal("cannot list /proc/self/task to stop the user threads: %s", strerror(errno));
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < max;)
        if (e->d_name[0] != '.')
            out[n++] = (pid_t)atoi(e->d_name);
    closedir(d);
    return n;
}

void dlm_threads_snapshot(void) { g_nruntime = list_tids(g_runtime_tids, MAX_TIDS); }

static int is_runtime(pid_t t)
{
    if (t == g_main_tid)
        return 0;
    for (int i = 0; i < g_nruntime; ++i)
        if (g_runtime_tids[i] == t)
            return 1;
    return 0;
}

static pid_t g_tids[MAX_TIDS];

void dlm_stop_world(void)
{
    pid_t self = (pid_t)syscall(SYS_gettid), pid = getpid();
    int n = list_tids(g_tids, MAX_TIDS); /* opendir allocates: before anyone stops */
    atomic_store(&g_acks, 0);
    atomic_fetch_add(&g_stop_gen, 1);
    uint32_t sent = 0;
    for (int i = 0; i < n; ++i) {
        if (g_tids[i] == self || is_runtime(g_tids[i]))
            continue;
        if (syscall(SYS_tgkill, pid, g_tids[i], g_stop_signal) == 0)
            g_tids[sent++] = g_tids[i]; /* ESRCH: the thread has exited */
    }
    for (unsigned spin = 1; atomic_load(&g_acks) < sent; ++spin) {
        sched_yield();
        if (spin % 1024 == 0) {
            /* A thread that exits with the signal pending never acknowledges: count
             * only those still alive (an acknowledged one cannot exit: it waits). */
            uint32_t alive = 0;
            for (uint32_t i = 0; i < sent; ++i)
                if (syscall(SYS_tgkill, pid, g_tids[i], 0) == 0)
                    g_tids[alive++] = g_tids[i];
            sent = alive;
        }
    }
    atomic_fetch_add(&dlm_st.stops, 1);
}

void dlm_resume_world(void)
{
    atomic_store(&g_resume_gen, atomic_load(&g_stop_gen));
    syscall(SYS_futex, (uint32_t *)&g_resume_gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* ---- configuration -------------------------------------------------------------------- */

static int env_size(const char *name, size_t *out, size_t dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        *out = dflt;
        return 0;
    }
    if (ums_parse_size(v, out) != 0 || *out == 0) {
        dlm_set_error("%s=%s is not a positive byte count (e.g. 1M, 8M, 2G)", name, v);
        return -1;
    }
    return 0;
}

static int env_double(const char *name, double *out, double dflt)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v) {
        *out = dflt;
        return 0;
    }
    *out = strtod(v, &end);
    if (*end || !(*out > 0)) {
        dlm_set_error("%s=%s is not a positive number", name, v);
        return -1;
    }
    return 0;
}

/* An option given by the program wins over the environment, which wins over the default. */
static int opt_size(size_t given, const char *env, size_t *out, size_t dflt)
{
    if (given) {
        *out = given;
        return 0;
    }
    return env_size(env, out, dflt);
}

static int opt_double(double given, const char *env, double *out, double dflt)
{
    if (given > 0) {
        *out = given;
        return 0;
    }
    return env_double(env, out, dflt);
}

static const dlm_engine *engine_by_name(const char *name)
{
    const dlm_engine *all[] = {&dlm_engine_r3, &dlm_engine_r58, &dlm_engine_r77, &dlm_engine_uffd};
    for (size_t i = 0; i < sizeof all / sizeof *all; ++i)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}

static int check_map_count(void);

static long count_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    if (!f)
        return 0;
    for (int c; (c = fgetc(f)) != EOF;)
        n += c == '\n';
    fclose(f);
    return n;
}

/* Everything that can be judged before any page moves.  Returns 0 or DLM_EUSAGE /
 * DLM_EUNSUPPORTED with the reason set. */
static int configure(const dlm_options *o, int world)
{
    dlm_config *c = &dlm_g.cfg;
    memset(c, 0, sizeof *c);
    const char *engine = o && o->engine ? o->engine : getenv("DLM_ENGINE");
    if (!engine || !*engine)
        engine = "r77";
    dlm_g.engine = engine_by_name(engine);
    if (!dlm_g.engine) {
        dlm_set_error("unknown engine '%s' (DLM_ENGINE: r3 | r58 | r77 | uffd)", engine);
        return DLM_EUSAGE;
    }
    const dlm_options none = {0};
    if (!o)
        o = &none;
    double workers;
    if (opt_size(o->page_size, "DLM_PAGE_SIZE", &c->page_size, 1 << 20) ||
        opt_size(o->capacity, "DLM_CAPACITY", &c->capacity, (size_t)1 << 30) ||
        opt_size(o->mem_capacity, "DLM_MEM_CAPACITY", &c->mem_capacity, (size_t)4 << 30) ||
        opt_double(o->timeout, "DLM_TIMEOUT", &c->timeout, 30) ||
        opt_double(o->uffd_workers, "DLM_UFFD_WORKERS", &workers, 4))
        return DLM_EUSAGE;
    c->uffd_workers = (int)workers;
    if (workers != c->uffd_workers || workers > 64) {
        dlm_set_error("DLM_UFFD_WORKERS must be an integer in 1..64");
        return DLM_EUSAGE;
    }
    if (o->fault_timing) {
        c->fault_timing = o->fault_timing > 0;
    } else {
        const char *v = getenv("DLM_FAULT_TIMING");
        if (v && *v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
            dlm_set_error("DLM_FAULT_TIMING=%s is neither 0 nor 1", v);
            return DLM_EUSAGE;
        }
        c->fault_timing = v && strcmp(v, "1") == 0;
    }
    long os_page = sysconf(_SC_PAGESIZE);
    if (c->page_size % (size_t)os_page) {
        dlm_set_error("DLM page size %zu is not a multiple of the OS page size %ld", c->page_size, os_page);
        return DLM_EUSAGE;
    }
    if (c->capacity < 2 * c->page_size) {
        dlm_set_error("compute capacity %zu bytes is less than 2 DLM pages of %zu bytes (one to install, one to evict)",
                      c->capacity, c->page_size);
        return DLM_EUSAGE;
    }
    if (c->mem_capacity < c->page_size) {
        dlm_set_error("memory-rank capacity %zu bytes is less than one DLM page of %zu bytes",
                      c->mem_capacity, c->page_size);
        return DLM_EUSAGE;
    }
    c->memory_ranks = world - 1;
    if (c->memory_ranks < 1) {
        dlm_set_error("DLM needs at least 2 MPI ranks (rank 0 computes, ranks >= 1 hold memory), got %d", world);
        return DLM_EUSAGE;
    }
    /* More uffd faults in flight than half the frames would swap out pages installed
     * for faults whose threads have not run yet: thrashing, not paging. */
    size_t half = c->capacity / c->page_size / 2;
    if ((size_t)c->uffd_workers > half)
        c->uffd_workers = (int)(half ? half : 1);
    snprintf(c->engine, sizeof c->engine, "%s", dlm_g.engine->name);
    return check_map_count();
}

/* The SIGSEGV engines protect page by page, and every protection change splits a
 * mapping: in the worst case (resident pages alternating with remote ones) the area
 * becomes 2 x frames + 1 mappings.  Past vm.max_map_count mprotect fails with ENOMEM
 * in the middle of a run, so refuse before any work. */
static int check_map_count(void)
{
    dlm_config *c = &dlm_g.cfg;
    size_t frames = c->capacity / c->page_size;
    if (dlm_g.engine != &dlm_engine_uffd) {
        long max_maps = 65530;
        FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
        if (f) {
            if (fscanf(f, "%ld", &max_maps) != 1)
                max_maps = 65530;
            fclose(f);
        }
        long need = 2 * (long)frames + 1 + count_mappings() + 256; /* + MPI, malloc arenas */
        if (need > max_maps) {
            dlm_set_error("engine %s with %zu resident pages (capacity %zu / page %zu) may split the DLM area "
                          "into %ld mappings, more than vm.max_map_count=%ld: use a larger DLM_PAGE_SIZE, a "
                          "smaller DLM_CAPACITY, the uffd engine (no splitting), or raise the limit "
                          "(sysctl -w vm.max_map_count=%ld)",
                          dlm_g.engine->name, frames, c->capacity, c->page_size, need, max_maps, need + 1024);
            return DLM_EUSAGE;
        }
    }
    return DLM_OK;
}

const dlm_config *dlm_get_config(void) { return &dlm_g.cfg; }

/* ---- the start-up and shutdown watchdog ---------------------------------------------------
 *
 * MPI_Init_thread, start-up's collectives (MPI_Bcast, MPI_Comm_dup) and MPI_Finalize
 * wait on every rank and have no form with a deadline: a memory rank killed while
 * rank 0 is inside one of them leaves rank 0 waiting for ever (Open MPI 4.1 under
 * --enable-recovery; a kill during a slow start-up on a loaded machine does it).
 * Rank 0 runs these phases under a watchdog thread: a phase not over within the
 * timeout ends the process as a late page would (dlm_fatal).  A collective cannot
 * tell which rank is missing, so with several memory ranks the message names them all. */
static pthread_mutex_t g_guard_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_guard_cv;
static const char *g_guard_what; /* the phase under way, NULL when none */
static double g_guard_deadline, g_guard_timeout = 30;
static int g_guard_world; /* MPI_COMM_WORLD's size, 0 while unknown */
static int g_guard_started;

static void memory_ranks_text(char *buf, size_t n)
{
    if (g_guard_world == 2)
        snprintf(buf, n, "memory rank 1");
    else if (g_guard_world > 2)
        snprintf(buf, n, "one of memory ranks 1-%d", g_guard_world - 1);
    else
        snprintf(buf, n, "a memory rank");
}

static void *guard_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_guard_mu);
    for (;;) {
        if (!g_guard_what) {
            pthread_cond_wait(&g_guard_cv, &g_guard_mu);
            continue;
        }
        if (dlm_now() >= g_guard_deadline) {
            char who[64];
            memory_ranks_text(who, sizeof who);
            dlm_fatal("%s did not take part within %.1f s during %s: it died or hangs", who, g_guard_timeout,
                      g_guard_what);
        }
        struct timespec ts;
        ts.tv_sec = (time_t)g_guard_deadline;
        ts.tv_nsec = (long)((g_guard_deadline - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&g_guard_cv, &g_guard_mu, &ts);
    }
    return NULL;
}

/* Starts the deadline for phase `what` (a string literal). */
static void guard_arm(const char *what)
{
    pthread_mutex_lock(&g_guard_mu);
    if (!g_guard_started) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* dlm_now's clock */
        pthread_cond_init(&g_guard_cv, &ca);
        pthread_condattr_destroy(&ca);
        pthread_t t;
        pthread_attr_t ta;
        pthread_attr_init(&ta);
        pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &ta, guard_main, NULL) != 0) {
            pthread_mutex_unlock(&g_guard_mu);
            dlm_fatal("cannot start the start-up watchdog thread");
        }
        pthread_attr_destroy(&ta);
        g_guard_started = 1;
    }
    g_guard_what = what;
    g_guard_deadline = dlm_now() + g_guard_timeout;
    pthread_cond_signal(&g_guard_cv);
    pthread_mutex_unlock(&g_guard_mu);
}

static void guard_disarm(void)
{
    pthread_mutex_lock(&g_guard_mu);
    g_guard_what = NULL;
    pthread_mutex_unlock(&g_guard_mu);
}

/* Before MPI_Init_thread: the rank and world size as the launcher's environment
 * gives them (-1 / 0 where it does not), and the timeout as configure() will read it. */
static int env_int(const char *const *names, int dflt)
{
    for (; *names; ++names) {
        const char *v = getenv(*names);
        char *end;
        long x = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && x >= 0 && x <= INT_MAX)
            return (int)x;
    }
    return dflt;
}

/* ---- start-up and shutdown -------------------------------------------------------------- */

static int setup_compute(void)
{
    dlm_state *g = &dlm_g;
    dlm_config *c = &g->cfg;
    g->slots_per_rank = c->mem_capacity / c->page_size;
    g->area_pages = g->slots_per_rank * (size_t)c->memory_ranks;
    g->frames = c->capacity / c->page_size;
    if (g->frames > g->area_pages)
        g->frames = g->area_pages; /* more room than data: nothing ever leaves */
    g->pages = calloc(g->area_pages, sizeof *g->pages);
    g->ring_cap = g->frames + 64;
    g->ring = calloc(g->ring_cap, sizeof *g->ring);
    if (!g->pages || !g->ring) {
        dlm_set_error("cannot allocate the page table for %zu pages", g->area_pages);
        return DLM_EFAILED;
    }
    int *ub, flag;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    g->tag_ub = flag ? *ub : 32767;
    dlm_timing_on = c->fault_timing;
    int status = g->engine->start();
    const char *fallback = getenv("DLM_UFFD_FALLBACK");
    if (status == DLM_EUNSUPPORTED && g->engine == &dlm_engine_uffd && fallback && *fallback) {
        const dlm_engine *e = engine_by_name(fallback);
        if (!e || e == &dlm_engine_uffd) {
            dlm_set_error("DLM_UFFD_FALLBACK=%s is not one of r3 | r58 | r77", fallback);
            return DLM_EUSAGE;
        }
        fprintf(stderr, "dlm: %s\ndlm: falling back to engine %s (DLM_UFFD_FALLBACK)\n", dlm_error(), e->name);
        g->engine = e;
        snprintf(g->cfg.engine, sizeof g->cfg.engine, "%s", e->name);
        status = check_map_count();
        if (status == DLM_OK)
            status = e->start();
    }
    return status;
}

int dlm_startup(int *argc, char ***argv) { return dlm_startup_opts(argc, argv, NULL); }

int dlm_startup_opts(int *argc, char ***argv, const dlm_options *opts)
{
    int provided, rank, world;
    static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", NULL};
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS", NULL};
    /* The timeout configure() will settle on (an invalid DLM_TIMEOUT is reported there;
     * until then the default bounds the wait). */
    if (env_double("DLM_TIMEOUT", &g_guard_timeout, 30) != 0)
        g_guard_timeout = 30;
    if (opts && opts->timeout > 0)
        g_guard_timeout = opts->timeout;
    g_guard_world = env_int(size_vars, 0);
    if (env_int(rank_vars, 0) == 0) /* rank 0, or a launcher that does not say */
        guard_arm("start-up (MPI_Init_thread)");
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    g_mpi_up = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    g_guard_world = world;
    if (rank == 0)
        guard_arm("start-up (the configuration broadcast and communicator set-up)");
    else
        guard_disarm();
    /* Rank 0 decides (its environment is the one that counts) and tells the others. */
    int status = DLM_OK;
    if (rank == 0) {
        if (provided < MPI_THREAD_MULTIPLE) {
            dlm_set_error("the MPI library does not provide MPI_THREAD_MULTIPLE (got level %d)", provided);
            status = DLM_EUNSUPPORTED;
        } else {
            status = configure(opts, world);
        }
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (status == DLM_OK)
        MPI_Bcast(&dlm_g.cfg, (int)sizeof dlm_g.cfg, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (status != DLM_OK) {
        if (rank != 0) {
            MPI_Finalize();
            exit(status);
        }
        guard_disarm();
        return status;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &dlm_g.comm_req);
    MPI_Comm_dup(MPI_COMM_WORLD, &dlm_g.comm_page);
    MPI_Comm_dup(MPI_COMM_WORLD, &dlm_g.comm_bulk);
    /* A dead memory rank must surface as an error we can name, not an abort inside MPI. */
    MPI_Comm_set_errhandler(dlm_g.comm_req, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(dlm_g.comm_page, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(dlm_g.comm_bulk, MPI_ERRORS_RETURN);
    if (rank != 0) {
        dlm_serve();
        MPI_Finalize();
        exit(0);
    }
    guard_disarm();
    status = setup_compute();
    /* The engine may have failed (e.g. userfaultfd not permitted): tell the servers
     * by shutting them down; the caller decides how to leave. */
    if (status != DLM_OK)
        return status;
    g_started = 1;
    return DLM_OK;
}

void dlm_shutdown(void)
{
    if (!g_mpi_up)
        return;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0 && dlm_g.comm_req != MPI_COMM_NULL && dlm_g.comm_req) {
        if (g_started)
            dlm_g.engine->stop();
        g_started = 0;
        /* A small send completes whether its receiver lives or not (eager), so each
         * memory rank acknowledges: one killed just before shutdown is named here,
         * not left for MPI_Finalize to wait on. */
        for (int r = 1; r <= dlm_g.cfg.memory_ranks; ++r) {
            int tag = dlm_new_tag();
            MPI_Request ack;
            MPI_Irecv(NULL, 0, MPI_BYTE, r, tag, dlm_g.comm_bulk, &ack);
            dlm_msg m = {OP_SHUTDOWN, tag, 0, 0, 0};
            dlm_send_msg(r, &m, "shutdown");
            dlm_wait_req(&ack, r, "shutdown");
        }
    }
    if (rank == 0)
        guard_arm("shutdown (MPI_Finalize)");
    MPI_Finalize();
    if (rank == 0)
        guard_disarm();
    g_mpi_up = 0;
}

void dlm_exit(int status)
{
    fflush(stdout);
    dlm_shutdown();
    exit(status);
}

/* ---- allocation ------------------------------------------------------------------------- */

typedef struct alloc_rec {
    size_t first, n;
} alloc_rec;
static alloc_rec *g_allocs;
static size_t g_nallocs, g_cap_allocs;
static pthread_mutex_t g_alloc_mutex = PTHREAD_MUTEX_INITIALIZER;

void *dlm_alloc(size_t size)
{
    dlm_state *g = &dlm_g;
    if (!g_started) {
        dlm_set_error("dlm_alloc before a successful dlm_startup (or on a memory rank)");
        return NULL;
    }
    size_t n = (size + g->cfg.page_size - 1) / g->cfg.page_size;
    if (n == 0)
        n = 1;
    pthread_mutex_lock(&g_alloc_mutex);
    /* First fit over the gaps between allocations (kept sorted by first page). */
    size_t at = 0, idx = 0, used = 0;
    for (; idx < g_nallocs; ++idx) {
        if (g_allocs[idx].first - at >= n)
            break;
        at = g_allocs[idx].first + g_allocs[idx].n;
    }
    for (size_t i = 0; i < g_nallocs; ++i)
        used += g_allocs[i].n;
    if (at + n > g->area_pages) {
        pthread_mutex_unlock(&g_alloc_mutex);
        dlm_set_error("dlm_alloc(%zu): %zu more pages of %zu bytes do not fit beside the %zu in use: the %d "
                      "memory rank(s) hold %zu pages (%zu bytes each; DLM_MEM_CAPACITY)",
                      size, n, g->cfg.page_size, used, g->cfg.memory_ranks, g->area_pages, g->cfg.mem_capacity);
        return NULL;
    }
    if (g_nallocs == g_cap_allocs) {
        size_t cap = g_cap_allocs ? 2 * g_cap_allocs : 16;
        alloc_rec *r = realloc(g_allocs, cap * sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&g_alloc_mutex);
            dlm_set_error("out of memory for the allocation table");
            return NULL;
        }
        g_allocs = r;
        g_cap_allocs = cap;
    }
    memmove(&g_allocs[idx + 1], &g_allocs[idx], (g_nallocs - idx) * sizeof *g_allocs);
    g_allocs[idx] = (alloc_rec){at, n};
    g_nallocs++;
    pthread_mutex_unlock(&g_alloc_mutex);
    return dlm_page_addr(at);
}

void dlm_free(void *ptr)
{
    dlm_state *g = &dlm_g;
    if (!ptr)
        return;
    size_t first = (size_t)((char *)ptr - g->area) / g->cfg.page_size;
    pthread_mutex_lock(&g_alloc_mutex);
    size_t i = 0;
    while (i < g_nallocs && g_allocs[i].first != first)
        ++i;
    if (i == g_nallocs || (char *)ptr != dlm_page_addr(first)) {
        pthread_mutex_unlock(&g_alloc_mutex);
        fprintf(stderr, "dlm: warning: dlm_free(%p): not a DLM allocation, ignored\n", ptr);
        return;
    }
    size_t n = g_allocs[i].n;
    memmove(&g_allocs[i], &g_allocs[i + 1], (g_nallocs - i - 1) * sizeof *g_allocs);
    g_nallocs--;
    /* Resident pages are dropped here, remote copies zeroed on their ranks, so the
     * next dlm_alloc of these pages starts from zeros as the first did. */
    g->engine->discard(first, n);
    for (int r = 1; r <= g->cfg.memory_ranks; ++r) {
        /* Pages first..first+n-1 owned by rank r: slots from ceil to floor. */
        size_t k = (size_t)(r - 1), nm = (size_t)g->cfg.memory_ranks;
        size_t lo = first, hi = first + n;
        while (lo < hi && (lo % nm) != k)
            ++lo;
        if (lo >= hi)
            continue;
        size_t last = hi - 1;
        while ((last % nm) != k)
            --last;
        dlm_msg m = {OP_DISCARD, 0, lo / nm, 0, last / nm - lo / nm + 1};
        dlm_send_msg(r, &m, "dlm_free");
    }
    pthread_mutex_unlock(&g_alloc_mutex);
}

/* ---- bulk get/put -------------------------------------------------------------------------- */

static int check_range(const void *addr, size_t size, const char *what)
{
    dlm_state *g = &dlm_g;
    if (!g_started) {
        dlm_set_error("%s before a successful dlm_startup", what);
        return -1;
    }
    const char *a = addr;
    if (a < g->area || a + size > g->area + g->area_pages * g->cfg.page_size) {
        dlm_set_error("%s: [%p, +%zu) is not inside the DLM area", what, addr, size);
        return -1;
    }
    return 0;
}

/* One page's part of a get or put.  Resident pages are copied locally (pinned, so
 * they are not swapped out meanwhile); remote ones move straight to/from their
 * memory rank.  A page whose fetch is under way is waited for (put: the fetched copy
 * would overwrite the put) or read remotely (get: its remote copy is current). */
static void page_part(size_t page, size_t off, char *local, size_t len, int put)
{
    dlm_state *g = &dlm_g;
    dlm_page *pg = &g->pages[page];
    for (;;) {
        dlm_lock();
        uint32_t seq = atomic_load(&pg->seq);
        if (pg->state == PG_RESIDENT) {
            pg->pins++;
            dlm_unlock();
            char *base = put ? g->engine->local_for_put(page) : g->engine->local_for_get(page);
            if (put)
                memcpy(base + off, local, len);
            else
                memcpy(local, base + off, len);
            dlm_lock();
            pg->pins--;
            dlm_page_changed(page); /* dlm_free may be waiting for the pin to go */
            dlm_unlock();
            dlm_wake_page(page);
            return;
        }
        if (pg->state == PG_EVICTING || (put && pg->state == PG_QUEUED)) {
            dlm_unlock();
            dlm_wait_page(page, seq);
            continue;
        }
        /* Remote (or, for a get, being fetched: the remote copy is current). */
        if (put)
            pg->remote_ops++;
        dlm_unlock();
        int rank = dlm_owner(page), tag = dlm_new_tag();
        dlm_msg m = {put ? OP_PUT : OP_GET_RANGE, tag, dlm_slot(page), off, len};
        if (put) {
            dlm_send_msg(rank, &m, "dlm_put");
            dlm_send_data(rank, local, len, tag, "dlm_put");
            atomic_fetch_add(&dlm_st.remote_puts, 1);
            atomic_fetch_add(&dlm_st.bytes_out, len);
            dlm_lock();
            pg->remote_ops--;
            dlm_page_changed(page);
            dlm_unlock();
            dlm_wake_page(page);
        } else {
            MPI_Request req;
            MPI_Irecv(local, (int)len, MPI_BYTE, rank, tag, g->comm_bulk, &req);
            dlm_send_msg(rank, &m, "dlm_get");
            dlm_wait_req(&req, rank, "dlm_get");
            atomic_fetch_add(&dlm_st.remote_gets, 1);
            atomic_fetch_add(&dlm_st.bytes_in, len);
        }
        return;
    }
}

static int bulk(const char *dlm_addr, char *local, size_t size, int put)
{
    dlm_state *g = &dlm_g;
    if (check_range(dlm_addr, size, put ? "dlm_put" : "dlm_get"))
        return -1;
    size_t pos = (size_t)(dlm_addr - g->area), end = pos + size, ps = g->cfg.page_size;
    while (pos < end) {
        size_t page = pos / ps, off = pos % ps;
        size_t len = ps - off < end - pos ? ps - off : end - pos;
        page_part(page, off, local, len, put);
        local += len;
        pos += len;
    }
    return 0;
}

int dlm_get(const void *dlm_addr, void *local, size_t size)
{
    return bulk(dlm_addr, local, size, 0);
}

int dlm_put(void *dlm_addr, const void *local, size_t size)
{
    return bulk(dlm_addr, (char *)local, size, 1);
}

int dlm_get_strided(const void *dlm_addr, size_t dlm_stride, void *local, size_t local_stride,
                    size_t blocklen, size_t count)
{
    for (size_t i = 0; i < count; ++i)
        if (bulk((const char *)dlm_addr + i * dlm_stride, (char *)local + i * local_stride, blocklen, 0))
            return -1;
    return 0;
}

int dlm_put_strided(void *dlm_addr, size_t dlm_stride, const void *local, size_t local_stride,
                    size_t blocklen, size_t count)
{
    for (size_t i = 0; i < count; ++i)
        if (bulk((char *)dlm_addr + i * dlm_stride, (char *)local + i * local_stride, blocklen, 1))
            return -1;
    return 0;
}

/* ---- MPI bandwidth, same ranks and communicator as the pages ------------------------------------ */

double dlm_measure_bandwidth(size_t bytes, int reps, int ranks)
{
    dlm_state *g = &dlm_g;
    if (!g_started || ranks < 1 || ranks > g->cfg.memory_ranks || bytes > (size_t)INT_MAX || reps < 1 ||
        bytes > g->slots_per_rank * g->cfg.page_size)
        return -1;
    char *buf = malloc(bytes * (size_t)ranks);
    MPI_Request *req = malloc(sizeof *req * (size_t)ranks);
    if (!buf || !req) {
        free(buf);
        free(req);
        return -1;
    }
    memset(buf, 0, bytes * (size_t)ranks);
    int tag = dlm_new_tag();
    double best = 0;
    for (int trial = 0; trial < 2; ++trial) { /* the first trial warms up the path */
        double t0 = dlm_now();
        for (int r = 0; r < ranks; ++r) {
            dlm_msg m = {OP_BANDWIDTH, tag, 0, (uint64_t)reps, bytes};
            dlm_send_msg(r + 1, &m, "the bandwidth test");
        }
        for (int i = 0; i < reps; ++i) {
            for (int r = 0; r < ranks; ++r)
                MPI_Irecv(buf + (size_t)r * bytes, (int)bytes, MPI_BYTE, r + 1, tag, g->comm_bulk, &req[r]);
            for (int r = 0; r < ranks; ++r)
                dlm_wait_req(&req[r], r + 1, "the bandwidth test");
        }
        double bw = (double)bytes * reps * ranks / (dlm_now() - t0);
        if (bw > best)
            best = bw;
    }
    free(buf);
    free(req);
    return best;
}
