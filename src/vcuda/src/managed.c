/* vcuda managed memory: page states, the fault path, flushes and invalidation (see
 * managed.h for the semantics).  One lock for all of it: the fault path, the runtime's
 * hooks and the copies they make are serialized, which is what a single connection to
 * the device does to them anyway. */
#define _GNU_SOURCE
#include "managed.h"

#include "umstudy/pager.h"
#include "umstudy/support.h"
#include "vcuda/proto.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ABSENT = 0, CLEAN, DIRTY };
enum { LOCATION_HOST = -1, LOCATION_NONE = -2 }; /* cudaCpuDeviceId, cudaInvalidDeviceId */

typedef struct {
    uint64_t lo, hi; /* bytes that exist on the device */
} span;

typedef struct region {
    ums_pager *pg;
    int dev;
    uint64_t base, raw; /* the mapping's start; the device allocation's (0: a variable) */
    size_t ps, npages, size;
    uint8_t *state;
    size_t nresident, ndirty;
    int fresh;   /* zeros on the server and nothing sent since: faults install zeros */
    int pending; /* device work may touch it since the last synchronization */
    unsigned attach;
    const void *stream; /* VCUDA_ATTACH_SINGLE: the stream */
    span *valid;
    size_t nvalid;
    /* per page, made at the first advice or prefetch: the advice and where it went last */
    int8_t *preferred, *last_prefetch;
    uint8_t *read_mostly;
    uint64_t *accessed_by;
    size_t ra_next, ra_window; /* readahead: where a sequential fault would come next */
    struct region *next;
} region;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static region *regions;
static _Atomic int nregions;
static vcuda_managed_ops ops;
static struct {
    int done;
    size_t page, os_page;
    int readahead;
    ums_pager_engine engine;
    char error[VCUDA_MANAGED_WHY_LEN];
} cfg;
static char *staging; /* uffd: pages are fetched here, then installed */
static size_t staging_cap;
static vcuda_managed_stats st;

void vcuda_managed_init(const vcuda_managed_ops *o) { ops = *o; }

/* ---- configuration ------------------------------------------------------------------ */

static int configure(char *why)
{
    if (cfg.done) {
        if (*cfg.error) snprintf(why, VCUDA_MANAGED_WHY_LEN, "%s", cfg.error);
        return *cfg.error ? -1 : 0;
    }
    cfg.done = 1;
    cfg.os_page = (size_t)sysconf(_SC_PAGESIZE);
    cfg.page = 64 << 10;
    cfg.readahead = 32;
    const char *v = getenv("VCUDA_MANAGED_PAGE");
    if (v && *v && (ums_parse_size(v, &cfg.page) || !cfg.page || cfg.page % cfg.os_page || cfg.page > (64u << 20)))
        snprintf(cfg.error, sizeof cfg.error, "VCUDA_MANAGED_PAGE=%s is not a multiple of the %zu-byte OS page up to 64M",
                 v, cfg.os_page);
    v = getenv("VCUDA_MANAGED_READAHEAD");
    char *end;
    long ra = v && *v ? strtol(v, &end, 10) : 32;
    if (!*cfg.error && v && *v && (*end || ra < 1 || ra > 4096))
        snprintf(cfg.error, sizeof cfg.error, "VCUDA_MANAGED_READAHEAD=%s is not a page count in 1..4096", v);
    cfg.readahead = (int)ra;
    v = getenv("VCUDA_MANAGED_ENGINE");
    char probe[400];
    if (!*cfg.error) {
        if (v && *v && strcmp(v, "auto") && strcmp(v, "uffd") && strcmp(v, "segv")) {
            snprintf(cfg.error, sizeof cfg.error, "VCUDA_MANAGED_ENGINE=%s is none of auto, uffd, segv", v);
        } else if (v && !strcmp(v, "segv")) {
            cfg.engine = UMS_PAGER_SEGV;
        } else if (ums_pager_uffd_probe(1, probe, sizeof probe) == 0) {
            cfg.engine = UMS_PAGER_UFFD;
        } else if (v && !strcmp(v, "uffd")) {
            snprintf(cfg.error, sizeof cfg.error, "VCUDA_MANAGED_ENGINE=uffd: %s", probe);
        } else {
            cfg.engine = UMS_PAGER_SEGV;
        }
    }
    if (*cfg.error) snprintf(why, VCUDA_MANAGED_WHY_LEN, "%s", cfg.error);
    return *cfg.error ? -1 : 0;
}

