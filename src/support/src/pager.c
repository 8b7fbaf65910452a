/* The pager (umstudy/pager.h): catching the first touch of a page with userfaultfd or
 * mprotect + SIGSEGV, and installing, protecting and dropping pages.
 *
 * One SIGSEGV handler and one userfaultfd (with one pool of workers) serve every region
 * of the process, found in a registry by address: a program may have thousands of
 * regions (vcuda: one per managed allocation), and neither a handler nor threads per
 * region would do. */
#define _GNU_SOURCE
#include "umstudy/pager.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

enum { MAX_WORKERS = 64, MAX_REGIONS = 4096 };

struct ums_pager {
    ums_pager_config cfg;
    char *base, *alias;
    size_t bytes, pages;
    int fd;         /* SEGV: the memfd */
    int registered; /* uffd: the range is registered with g_uffd */
    char *zeros;    /* uffd: a page of zeros for installs without a source */
    int slot;       /* index in the registry, -1 when not in it */
};

/* ---- the registry ------------------------------------------------------------------- */

static _Atomic(ums_pager *) g_regions[MAX_REGIONS];
static pthread_mutex_t g_reg_mutex = PTHREAD_MUTEX_INITIALIZER;
static int g_nsegv; /* SEGV regions; the handler is installed while > 0 */
static struct sigaction g_prev_segv;
static int g_nuffd; /* uffd regions; g_uffd is open and the workers run while > 0 */
static int g_uffd = -1, g_uffd_user_mode_only, g_uffd_wp;
static pthread_t g_workers[MAX_WORKERS];
static int g_nworkers;
static _Atomic int g_running;

static ums_pager *region_at(const char *addr, ums_pager_engine engine)
{
    for (int i = 0; i < MAX_REGIONS; ++i) {
        ums_pager *pg = atomic_load_explicit(&g_regions[i], memory_order_acquire);
        if (pg && pg->cfg.engine == engine && addr >= pg->base && addr < pg->base + pg->bytes)
            return pg;
    }
    return NULL;
}

/* g_reg_mutex held. */
static int slot_take(ums_pager *pg)
{
    for (int i = 0; i < MAX_REGIONS; ++i)
        if (!atomic_load(&g_regions[i])) {
            pg->slot = i;
            atomic_store_explicit(&g_regions[i], pg, memory_order_release);
            return 0;
        }
    errno = ENOSPC;
    return -1;
}

static void slot_give(ums_pager *pg)
{
    if (pg->slot >= 0)
        atomic_store(&g_regions[pg->slot], NULL);
    pg->slot = -1;
}

/* The region's own mapping: anywhere, or exactly at cfg.addr. */
static char *map_region(ums_pager *pg, int prot, int flags, int fd, char *why, size_t n)
{
    void *want = pg->cfg.addr;
    char *p = mmap(want, pg->bytes, prot, flags | MAP_NORESERVE | (want ? MAP_FIXED_NOREPLACE : 0), fd, 0);
    if (p != MAP_FAILED && want && p != want) { /* a kernel before 4.17 took the flag as a hint */
        munmap(p, pg->bytes);
        p = MAP_FAILED;
        errno = EEXIST;
    }
    if (p == MAP_FAILED) {
        int e = errno;
        if (want)
            snprintf(why, n, "cannot map %zu bytes at %p: %s", pg->bytes, want, strerror(e));
        else
            snprintf(why, n, "cannot map %zu bytes: %s", pg->bytes, strerror(e));
        errno = e;
        return NULL;
    }
    return p;
}

/* ---- SIGSEGV ------------------------------------------------------------------------ */

static void chain(int sig, siginfo_t *si, void *ctx)
{
    if ((g_prev_segv.sa_flags & SA_SIGINFO) && g_prev_segv.sa_sigaction)
        g_prev_segv.sa_sigaction(sig, si, ctx);
    else if (g_prev_segv.sa_handler != SIG_IGN && g_prev_segv.sa_handler != SIG_DFL)
        g_prev_segv.sa_handler(sig);
    else
        signal(SIGSEGV, SIG_DFL); /* the retried access dies with the usual signal */
}

