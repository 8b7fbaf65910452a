/* Overlapping operations: a get sees this image's earlier put to the same place
 * without a sync memory in between; puts separated by sync memory land in order;
 * transfers whose local side is the coarray's own memory on this image behave as if
 * copied through a temporary; and many images accumulating into one element lose
 * nothing (native and read-modify-write ops alike). */
#include "xmpc_test.h"

#include <string.h>

enum { N = 64, HITS = 100 };

static void put_then_get(void)
{
    long dims[] = {N};
    xmpc_coarray *a = xmpc_coarray_alloc("a", XMPC_INT, sizeof(int), 1, dims);
    int out[N], in[N];
    for (int i = 0; i < N; ++i)
        out[i] = 1000 * xmpc_this_image() + i;
    xmpc_range odd[] = {{1, N / 2, 2}};
    /* Each image owns the odd elements of its successor; no other image writes them. */
    xmpc_local lodd = {out, 1, dims, odd};
    xmpc_put(a, next_image(), odd, &lodd);
    memset(in, 0, sizeof in);
    xmpc_local liodd = {in, 1, dims, odd};
    xmpc_get(a, next_image(), odd, &liodd);
    for (int i = 1; i < N; i += 2)
        CHECK(in[i] == out[i], "get after put: element %d is %d, want %d", i, in[i], out[i]);
    xmpc_sync_all();

    /* Two puts to overlapping sections, ordered by sync memory: the second wins. */
    xmpc_range lo_half[] = {{0, N / 2 + 8, 1}}, hi_half[] = {{N / 2 - 8, N / 2 + 8, 1}};
    int second[N];
    for (int i = 0; i < N; ++i)
        second[i] = -i;
    xmpc_local lfirst = {out, 1, dims, lo_half}, lsecond = {second, 1, dims, hi_half};
    xmpc_put(a, next_image(), lo_half, &lfirst);
    xmpc_sync_memory();
    xmpc_put(a, next_image(), hi_half, &lsecond);
    xmpc_sync_all();
    const int *v = xmpc_coarray_data(a);
    for (int i = 0; i < N; ++i) {
        int want = i >= N / 2 - 8 ? -i : 1000 * prev_image() + i;
        CHECK(v[i] == want, "ordered puts: element %d is %d, want %d", i, v[i], want);
    }
    xmpc_coarray_free(a);
}

/* a[2:8]:[me] = a[0:8] and b[0:8] = a[2:8]:[me] with b aliasing a's local memory. */
static void self_overlap(void)
{
    long dims[] = {16};
    xmpc_coarray *a = xmpc_coarray_alloc("self", XMPC_LONG, sizeof(long), 1, dims);
    long *d = xmpc_coarray_data(a);
    for (int i = 0; i < 16; ++i)
        d[i] = i;
    xmpc_range dst[] = {{2, 8, 1}}, src[] = {{0, 8, 1}};
    xmpc_local l = {d, 1, dims, src};
    xmpc_put(a, xmpc_this_image(), dst, &l);
    xmpc_sync_memory();
    for (int i = 0; i < 16; ++i) {
        long want = i >= 2 && i < 10 ? i - 2 : i;
        CHECK(d[i] == want, "self put: element %d is %ld, want %ld", i, d[i], want);
    }
    for (int i = 0; i < 16; ++i)
        d[i] = i;
    xmpc_get(a, xmpc_this_image(), dst, &l); /* a[0:8] = a[2:8]:[me] */
    for (int i = 0; i < 16; ++i) {
        long want = i < 8 ? i + 2 : i;
        CHECK(d[i] == want, "self get: element %d is %ld, want %ld", i, d[i], want);
    }
    xmpc_sync_all();
    xmpc_coarray_free(a);
}

/* Every image hits element 0 of every image HITS times. */
static void contended_accumulates(void)
{
    const int n = xmpc_num_images();
    long dims[] = {4}, one[] = {1};
    xmpc_range e0[] = {{0, 1, 1}}, e1[] = {{1, 1, 1}}, e2[] = {{2, 1, 1}}, first[] = {{0, 1, 1}};
    xmpc_coarray *c = xmpc_coarray_alloc("contended", XMPC_DOUBLE, sizeof(double), 1, dims);
    double *v = xmpc_coarray_data(c);
    v[0] = 0;
    v[1] = v[2] = 1;
    xmpc_sync_all();
    double inc = 1, twice = 2, half = 0.5;
    xmpc_local linc = {&inc, 1, one, first}, ltwice = {&twice, 1, one, first},
               lhalf = {&half, 1, one, first};
    for (int k = 0; k < HITS; ++k)
        for (int t = 1; t <= n; ++t) {
            xmpc_put_acc(c, t, e0, XMPC_OP_SUM, XMPC_DOUBLE, &linc);
            xmpc_put_acc(c, t, e1, XMPC_OP_PROD, XMPC_DOUBLE, &ltwice); /* armci: lock+get+put */
            xmpc_put_acc(c, t, e2, XMPC_OP_DIV, XMPC_DOUBLE, &lhalf);   /* mpi3: lock+get+put */
        }
    xmpc_sync_all();
    double want = (double)HITS * n, pow2 = 1;
    for (int k = 0; k < HITS * n; ++k)
        pow2 *= 2;
    CHECK(v[0] == want, "contended '+': %g, want %g", v[0], want);
    CHECK(v[1] == pow2, "contended '*': %g, want %g", v[1], pow2);
    CHECK(v[2] == pow2, "contended '/': %g, want %g", v[2], pow2);
    xmpc_coarray_free(c);
}

int main(int argc, char **argv)
{
    test_begin("xmpc-test-overlap", &argc, &argv);
    put_then_get();
    self_overlap();
    contended_accumulates();
    return test_end();
}