/* Small allocations take OS pages: a 64 KiB page for 100 bytes would waste the device
 * memory that keeps ranges apart. */
static size_t page_for(size_t size) { return size < cfg.page ? cfg.os_page : cfg.page; }

int vcuda_managed_layout(size_t size, size_t *bytes, size_t *align, char *why)
{
    pthread_mutex_lock(&mu);
    int rc = configure(why);
    pthread_mutex_unlock(&mu);
    if (rc) {
        errno = EINVAL;
        return -1;
    }
    size_t ps = page_for(size);
    *align = ps;
    *bytes = (size + ps - 1) / ps * ps + ps;
    return 0;
}

/* ---- the fault path ------------------------------------------------------------------ */

static void fatal(const region *r, size_t page, const char *what, const char *why)
{
    fprintf(stderr, "vcuda: managed memory at 0x%llx (device %d): %s: %s\n",
            (unsigned long long)(r->base + page * r->ps), r->dev, what, why);
    abort();
}

static int pager_fail(const char *what, char *why)
{
    snprintf(why, VCUDA_MANAGED_WHY_LEN, "%s of managed pages failed: %s", what, strerror(errno));
    return -1;
}

/* Device work may still touch r: the device finishes first (mu held). */
static int settle(region *r, char *why)
{
    if (!r->pending) return 0;
    if (ops.synchronize(r->dev, why)) return -1;
    st.fault_syncs++;
    for (region *q = regions; q; q = q->next)
        if (q->dev == r->dev) q->pending = 0;
    return 0;
}

/* Copies the device's bytes of pages [first, first+n) of r to dst (zeros where the
 * device has none). */
static int fetch_into(region *r, size_t first, size_t n, char *dst, char *why)
{
    uint64_t lo = r->base + first * r->ps, hi = lo + n * r->ps;
    for (size_t i = 0; i < r->nvalid; ++i) {
        uint64_t a = r->valid[i].lo > lo ? r->valid[i].lo : lo, b = r->valid[i].hi < hi ? r->valid[i].hi : hi;
        if (a >= b) continue;
        if (ops.from_device(r->dev, dst + (a - lo), a, b - a, why)) return -1;
        st.bytes_from_device += b - a;
        st.transfers_from_device++;
    }
    return 0;
}

/* Makes [first, first+n) present and clean (mu held; the pages absent); writable: a
 * fresh range's zeros installed read-write (the caller marks them dirty). */
static int bring_in(region *r, size_t first, size_t n, int writable, char *why)
{
    if (settle(r, why)) return -1;
    if (r->fresh) {
        if (ums_pager_install(r->pg, first, n, NULL, writable ? UMS_PAGER_RW : UMS_PAGER_RO))
            return pager_fail("installing", why);
        st.zero_fills += n;
    } else if (ums_pager_engine_of(r->pg) == UMS_PAGER_SEGV) {
        /* straight into the pages through the alias: they stay inaccessible until installed */
        if (fetch_into(r, first, n, ums_pager_alias(r->pg) + first * r->ps, why)) return -1;
        if (ums_pager_install(r->pg, first, n, NULL, UMS_PAGER_RO)) return pager_fail("installing", why);
        st.pages_fetched += n;
    } else {
        size_t bytes = n * r->ps;
        if (bytes > staging_cap) {
            char *b = realloc(staging, bytes);
            if (!b) return snprintf(why, VCUDA_MANAGED_WHY_LEN, "out of memory for %zu bytes of staging", bytes), -1;
            staging = b, staging_cap = bytes;
        }
        memset(staging, 0, bytes);
        if (fetch_into(r, first, n, staging, why)) return -1;
        if (ums_pager_install(r->pg, first, n, staging, UMS_PAGER_RO)) return pager_fail("installing", why);
        st.pages_fetched += n;
    }
    memset(r->state + first, CLEAN, n);
    r->nresident += n;
    return 0;
}