/* UMS_PAGER_WRITE or UMS_PAGER_READ where the machine says which the access was. */
static int access_kind(void *ctx)
{
#if defined(__x86_64__) && defined(REG_ERR)
    const ucontext_t *uc = ctx;
    return (uc->uc_mcontext.gregs[REG_ERR] & 2) ? UMS_PAGER_WRITE : UMS_PAGER_READ;
#else
    (void)ctx;
    return 0;
#endif
}

static void segv_handler(int sig, siginfo_t *si, void *ctx)
{
    char *addr = si->si_addr;
    ums_pager *pg = region_at(addr, UMS_PAGER_SEGV);
    if (!pg) {
        chain(sig, si, ctx);
        return;
    }
    int saved = errno;
    size_t page = (size_t)(addr - pg->base) / pg->cfg.page_size;
    pg->cfg.fault(pg, pg->cfg.ctx, page, access_kind(ctx), -1);
    errno = saved;
}

static int segv_create(ums_pager *pg, char *why, size_t n)
{
    pg->fd = memfd_create(pg->cfg.name ? pg->cfg.name : "ums-pager", MFD_CLOEXEC);
    if (pg->fd < 0 || ftruncate(pg->fd, (off_t)pg->bytes) != 0) {
        snprintf(why, n, "cannot create a %zu-byte memfd: %s", pg->bytes, strerror(errno));
        return -1;
    }
    pg->base = map_region(pg, PROT_NONE, MAP_SHARED, pg->fd, why, n);
    if (!pg->base)
        return -1;
    pg->alias = mmap(NULL, pg->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, pg->fd, 0);
    if (pg->alias == MAP_FAILED) {
        pg->alias = NULL;
        snprintf(why, n, "cannot map the %zu-byte alias: %s", pg->bytes, strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&g_reg_mutex);
    int rc = 0;
    if (g_nsegv == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = segv_handler;
        /* SA_NODEFER: a fault callback may itself touch another region's page. */
        sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        rc = sigaction(SIGSEGV, &sa, &g_prev_segv);
    }
    if (rc == 0 && slot_take(pg) != 0) {
        if (g_nsegv == 0)
            sigaction(SIGSEGV, &g_prev_segv, NULL);
        rc = -1;
    }
    if (rc == 0)
        g_nsegv++;
    else
        snprintf(why, n, "cannot catch SIGSEGV for the region: %s", errno == ENOSPC ? "too many regions" : strerror(errno));
    pthread_mutex_unlock(&g_reg_mutex);
    return rc;
}

static void segv_unregister(ums_pager *pg)
{
    pthread_mutex_lock(&g_reg_mutex);
    if (pg->slot >= 0) {
        slot_give(pg);
        if (--g_nsegv == 0)
            sigaction(SIGSEGV, &g_prev_segv, NULL);
    }
    pthread_mutex_unlock(&g_reg_mutex);
}

/* ---- userfaultfd ------------------------------------------------------------------- */

/* userfaultfd(2) as this process may use it; the reason names the setting otherwise. */
static int open_uffd(int *user_mode_only, char *why, size_t n)
{
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    *user_mode_only = 0;
    if (fd >= 0)
        return fd;
    int e1 = errno;
#ifdef UFFD_USER_MODE_ONLY
    fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd >= 0) {
        *user_mode_only = 1;
        return fd;
    }
#endif
    int e2 = errno;
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
             "vm.unprivileged_userfaultfd=%s): set it to 1 or run with CAP_SYS_PTRACE",
             strerror(e1), strerror(e2), sysctl);
    errno = e1 == ENOSYS ? ENOSYS : EPERM;
    return -1;
}

/* The API handshake; with track_writes, write-protect faults must be on offer. */
static int uffd_api(int fd, int track_writes, char *why, size_t n)
{
    struct uffdio_api api = {.api = UFFD_API, .features = track_writes ? UFFD_FEATURE_PAGEFAULT_FLAG_WP : 0};
    if (ioctl(fd, UFFDIO_API, &api) != 0) {
        int e = errno;
        snprintf(why, n,
                 track_writes ? "userfaultfd has no write-protect support here (UFFDIO_API: %s; Linux >= 5.7 on "
                                "x86-64 needed to track dirty pages)"
                              : "userfaultfd refused its API handshake (UFFDIO_API: %s)",
                 strerror(e));
        errno = ENOSYS;
        return -1;
    }
    return 0;
}

