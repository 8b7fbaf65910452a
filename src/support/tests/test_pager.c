/* Unit test of the pager (umstudy/pager.h) with one engine (argv[1]: segv | uffd):
 * first touches fetch each page once, writes are tracked page by page (across a page
 * boundary too), dropped pages fault again, concurrent first touches of one page fetch
 * it once, and a SIGSEGV outside every region reaches the handler installed before.
 * Exits 77 with the reason where the engine is not permitted (userfaultfd). */
#define _GNU_SOURCE
#include "umstudy/pager.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "expect.h"

enum { PAGES = 16, ABSENT = 0, CLEAN, DIRTY };
static size_t g_ps;
static int g_state[PAGES], g_other_state[PAGES]; /* the test's two regions */
static _Atomic int g_fetches, g_upgrades;
static int g_generation;
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static char *g_src; /* one page: the "remote" copy being installed */

static unsigned char pattern(size_t page, size_t i) { return (unsigned char)(page * 7 + i + g_generation * 13); }

static void fault(ums_pager *pg, void *ctx, size_t page, int flags, int worker)
{
    (void)worker;
    int *state = ctx;
    pthread_mutex_lock(&g_mutex);
    if (state[page] == ABSENT) {
        for (size_t i = 0; i < g_ps; ++i)
            g_src[i] = (char)pattern(page, i);
        /* Counted first: under uffd the install wakes the toucher, who may look at once. */
        state[page] = CLEAN;
        atomic_fetch_add(&g_fetches, 1);
        if (ums_pager_install(pg, page, 1, g_src, UMS_PAGER_RO) != 0) {
            fprintf(stderr, "install of page %zu: %s\n", page, strerror(errno));
            abort();
        }
    } else if (state[page] == CLEAN &&
               (flags & UMS_PAGER_WP || (ums_pager_engine_of(pg) == UMS_PAGER_SEGV && !(flags & UMS_PAGER_READ)))) {
        /* A write to a present, read-only page: its first. */
        state[page] = DIRTY;
        atomic_fetch_add(&g_upgrades, 1);
        if (ums_pager_protect(pg, page, 1, UMS_PAGER_RW) != 0)
            abort();
    } else {
        ums_pager_wake(pg, page, 1); /* installed meanwhile by another worker */
    }
    pthread_mutex_unlock(&g_mutex);
}

static void drop_all(ums_pager *pg)
{
    pthread_mutex_lock(&g_mutex);
    EXPECT(ums_pager_drop(pg, 0, PAGES) == 0);
    memset(g_state, 0, sizeof g_state);
    g_generation++;
    pthread_mutex_unlock(&g_mutex);
}

static int check_page(const char *base, size_t page)
{
    for (size_t i = 0; i < g_ps; ++i)
        if ((unsigned char)base[page * g_ps + i] != pattern(page, i))
            return 0;
    return 1;
}

static char *g_base;
static _Atomic int g_bad;
static void *reader(void *arg)
{
    (void)arg;
    for (size_t p = 0; p < PAGES; ++p)
        if (!check_page(g_base, p))
            atomic_fetch_add(&g_bad, 1);
    return NULL;
}