static void on_fault(ums_pager *pg, void *ctx, size_t page, int flags, int worker)
{
    (void)worker;
    region *r = ctx;
    char why[VCUDA_MANAGED_WHY_LEN];
    pthread_mutex_lock(&mu);
    if (r->state[page] == ABSENT) {
        /* readahead: a fault where the last fetch ended doubles the window */
        size_t win = page == r->ra_next && r->ra_window ? r->ra_window * 2 : 1;
        if (win > (size_t)cfg.readahead) win = (size_t)cfg.readahead;
        size_t n = 1;
        while (n < win && page + n < r->npages && r->state[page + n] == ABSENT) ++n;
        r->ra_window = win, r->ra_next = page + n;
        st.faults++;
        /* A write to zeros nobody has sent yet is how a program initializes its data: the
         * whole window comes in writable and dirty (what the host leaves at zero goes to
         * the server as zeros: at most a window's worth), saving a fault per page. */
        int init = r->fresh && (flags & UMS_PAGER_WRITE);
        if (bring_in(r, page, n, init, why)) fatal(r, page, "fetching from the device", why);
        if (init) {
            memset(r->state + page, DIRTY, n);
            r->ndirty += n;
        } else if (flags & UMS_PAGER_WRITE) { /* known to be a write: no second fault for it */
            r->state[page] = DIRTY, r->ndirty++;
            if (ums_pager_protect(pg, page, 1, UMS_PAGER_RW)) fatal(r, page, "write-enabling", strerror(errno));
        }
    } else if (r->state[page] == CLEAN &&
               (flags & UMS_PAGER_WP || (ums_pager_engine_of(pg) == UMS_PAGER_SEGV && !(flags & UMS_PAGER_READ)))) {
        r->state[page] = DIRTY, r->ndirty++;
        st.write_faults++;
        if (ums_pager_protect(pg, page, 1, UMS_PAGER_RW)) fatal(r, page, "write-enabling", strerror(errno));
    } else {
        ums_pager_wake(pg, page, 1); /* resolved meanwhile by another fault */
    }
    pthread_mutex_unlock(&mu);
}

/* ---- flushing and dropping (mu held) ---------------------------------------------------- */

/* Dirty pages of [first, last) go to the device: runs of them (with clean pages between
 * taken along where that saves a round trip), each one transfer.  They are then clean;
 * keep: read-only again (the host may go on reading them), else the caller drops them. */
static int flush(region *r, size_t first, size_t last, int keep, char *why)
{
    enum { GAP_BYTES = 256 << 10 };
    if (!r->ndirty) return 0;
    for (size_t p = first; p < last;) {
        if (r->state[p] != DIRTY) {
            ++p;
            continue;
        }
        size_t a = p, b = p;
        for (;;) {
            while (b < last && r->state[b] == DIRTY) ++b;
            size_t g = b;
            while (g < last && r->state[g] == CLEAN && (g - b) * r->ps < GAP_BYTES) ++g;
            if (g < last && g > b && r->state[g] == DIRTY) b = g;
            else break;
        }
        uint64_t lo = r->base + a * r->ps, hi = r->base + b * r->ps;
        for (size_t i = 0; i < r->nvalid; ++i) {
            uint64_t x = r->valid[i].lo > lo ? r->valid[i].lo : lo, y = r->valid[i].hi < hi ? r->valid[i].hi : hi;
            if (x >= y) continue;
            if (ops.to_device(r->dev, x, (const void *)(uintptr_t)x, y - x, why)) return -1;
            st.bytes_to_device += y - x;
            st.transfers_to_device++;
        }
        for (size_t q = a; q < b; ++q)
            if (r->state[q] == DIRTY) r->state[q] = CLEAN, r->ndirty--;
        if (keep && ums_pager_protect(r->pg, a, b - a, UMS_PAGER_RO)) return pager_fail("write-protecting", why);
        r->fresh = 0;
        p = b;
    }
    return 0;
}

