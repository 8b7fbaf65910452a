/* Strided put and get in 1, 2, 3 and 7 dimensions, both sides sections, checked
 * element by element against a reference walk of both sections (and every element
 * outside them must be untouched).  Each image gets from every image and puts to
 * its successor. */
#include "xmpc_test.h"

#include <string.h>

typedef struct {
    const char *name;
    int rnd;
    long rdims[XMPC_MAX_DIMS];
    xmpc_range rr[XMPC_MAX_DIMS];
    int lnd;
    long ldims[XMPC_MAX_DIMS];
    xmpc_range lr[XMPC_MAX_DIMS];
} rma_case;

static const rma_case k_cases[] = {
    {"1d-strided", 1, {20}, {{3, 5, 3}}, 1, {10}, {{0, 5, 2}}},
    {"1d-contiguous", 1, {20}, {{2, 10, 1}}, 1, {10}, {{0, 10, 1}}},
    {"2d-both-strided", 2, {8, 10}, {{1, 3, 2}, {0, 4, 3}}, 2, {4, 6}, {{0, 3, 1}, {1, 4, 1}}},
    {"2d-rows-to-1d", 2, {8, 10}, {{2, 3, 1}, {0, 10, 1}}, 1, {30}, {{0, 30, 1}}},
    {"2d-column", 2, {8, 10}, {{0, 8, 1}, {4, 1, 1}}, 1, {8}, {{0, 8, 1}}},
    {"2d-contiguous-to-strided", 2, {8, 10}, {{0, 2, 1}, {0, 10, 1}}, 2, {5, 8}, {{0, 5, 1}, {0, 4, 2}}},
    {"3d-to-1d", 3, {6, 5, 4}, {{1, 2, 3}, {0, 3, 2}, {1, 2, 2}}, 1, {12}, {{0, 12, 1}}},
    {"3d-same-counts", 3, {6, 5, 4}, {{0, 3, 2}, {1, 2, 2}, {0, 2, 2}}, 3, {7, 3, 3},
     {{1, 3, 2}, {0, 2, 2}, {0, 2, 2}}},
    {"3d-different-shape", 3, {6, 5, 4}, {{0, 2, 1}, {1, 3, 1}, {0, 4, 1}}, 3, {3, 4, 5},
     {{0, 3, 1}, {0, 4, 1}, {1, 2, 2}}},
    {"7d", 7, {3, 3, 3, 3, 3, 3, 3}, {{0, 2, 2}, {0, 2, 2}, {0, 2, 2}, {0, 2, 2}, {0, 2, 2}, {0, 2, 2}, {0, 2, 2}},
     1, {128}, {{0, 128, 1}}},
    {"zero-length", 1, {20}, {{5, 0, 1}}, 1, {10}, {{0, 0, 1}}},
    /* Fortran's negative strides, a[9:5:-1] = a(9), a(8), ..., a(5), on either side */
    {"1d-negative-remote", 1, {20}, {{9, 5, -1}}, 1, {10}, {{0, 5, 1}}},
    {"1d-negative-local", 1, {20}, {{2, 5, 3}}, 1, {10}, {{9, 5, -2}}},
    {"1d-negative-both", 1, {20}, {{19, 6, -3}}, 1, {10}, {{8, 6, -1}}},
    {"2d-negative-rows", 2, {8, 10}, {{7, 3, -2}, {0, 10, 1}}, 1, {30}, {{0, 30, 1}}},
    {"2d-negative-mixed", 2, {8, 10}, {{1, 3, 2}, {9, 4, -3}}, 2, {4, 6}, {{3, 3, -1}, {1, 4, 1}}},
    {"3d-negative-to-different-shape", 3, {6, 5, 4}, {{5, 2, -1}, {4, 3, -1}, {3, 4, -1}}, 3,
     {3, 4, 5}, {{0, 3, 1}, {0, 4, 1}, {1, 2, 2}}},
    {"negative-length-1", 1, {20}, {{7, 1, -5}}, 1, {10}, {{3, 1, -1}}},
};

static size_t volume(int nd, const long *dims)
{
    size_t n = 1;
    for (int d = 0; d < nd; ++d)
        n *= (size_t)dims[d];
    return n;
}

static int src_value(int image, size_t flat) { return image * 100000 + (int)flat; }