static sigjmp_buf g_jump;
static volatile sig_atomic_t g_foreign;
static void foreign_handler(int sig)
{
    (void)sig;
    g_foreign = 1;
    siglongjmp(g_jump, 1);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "segv") && strcmp(argv[1], "uffd"))) {
        fprintf(stderr, "usage: %s segv|uffd\n", argv[0]);
        return 2;
    }
    ums_pager_engine engine = strcmp(argv[1], "uffd") == 0 ? UMS_PAGER_UFFD : UMS_PAGER_SEGV;
    char why[400];
    if (engine == UMS_PAGER_UFFD && ums_pager_uffd_probe(1, why, sizeof why) != 0) {
        printf("skip: %s\n", why);
        return 77;
    }
    /* The program's own SIGSEGV handler, installed before the pager's. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = foreign_handler;
    sa.sa_flags = SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);

    g_ps = 2 * (size_t)sysconf(_SC_PAGESIZE);
    g_src = malloc(g_ps);
    ums_pager_config bad = {.bytes = 4096, .page_size = 1000, .engine = engine, .workers = 2, .fault = fault};
    ums_pager *pg = NULL;
    EXPECT(ums_pager_create(&bad, &pg, why, sizeof why) == -1 && errno == EINVAL && pg == NULL);

    ums_pager_config c = {.bytes = PAGES * g_ps, .page_size = g_ps, .engine = engine, .track_writes = 1,
                          .workers = 3, .fault = fault, .ctx = g_state, .name = "pager-test"};
    if (ums_pager_create(&c, &pg, why, sizeof why) != 0) {
        fprintf(stderr, "FAIL: create: %s\n", why);
        return 1;
    }
    char *base = g_base = ums_pager_base(pg);
    EXPECT(ums_pager_pages(pg) == PAGES && ums_pager_page_size(pg) == g_ps);
    EXPECT((engine == UMS_PAGER_SEGV) == (ums_pager_alias(pg) != NULL));

    /* First touches: each page fetched once, read-only, clean. */
    int ok = 1;
    for (size_t p = 0; p < PAGES; ++p)
        ok &= check_page(base, p);
    EXPECT(ok);
    for (size_t p = 0; p < PAGES; ++p)
        ok &= check_page(base, p);
    EXPECT(ok && g_fetches == PAGES && g_upgrades == 0);

    /* Writes: tracked page by page, one straddling the boundary of pages 9 and 10. */
    base[3 * g_ps + 5] = 'x';
    base[7 * g_ps] = 'y';
    base[7 * g_ps + 1] = 'z';
    memcpy(base + 10 * g_ps - 4, "boundary", 8);
    EXPECT(g_upgrades == 4);
    for (size_t p = 0; p < PAGES; ++p)
        EXPECT((g_state[p] == DIRTY) == (p == 3 || p == 7 || p == 9 || p == 10));
    EXPECT(base[3 * g_ps + 5] == 'x' && base[7 * g_ps + 1] == 'z' && memcmp(base + 10 * g_ps - 4, "boundary", 8) == 0);
    EXPECT(g_fetches == PAGES);

    /* Dropped pages fault again and see the new contents. */
    drop_all(pg);
    ok = 1;
    for (size_t p = 0; p < PAGES; ++p)
        ok &= check_page(base, p);
    EXPECT(ok && g_fetches == 2 * PAGES);

    /* A write to an absent page: fetched, then upgraded, the write kept. */
    drop_all(pg);
    base[5 * g_ps + 1] = 'w';
    EXPECT(base[5 * g_ps + 1] == 'w' && g_state[5] == DIRTY && base[5 * g_ps] == (char)pattern(5, 0));

    /* Concurrent first touches: each page fetched once however many threads touch it. */
    drop_all(pg);
    int before = g_fetches;
    pthread_t t[4];
    for (int i = 0; i < 4; ++i)
        pthread_create(&t[i], NULL, reader, NULL);
    for (int i = 0; i < 4; ++i)
        pthread_join(t[i], NULL);
    EXPECT(g_bad == 0 && g_fetches - before == PAGES);
#if defined(__x86_64__)
    EXPECT(g_upgrades == 5); /* a read racing with an install is told from a write */
#endif

    /* A SIGSEGV outside the region goes to the handler that was there before. */
    char *other = mmap(NULL, g_ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sigsetjmp(g_jump, 1) == 0)
        *(volatile char *)other = 1;
    EXPECT(g_foreign == 1);
    munmap(other, g_ps);

    /* A region at a given address: there, or not at all; served beside the first (one
     * handler, or one userfaultfd and its workers, for both). */
    char *spot = mmap(NULL, 4 * g_ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ums_pager_config at = c;
    at.bytes = 4 * g_ps;
    at.addr = spot;
    at.ctx = g_other_state;
    ums_pager *taken = NULL, *placed = NULL;
    EXPECT(ums_pager_create(&at, &taken, why, sizeof why) == -1 && errno == EEXIST && !taken);
    munmap(spot, 4 * g_ps);
    EXPECT(ums_pager_create(&at, &placed, why, sizeof why) == 0 && ums_pager_base(placed) == spot);
    before = g_fetches;
    EXPECT(placed && check_page(spot, 2) && check_page(base, 2) && g_fetches - before == 1);
    spot[g_ps] = 1;
    EXPECT(g_other_state[1] == DIRTY && g_state[1] == CLEAN);
    ums_pager_destroy(placed);
    EXPECT(check_page(base, 3)); /* the first region still served */

    ums_pager_destroy(pg);
    struct sigaction now;
    sigaction(SIGSEGV, NULL, &now);
    EXPECT(now.sa_handler == foreign_handler); /* the last region gone: the handler restored */

    printf("pager %s: %s (fetches %d, write upgrades %d)\n", argv[1], fails ? "FAILED" : "ok", (int)g_fetches,
           (int)g_upgrades);
    return fails ? 1 : 0;
}