/* The host copies of [first, last) dropped: the device's are the data now. */
static int drop(region *r, size_t first, size_t last, char *why)
{
    size_t n = 0;
    for (size_t p = first; r->nresident && p < last; ++p) n += r->state[p] != ABSENT;
    if (n) {
        if (ums_pager_drop(r->pg, first, last - first)) return pager_fail("dropping", why);
        memset(r->state + first, ABSENT, last - first);
        r->nresident -= n;
        st.pages_dropped += n;
    }
    r->pending = 1, r->fresh = 0;
    r->ra_next = r->ra_window = 0;
    return 0;
}

/* ---- ranges ---------------------------------------------------------------------------- */

static region *find(uint64_t a)
{
    for (region *r = regions; r; r = r->next)
        for (size_t i = 0; i < r->nvalid; ++i)
            if (a >= r->valid[i].lo && a < r->valid[i].hi) return r;
    return NULL;
}

int vcuda_managed_find(const void *p, size_t n, int *dev)
{
    if (!atomic_load_explicit(&nregions, memory_order_relaxed)) return 0;
    uint64_t a = (uint64_t)(uintptr_t)p;
    pthread_mutex_lock(&mu);
    region *r = find(a);
    int in = r && (n == 0 || (r->raw ? a + n <= r->base + r->size : find(a + n - 1) == r));
    if (in && dev) *dev = r->dev;
    pthread_mutex_unlock(&mu);
    return in;
}

static region *region_new(int dev, uint64_t base, size_t ps, size_t bytes, char *why)
{
    region *r = calloc(1, sizeof *r);
    size_t npages = (bytes + ps - 1) / ps;
    if (!r || !(r->state = calloc(npages, 1))) {
        free(r);
        snprintf(why, VCUDA_MANAGED_WHY_LEN, "out of memory");
        errno = ENOMEM;
        return NULL;
    }
    ums_pager_config pc = {.bytes = npages * ps, .page_size = ps, .engine = cfg.engine, .track_writes = 1,
                           .workers = 2, .fault = on_fault, .ctx = r, .name = "vcuda-managed",
                           .addr = (void *)(uintptr_t)base};
    char pwhy[400];
    if (ums_pager_create(&pc, &r->pg, pwhy, sizeof pwhy)) {
        int e = errno;
        snprintf(why, VCUDA_MANAGED_WHY_LEN, "%s", pwhy);
        free(r->state);
        free(r);
        errno = e;
        return NULL;
    }
    r->dev = dev, r->base = base, r->ps = ps, r->npages = npages;
    r->attach = VCUDA_ATTACH_GLOBAL;
    return r;
}

static void region_link(region *r)
{
    r->next = regions;
    regions = r;
    atomic_fetch_add(&nregions, 1);
}