int ums_pager_uffd_probe(int track_writes, char *why, size_t why_len)
{
    int umo;
    int fd = open_uffd(&umo, why, why_len);
    if (fd < 0)
        return -1;
    int rc = uffd_api(fd, track_writes, why, why_len);
    close(fd);
    return rc;
}

static int uffd_ioctl(unsigned long req, void *arg)
{
    while (ioctl(g_uffd, req, arg) != 0)
        if (errno != EAGAIN) /* EAGAIN: the mm changed under the call (a concurrent munmap) */
            return -1;
    return 0;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    struct pollfd pfd = {g_uffd, POLLIN, 0};
    while (atomic_load(&g_running)) {
        if (poll(&pfd, 1, 20) <= 0)
            continue;
        struct uffd_msg msg;
        if (read(g_uffd, &msg, sizeof msg) != sizeof msg)
            continue; /* another worker took it (EAGAIN) */
        if (msg.event != UFFD_EVENT_PAGEFAULT)
            continue;
        char *addr = (char *)(uintptr_t)msg.arg.pagefault.address;
        ums_pager *pg = region_at(addr, UMS_PAGER_UFFD);
        if (!pg)
            continue; /* stopped meanwhile: unregistering woke the thread */
        size_t page = (size_t)(addr - pg->base) / pg->cfg.page_size;
        int flags = 0;
        if (msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP)
            flags |= UMS_PAGER_WP;
        flags |= msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WRITE ? UMS_PAGER_WRITE : UMS_PAGER_READ;
        pg->cfg.fault(pg, pg->cfg.ctx, page, flags, id);
    }
    return NULL;
}

/* The process's userfaultfd, opened by the first uffd region (g_reg_mutex held): with
 * write-protect faults where the kernel has them, whether this region asks or not. */
static int uffd_open_shared(char *why, size_t n)
{
    if (g_uffd >= 0)
        return 0;
    for (int wp = 1; wp >= 0; --wp) {
        int umo, fd = open_uffd(&umo, why, n);
        if (fd < 0)
            return -1;
        if (uffd_api(fd, wp, why, n) == 0) {
            g_uffd = fd, g_uffd_user_mode_only = umo, g_uffd_wp = wp;
            return 0;
        }
        close(fd);
    }
    return -1;
}

/* g_reg_mutex held: the last uffd region gone, the workers stop and the fd closes. */
static void uffd_release(void)
{
    if (g_nuffd > 0 || g_uffd < 0)
        return;
    atomic_store(&g_running, 0);
    for (int i = 0; i < g_nworkers; ++i)
        pthread_join(g_workers[i], NULL);
    g_nworkers = 0;
    close(g_uffd);
    g_uffd = -1;
}

static int uffd_create(ums_pager *pg, char *why, size_t n)
{
    const ums_pager_config *c = &pg->cfg;
    pg->zeros = calloc(1, c->page_size);
    if (!pg->zeros) {
        snprintf(why, n, "out of memory");
        return -1;
    }
    pg->base = map_region(pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, why, n);
    if (!pg->base)
        return -1;
    pthread_mutex_lock(&g_reg_mutex);
    int e = 0;
    if (uffd_open_shared(why, n) != 0) {
        e = errno;
    } else if (c->track_writes && !g_uffd_wp) {
        snprintf(why, n, "userfaultfd has no write-protect support here (Linux >= 5.7 on x86-64 needed to "
                         "track dirty pages)");
        e = ENOSYS;
    } else {
        struct uffdio_register reg = {.range = {(unsigned long)pg->base, pg->bytes},
                                      .mode = UFFDIO_REGISTER_MODE_MISSING |
                                              (c->track_writes ? UFFDIO_REGISTER_MODE_WP : 0)};
        if (ioctl(g_uffd, UFFDIO_REGISTER, &reg) != 0 ||
            (c->track_writes && !(reg.ioctls & (1ULL << _UFFDIO_WRITEPROTECT)))) {
            snprintf(why, n, "cannot register %zu bytes with userfaultfd for missing%s faults (%s)", pg->bytes,
                     c->track_writes ? " and write-protect" : "", strerror(errno));
            e = ENOSYS;
        } else {
            pg->registered = 1;
            g_nuffd++;
            if (slot_take(pg) != 0) {
                snprintf(why, n, "too many regions");
                e = ENOSPC;
            }
            /* The pool grows to the most workers any region asked for. */
            atomic_store(&g_running, 1);
            for (; !e && g_nworkers < c->workers; ++g_nworkers)
                if (pthread_create(&g_workers[g_nworkers], NULL, worker, (void *)(intptr_t)g_nworkers) != 0) {
                    snprintf(why, n, "cannot start userfaultfd worker %d", g_nworkers);
                    e = EAGAIN;
                }
        }
    }
    pthread_mutex_unlock(&g_reg_mutex);
    errno = e;
    return e ? -1 : 0;
}