static void run_case(const rma_case *c)
{
    const int me = xmpc_this_image(), n = xmpc_num_images();
    size_t rvol = volume(c->rnd, c->rdims), lvol = volume(c->lnd, c->ldims);
    size_t *ri = malloc(rvol * sizeof *ri), *li = malloc(lvol * sizeof *li);
    size_t cnt = section_indices(c->rnd, c->rdims, c->rr, ri);
    size_t lcnt = section_indices(c->lnd, c->ldims, c->lr, li);
    CHECK(cnt == lcnt, "%s: test table: %zu vs %zu elements", c->name, cnt, lcnt);
    int *buf = malloc(lvol * sizeof *buf);
    char *mark = calloc(lvol > rvol ? lvol : rvol, 1);

    /* get from every image */
    xmpc_coarray *src = xmpc_coarray_alloc("src", XMPC_INT, sizeof(int), c->rnd, c->rdims);
    int *s = xmpc_coarray_data(src);
    for (size_t f = 0; f < rvol; ++f)
        s[f] = src_value(me, f);
    xmpc_sync_all();
    for (int t = 1; t <= n; ++t) {
        for (size_t f = 0; f < lvol; ++f)
            buf[f] = -1;
        xmpc_local l = {buf, c->lnd, c->ldims, c->lr};
        xmpc_get(src, t, c->rr, &l);
        memset(mark, 0, lvol);
        for (size_t k = 0; k < cnt; ++k) {
            CHECK(buf[li[k]] == src_value(t, ri[k]), "%s: get from %d: element %zu is %d, want %d",
                  c->name, t, k, buf[li[k]], src_value(t, ri[k]));
            mark[li[k]] = 1;
        }
        for (size_t f = 0; f < lvol; ++f)
            if (!mark[f])
                CHECK(buf[f] == -1, "%s: get from %d wrote outside the local section at %zu",
                      c->name, t, f);
    }

    /* put to the successor; check what the predecessor put here */
    xmpc_coarray *dst = xmpc_coarray_alloc("dst", XMPC_INT, sizeof(int), c->rnd, c->rdims);
    for (size_t f = 0; f < lvol; ++f)
        buf[f] = 7000000 + me * 10000 + (int)f;
    xmpc_local l = {buf, c->lnd, c->ldims, c->lr};
    xmpc_put(dst, next_image(), c->rr, &l);
    for (size_t f = 0; f < lvol; ++f) /* the put is locally complete: reuse is allowed */
        buf[f] = -2;
    xmpc_sync_all();
    const int *d = xmpc_coarray_data(dst);
    memset(mark, 0, rvol);
    for (size_t k = 0; k < cnt; ++k) {
        int want = 7000000 + prev_image() * 10000 + (int)li[k];
        CHECK(d[ri[k]] == want, "%s: put from %d: element %zu is %d, want %d", c->name,
              prev_image(), k, d[ri[k]], want);
        mark[ri[k]] = 1;
    }
    for (size_t f = 0; f < rvol; ++f)
        if (!mark[f])
            CHECK(d[f] == 0, "%s: put wrote outside the coarray section at %zu", c->name, f);
    xmpc_coarray_free(dst);
    xmpc_coarray_free(src);
    free(ri);
    free(li);
    free(buf);
    free(mark);
}

/* `a[1:6:3]:[k] = x;` a scalar right-hand side fills the section. */
static void broadcast(void)
{
    long dims[] = {20}, one[] = {1};
    xmpc_range r[] = {{1, 6, 3}}, lr[] = {{0, 1, 1}};
    xmpc_coarray *a = xmpc_coarray_alloc("bcast", XMPC_DOUBLE, sizeof(double), 1, dims);
    double x = 2.5 + xmpc_this_image();
    xmpc_local l = {&x, 1, one, lr};
    xmpc_put(a, next_image(), r, &l);
    xmpc_sync_all();
    const double *v = xmpc_coarray_data(a);
    for (int i = 0; i < 20; ++i) {
        double want = (i >= 1 && i <= 16 && (i - 1) % 3 == 0) ? 2.5 + prev_image() : 0.0;
        CHECK(v[i] == want, "broadcast: element %d is %g, want %g", i, v[i], want);
    }
    xmpc_coarray_free(a);
}

int main(int argc, char **argv)
{
    test_begin("xmpc-test-strided", &argc, &argv);
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; ++i)
        run_case(&k_cases[i]);
    broadcast();
    return test_end();
}