int vcuda_managed_map(int dev, uint64_t dptr, size_t size, unsigned attach, uint64_t raw, char *why)
{
    pthread_mutex_lock(&mu);
    int rc = -1;
    region *r = configure(why) ? NULL : region_new(dev, dptr, page_for(size), size, why);
    if (r && !(r->valid = malloc(sizeof *r->valid))) {
        ums_pager_destroy(r->pg);
        free(r->state), free(r), r = NULL;
        snprintf(why, VCUDA_MANAGED_WHY_LEN, "out of memory");
    }
    if (r) {
        r->valid[0] = (span){dptr, dptr + size};
        r->nvalid = 1;
        r->raw = raw, r->size = size, r->attach = attach, r->fresh = 1;
        region_link(r);
        rc = 0;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

static void region_free(region *r)
{
    ums_pager_destroy(r->pg);
    free(r->state);
    free(r->valid);
    free(r->preferred), free(r->last_prefetch), free(r->read_mostly), free(r->accessed_by);
    free(r);
}

/* The per-page advice and prefetch records, none yet (mu held): 0, or -1 out of memory. */
static int records(region *r)
{
    if (r->preferred) return 0;
    r->preferred = malloc(r->npages), r->last_prefetch = malloc(r->npages);
    r->read_mostly = calloc(r->npages, 1), r->accessed_by = calloc(r->npages, sizeof *r->accessed_by);
    if (!r->preferred || !r->last_prefetch || !r->read_mostly || !r->accessed_by) {
        free(r->preferred), free(r->last_prefetch), free(r->read_mostly), free(r->accessed_by);
        r->preferred = r->last_prefetch = NULL, r->read_mostly = NULL, r->accessed_by = NULL;
        return -1;
    }
    memset(r->preferred, LOCATION_NONE, r->npages);
    memset(r->last_prefetch, LOCATION_NONE, r->npages);
    return 0;
}

int vcuda_managed_unmap(uint64_t dptr, uint64_t *raw)
{
    if (!atomic_load(&nregions)) return 0;
    pthread_mutex_lock(&mu);
    region **at = &regions;
    while (*at && !((*at)->raw && (*at)->base == dptr)) at = &(*at)->next;
    region *r = *at;
    if (r) {
        *at = r->next;
        atomic_fetch_sub(&nregions, 1);
        *raw = r->raw;
    }
    pthread_mutex_unlock(&mu);
    if (r) region_free(r);
    return r != NULL;
}

static int by_start(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int vcuda_managed_map_vars(int dev, const uint64_t *dptr, const size_t *size, size_t n, char *why)
{
    span *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return snprintf(why, VCUDA_MANAGED_WHY_LEN, "out of memory"), -1;
    size_t m = 0;
    for (size_t i = 0; i < n; ++i)
        if (size[i]) v[m++] = (span){dptr[i], dptr[i] + size[i]};
    qsort(v, m, sizeof *v, by_start);
    pthread_mutex_lock(&mu);
    int rc = configure(why);
    uint64_t ps = cfg.os_page;
    /* the variables whose pages touch make one region (only their bytes ever cross) */
    for (size_t a = 0; a < m && !rc;) {
        uint64_t lo = v[a].lo / ps * ps, hi = (v[a].hi + ps - 1) / ps * ps;
        size_t b = a + 1;
        for (; b < m && v[b].lo / ps * ps <= hi; ++b)
            if ((v[b].hi + ps - 1) / ps * ps > hi) hi = (v[b].hi + ps - 1) / ps * ps;
        for (region *q = regions; q && !rc; q = q->next)
            if (lo < q->base + q->npages * q->ps && hi > q->base) {
                snprintf(why, VCUDA_MANAGED_WHY_LEN,
                         "__managed__ variables at 0x%llx share pages with another managed range",
                         (unsigned long long)v[a].lo);
                rc = -1;
            }
        region *r = rc ? NULL : region_new(dev, lo, ps, hi - lo, why);
        if (!rc && (!r || !(r->valid = malloc((b - a) * sizeof *r->valid)))) {
            if (r) ums_pager_destroy(r->pg), free(r->state), free(r);
            if (r) snprintf(why, VCUDA_MANAGED_WHY_LEN, "out of memory");
            rc = -1;
        }
        if (!rc) {
            memcpy(r->valid, v + a, (b - a) * sizeof *r->valid);
            r->nvalid = b - a;
            r->pending = 1; /* device work may have run on the module already */
            region_link(r);
        }
        a = b;
    }
    pthread_mutex_unlock(&mu);
    free(v);
    return rc;
}

void vcuda_managed_forget_device(int dev)
{
    region *gone = NULL;
    pthread_mutex_lock(&mu);
    for (region **at = &regions; *at;) {
        region *r = *at;
        if (r->dev == dev) {
            *at = r->next, r->next = gone, gone = r;
            atomic_fetch_sub(&nregions, 1);
        } else {
            at = &r->next;
        }
    }
    pthread_mutex_unlock(&mu);
    while (gone) {
        region *r = gone;
        gone = r->next;
        region_free(r);
    }
}

/* ---- the runtime's hooks --------------------------------------------------------------- */

static int touches(const region *r, int dev, const void *stream)
{
    if (r->dev != dev || r->attach == VCUDA_ATTACH_HOST) return 0;
    return r->attach != VCUDA_ATTACH_SINGLE || r->stream == stream;
}

int vcuda_managed_before_launch(int dev, const void *stream, char *why)
{
    if (!atomic_load_explicit(&nregions, memory_order_relaxed)) return 0;
    pthread_mutex_lock(&mu);
    int rc = 0;
    uint64_t before = st.bytes_to_device;
    st.launches++;
    for (region *r = regions; r && !rc; r = r->next)
        if (touches(r, dev, stream)) rc = flush(r, 0, r->npages, 0, why) || drop(r, 0, r->npages, why);
    if (st.bytes_to_device != before) st.flushes++;
    pthread_mutex_unlock(&mu);
    return rc ? -1 : 0;
}

/* The pages of r that [p, +n) covers. */
static void pages_of(const region *r, const void *p, size_t n, size_t *first, size_t *last)
{
    uint64_t a = (uint64_t)(uintptr_t)p - r->base;
    *first = a / r->ps;
    *last = (a + (n ? n : 1) + r->ps - 1) / r->ps;
    if (*last > r->npages) *last = r->npages;
}

static int range_op(const void *p, size_t n, int writes, char *why)
{
    if (!atomic_load_explicit(&nregions, memory_order_relaxed)) return 0;
    pthread_mutex_lock(&mu);
    int rc = 0;
    region *r = find((uint64_t)(uintptr_t)p);
    if (r) {
        size_t first, last;
        pages_of(r, p, n, &first, &last);
        rc = flush(r, first, last, !writes, why) || (writes && drop(r, first, last, why));
    }
    pthread_mutex_unlock(&mu);
    return rc ? -1 : 0;
}

int vcuda_managed_device_reads(const void *p, size_t n, char *why) { return range_op(p, n, 0, why); }
int vcuda_managed_device_writes(const void *p, size_t n, char *why) { return range_op(p, n, 1, why); }

void vcuda_managed_synchronized(int dev)
{
    if (!atomic_load_explicit(&nregions, memory_order_relaxed)) return;
    pthread_mutex_lock(&mu);
    for (region *r = regions; r; r = r->next)
        if (r->dev == dev) r->pending = 0;
    pthread_mutex_unlock(&mu);
}

int vcuda_managed_prefetch(const void *p, size_t n, int to_host, int location, char *why)
{
    pthread_mutex_lock(&mu);
    int rc = 0;
    region *r = find((uint64_t)(uintptr_t)p);
    if (!r) {
        pthread_mutex_unlock(&mu);
        snprintf(why, VCUDA_MANAGED_WHY_LEN, "not managed memory");
        errno = EINVAL;
        return -1;
    }
    size_t first, last;
    pages_of(r, p, n, &first, &last);
    st.prefetches++;
    if (!to_host) {
        rc = flush(r, first, last, 1, why);
    } else {
        /* the absent runs, each in one fetch of up to the readahead window */
        for (size_t q = first; q < last && !rc;) {
            if (r->state[q] != ABSENT) {
                ++q;
                continue;
            }
            size_t e = q;
            while (e < last && e - q < (size_t)cfg.readahead && r->state[e] == ABSENT) ++e;
            rc = bring_in(r, q, e - q, 0, why);
            q = e;
        }
    }
    if (!rc && !records(r)) memset(r->last_prefetch + first, location, last - first);
    pthread_mutex_unlock(&mu);
    return rc;
}

int vcuda_managed_attach(const void *p, unsigned attach, const void *stream)
{
    pthread_mutex_lock(&mu);
    region *r = find((uint64_t)(uintptr_t)p);
    if (r) r->attach = attach, r->stream = attach == VCUDA_ATTACH_SINGLE ? stream : NULL;
    pthread_mutex_unlock(&mu);
    return r ? 0 : -1;
}

int vcuda_managed_advise(const void *p, size_t n, int what, int set, int location)
{
    pthread_mutex_lock(&mu);
    region *r = find((uint64_t)(uintptr_t)p);
    int rc = r && !records(r) ? 0 : -1;
    if (!rc) {
        size_t first, last;
        pages_of(r, p, n, &first, &last);
        uint64_t bit = location == LOCATION_HOST ? 1ull << 63 : location >= 0 && location < 63 ? 1ull << location : 0;
        for (size_t q = first; q < last; ++q) {
            if (what == VCUDA_ADVICE_READ_MOSTLY) r->read_mostly[q] = (uint8_t)set;
            if (what == VCUDA_ADVICE_PREFERRED) r->preferred[q] = (int8_t)(set ? location : LOCATION_NONE);
            if (what == VCUDA_ADVICE_ACCESSED_BY) r->accessed_by[q] = set ? r->accessed_by[q] | bit : r->accessed_by[q] & ~bit;
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

/* Over the pages of [p, +n): read-mostly where all are, a location where all agree (else
 * none), the devices advised for all of them. */
int vcuda_managed_attributes(const void *p, size_t n, vcuda_managed_attrs *out)
{
    pthread_mutex_lock(&mu);
    region *r = find((uint64_t)(uintptr_t)p);
    if (r) {
        *out = (vcuda_managed_attrs){0, LOCATION_NONE, LOCATION_NONE, 0};
        if (r->preferred) {
            size_t first, last;
            pages_of(r, p, n, &first, &last);
            int rm = 1, pref = r->preferred[first], lastp = r->last_prefetch[first];
            uint64_t by = ~0ull;
            for (size_t q = first; q < last; ++q) {
                rm &= r->read_mostly[q];
                if (r->preferred[q] != pref) pref = LOCATION_NONE;
                if (r->last_prefetch[q] != lastp) lastp = LOCATION_NONE;
                by &= r->accessed_by[q];
            }
            *out = (vcuda_managed_attrs){rm, pref, lastp, by};
        }
    }
    pthread_mutex_unlock(&mu);
    return r ? 0 : -1;
}

/* ---- statistics ------------------------------------------------------------------------ */

__attribute__((visibility("default"))) void vcuda_managed_get_stats(vcuda_managed_stats *out)
{
    pthread_mutex_lock(&mu);
    *out = st;
    pthread_mutex_unlock(&mu);
}

void vcuda_managed_stats_print(void)
{
    vcuda_managed_stats s;
    vcuda_managed_get_stats(&s);
    if (!cfg.done || *cfg.error) return; /* no managed memory was used */
    double per = s.launches ? (double)s.bytes_to_device / (double)s.launches : 0;
    fprintf(stderr,
            "{\"bench\":\"vcuda-managed\",\"metric\":\"bytes_to_device\",\"value\":%llu,\"unit\":\"B\","
            "\"engine\":\"%s\",\"page_bytes\":%zu,\"readahead_pages\":%d,\"launches\":%llu,\"flushes\":%llu,"
            "\"transfers_to_device\":%llu,\"bytes_to_device_per_launch\":%.1f,\"faults\":%llu,\"pages_fetched\":%llu,"
            "\"bytes_from_device\":%llu,\"transfers_from_device\":%llu,\"zero_fills\":%llu,\"write_faults\":%llu,"
            "\"fault_syncs\":%llu,\"pages_dropped\":%llu,\"prefetches\":%llu}\n",
            (unsigned long long)s.bytes_to_device, cfg.engine == UMS_PAGER_UFFD ? "uffd" : "segv", cfg.page,
            cfg.readahead, (unsigned long long)s.launches, (unsigned long long)s.flushes,
            (unsigned long long)s.transfers_to_device, per, (unsigned long long)s.faults,
            (unsigned long long)s.pages_fetched, (unsigned long long)s.bytes_from_device,
            (unsigned long long)s.transfers_from_device, (unsigned long long)s.zero_fills,
            (unsigned long long)s.write_faults, (unsigned long long)s.fault_syncs, (unsigned long long)s.pages_dropped,
            (unsigned long long)s.prefetches);
    fflush(stderr);
}