static void uffd_unregister(ums_pager *pg)
{
    pthread_mutex_lock(&g_reg_mutex);
    slot_give(pg);
    if (pg->registered) {
        /* Threads waiting on the range are woken and find ordinary memory. */
        struct uffdio_range r = {(unsigned long)pg->base, pg->bytes};
        ioctl(g_uffd, UFFDIO_UNREGISTER, &r);
        pg->registered = 0;
        g_nuffd--;
    }
    uffd_release();
    pthread_mutex_unlock(&g_reg_mutex);
}

/* ---- regions ------------------------------------------------------------------------ */

int ums_pager_create(const ums_pager_config *cfg, ums_pager **out, char *why, size_t why_len)
{
    long os_page = sysconf(_SC_PAGESIZE);
    *out = NULL;
    if (!cfg->fault || cfg->page_size == 0 || cfg->page_size % (size_t)os_page || cfg->bytes == 0 ||
        (cfg->engine != UMS_PAGER_SEGV && cfg->engine != UMS_PAGER_UFFD) ||
        (cfg->engine == UMS_PAGER_UFFD && (cfg->workers < 1 || cfg->workers > MAX_WORKERS)) ||
        ((uintptr_t)cfg->addr % (uintptr_t)os_page)) {
        snprintf(why, why_len, "bad pager configuration (page size %zu, OS page %ld, %d workers, address %p)",
                 cfg->page_size, os_page, cfg->workers, cfg->addr);
        errno = EINVAL;
        return -1;
    }
    ums_pager *pg = calloc(1, sizeof *pg);
    if (!pg) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    pg->cfg = *cfg;
    pg->pages = (cfg->bytes + cfg->page_size - 1) / cfg->page_size;
    pg->bytes = pg->pages * cfg->page_size;
    pg->fd = -1;
    pg->slot = -1;
    int rc = cfg->engine == UMS_PAGER_UFFD ? uffd_create(pg, why, why_len) : segv_create(pg, why, why_len);
    if (rc != 0) {
        int e = errno;
        ums_pager_destroy(pg);
        errno = e;
        return -1;
    }
    *out = pg;
    return 0;
}

void ums_pager_stop(ums_pager *pg)
{
    if (!pg)
        return;
    if (pg->cfg.engine == UMS_PAGER_UFFD)
        uffd_unregister(pg);
    else
        segv_unregister(pg);
}

void ums_pager_destroy(ums_pager *pg)
{
    if (!pg)
        return;
    ums_pager_stop(pg);
    if (pg->base)
        munmap(pg->base, pg->bytes);
    if (pg->alias)
        munmap(pg->alias, pg->bytes);
    if (pg->fd >= 0)
        close(pg->fd);
    free(pg->zeros);
    free(pg);
}

char *ums_pager_base(const ums_pager *pg) { return pg->base; }
char *ums_pager_alias(const ums_pager *pg) { return pg->alias; }
size_t ums_pager_page_size(const ums_pager *pg) { return pg->cfg.page_size; }
size_t ums_pager_pages(const ums_pager *pg) { return pg->pages; }
ums_pager_engine ums_pager_engine_of(const ums_pager *pg) { return pg->cfg.engine; }
int ums_pager_user_mode_only(const ums_pager *pg)
{
    return pg->cfg.engine == UMS_PAGER_UFFD && g_uffd_user_mode_only;
}
int ums_pager_tracks_writes(const ums_pager *pg) { return pg->cfg.track_writes; }

