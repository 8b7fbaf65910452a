/* dlm_get/dlm_put edge cases, one thread, with the engine from DLM_ENGINE and pages
 * small enough that the 64-page array is 4x the capacity:
 * sub-page, page-crossing and whole-array copies, copies over resident (dirty) pages,
 * strided blocks, zero sizes, ranges outside DLM, an allocation larger than the
 * memory ranks hold, and a freed-then-reallocated array reading zeros. */
#include "dlm/dlm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_fail;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                  \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            g_fail++;                                                                              \
        }                                                                                          \
    } while (0)

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; ++i)
        p[i] = (unsigned char)(seed + i * 131u + (i >> 8));
}

int main(int argc, char **argv)
{
    int st = dlm_startup(&argc, &argv);
    if (st != DLM_OK) {
        fprintf(stderr, "test_getput: %s\n", dlm_error());
        dlm_exit(st);
    }
    const dlm_config *c = dlm_get_config();
    size_t ps = c->page_size, npages = 4 * (c->capacity / ps), n = npages * ps;
    unsigned char *a = dlm_alloc(n), *ref = calloc(n, 1), *buf = malloc(n), *src = malloc(n);
    CHECK(a != NULL, "dlm_alloc(%zu): %s", n, dlm_error());
    if (!a)
        dlm_exit(1);

    /* A fresh array is zeros, remote and local views alike. */
    CHECK(dlm_get(a, buf, n) == 0, "whole get");
    CHECK(memcmp(buf, ref, n) == 0, "fresh array is not zero");

    /* Sub-page put into a remote page. */
    fill(src, 100, 1);
    CHECK(dlm_put(a + 2 * ps + 5, src, 100) == 0, "sub-page put");
    memcpy(ref + 2 * ps + 5, src, 100);
    CHECK(dlm_get(a + 2 * ps, buf, ps) == 0 && memcmp(buf, ref + 2 * ps, ps) == 0, "sub-page get after put");
    CHECK(a[2 * ps + 5] == ref[2 * ps + 5] && a[2 * ps + 104] == ref[2 * ps + 104], "direct read after put");

    /* Page-crossing, unaligned: three pages and a bit. */
    size_t off = 5 * ps - 7, len = 2 * ps + 19;
    fill(src, len, 2);
    CHECK(dlm_put(a + off, src, len) == 0, "crossing put");
    memcpy(ref + off, src, len);
    CHECK(dlm_get(a + off - 3, buf, len + 6) == 0 && memcmp(buf, ref + off - 3, len + 6) == 0, "crossing get");
    for (size_t i = off - 3; i < off + len + 3; i += 97)
        CHECK(a[i] == ref[i], "direct read of crossing put at %zu", i);

    /* Over resident, dirty pages: the local copy is the data. */
    for (size_t i = 10 * ps; i < 11 * ps; ++i)
        a[i] = ref[i] = (unsigned char)(i * 7);
    CHECK(dlm_get(a + 9 * ps + 1, buf, 3 * ps - 2) == 0 && memcmp(buf, ref + 9 * ps + 1, 3 * ps - 2) == 0,
          "get over a resident dirty page");
    fill(src, 2 * ps, 3);
    CHECK(dlm_put(a + 10 * ps + ps / 2, src, 2 * ps) == 0, "put over a resident page");
    memcpy(ref + 10 * ps + ps / 2, src, 2 * ps);
    CHECK(a[10 * ps + ps / 2] == ref[10 * ps + ps / 2] && a[12 * ps - 1] == ref[12 * ps - 1],
          "direct read after put over a resident page");
    /* Swap everything out: the puts into resident pages must survive eviction. */
    for (size_t p = npages / 2; p < npages; ++p)
        CHECK(a[p * ps] == ref[p * ps], "page %zu", p);
    CHECK(dlm_get(a, buf, n) == 0 && memcmp(buf, ref, n) == 0, "whole get after evictions");

    /* Whole array. */
    fill(src, n, 4);
    CHECK(dlm_put(a, src, n) == 0, "whole put");
    memcpy(ref, src, n);
    for (size_t i = 0; i < n; i += ps / 3)
        CHECK(a[i] == ref[i], "direct read after whole put at %zu", i);
    CHECK(dlm_get(a, buf, n) == 0 && memcmp(buf, ref, n) == 0, "whole get after whole put");

    /* Strided: 40 rows of 100 bytes, 1000 apart in DLM, packed locally. */
    fill(src, 4000, 5);
    CHECK(dlm_put_strided(a + 333, 1000, src, 100, 100, 40) == 0, "strided put");
    for (int r = 0; r < 40; ++r)
        memcpy(ref + 333 + r * 1000, src + r * 100, 100);
    memset(buf, 0, 4000);
    CHECK(dlm_get_strided(a + 333, 1000, buf, 100, 100, 40) == 0 && memcmp(buf, src, 4000) == 0, "strided get");
    CHECK(dlm_get(a, buf, n) == 0 && memcmp(buf, ref, n) == 0, "gaps of the strided put untouched");

    /* Nothing to copy, and copies outside DLM. */
    CHECK(dlm_get(a + 7, buf, 0) == 0 && dlm_put(a + 7, src, 0) == 0, "zero-size copies");
    CHECK(dlm_get(buf, src, 10) == -1 && strstr(dlm_error(), "not inside"), "get from non-DLM memory: %s",
          dlm_error());
    CHECK(dlm_put(a + (size_t)c->memory_ranks * c->mem_capacity - 4, src, 8) == -1, "put past the DLM area");

    /* More than the memory ranks hold. */
    void *huge = dlm_alloc((size_t)c->memory_ranks * c->mem_capacity);
    CHECK(huge == NULL && strstr(dlm_error(), "do not fit"), "oversized dlm_alloc: %s", dlm_error());

    /* Freed and allocated again: zeros. */
    dlm_free(a);
    unsigned char *b = dlm_alloc(n);
    CHECK(b != NULL, "dlm_alloc after free");
    memset(ref, 0, n);
    CHECK(b && dlm_get(b, buf, n) == 0 && memcmp(buf, ref, n) == 0, "reallocated array is zero");
    CHECK(b && b[3 * ps + 1] == 0, "reallocated array reads zero directly");
    dlm_free(b);

    printf("{\"bench\":\"dlm-test-getput\",\"metric\":\"failures\",\"value\":%d,\"unit\":\"count\",\"engine\":\"%s\"}\n",
           g_fail, c->engine);
    fprintf(stderr, "test_getput %s: %d failure(s)\n", c->engine, g_fail);
    free(ref);
    free(buf);
    free(src);
    dlm_exit(g_fail ? 1 : 0);
}