static int in_range(const ums_pager *pg, size_t first, size_t n)
{
    if (n == 0 || first >= pg->pages || n > pg->pages - first) {
        errno = EINVAL;
        return 0;
    }
    return 1;
}

static int seg_protect(ums_pager *pg, size_t first, size_t n, int prot)
{
    size_t ps = pg->cfg.page_size;
    return mprotect(pg->base + first * ps, n * ps, prot);
}

int ums_pager_install(ums_pager *pg, size_t first, size_t n, const void *src, int prot)
{
    if (!in_range(pg, first, n))
        return -1;
    size_t ps = pg->cfg.page_size;
    if (pg->cfg.engine == UMS_PAGER_SEGV) {
        if (src)
            memcpy(pg->alias + first * ps, src, n * ps);
        return seg_protect(pg, first, n, prot == UMS_PAGER_RO ? PROT_READ : PROT_READ | PROT_WRITE);
    }
    int wp = prot == UMS_PAGER_RO && pg->cfg.track_writes;
    if (src) { /* one copy for the run: the kernel installs and wakes it at once */
        struct uffdio_copy c = {.dst = (unsigned long)(pg->base + first * ps), .src = (unsigned long)src,
                                .len = n * ps, .mode = wp ? UFFDIO_COPY_MODE_WP : 0};
        return uffd_ioctl(UFFDIO_COPY, &c);
    }
    for (size_t i = 0; i < n; ++i) {
        /* Zeros: UFFDIO_ZEROPAGE has no write-protected mode. */
        struct uffdio_copy c = {.dst = (unsigned long)(pg->base + (first + i) * ps), .src = (unsigned long)pg->zeros,
                                .len = ps, .mode = wp ? UFFDIO_COPY_MODE_WP : 0};
        if (uffd_ioctl(UFFDIO_COPY, &c) != 0)
            return -1;
    }
    return 0;
}

int ums_pager_protect(ums_pager *pg, size_t first, size_t n, int prot)
{
    if (!in_range(pg, first, n))
        return -1;
    if (pg->cfg.engine == UMS_PAGER_SEGV)
        return seg_protect(pg, first, n, prot == UMS_PAGER_RO ? PROT_READ : PROT_READ | PROT_WRITE);
    if (!pg->cfg.track_writes) {
        if (prot == UMS_PAGER_RW)
            return 0;
        errno = ENOTSUP;
        return -1;
    }
    size_t ps = pg->cfg.page_size;
    struct uffdio_writeprotect wp = {.range = {(unsigned long)(pg->base + first * ps), n * ps},
                                     .mode = prot == UMS_PAGER_RO ? UFFDIO_WRITEPROTECT_MODE_WP : 0};
    return uffd_ioctl(UFFDIO_WRITEPROTECT, &wp);
}

int ums_pager_drop(ums_pager *pg, size_t first, size_t n)
{
    if (!in_range(pg, first, n))
        return -1;
    size_t ps = pg->cfg.page_size;
    if (pg->cfg.engine == UMS_PAGER_SEGV) {
        if (seg_protect(pg, first, n, PROT_NONE) != 0)
            return -1;
        /* The frame's memory goes back; the next install starts from zeros. */
        fallocate(pg->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(first * ps), (off_t)(n * ps));
        return 0;
    }
    return madvise(pg->base + first * ps, n * ps, MADV_DONTNEED);
}

int ums_pager_wake(ums_pager *pg, size_t first, size_t n)
{
    if (!in_range(pg, first, n))
        return -1;
    if (pg->cfg.engine == UMS_PAGER_SEGV)
        return 0;
    size_t ps = pg->cfg.page_size;
    struct uffdio_range r = {(unsigned long)(pg->base + first * ps), n * ps};
    return uffd_ioctl(UFFDIO_WAKE, &r);
}
