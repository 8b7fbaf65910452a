/* The Omni entry point, called the way the translator emits it (P002 fig. 1):
 *   int a[16][16]; #pragma xmp coarray a:[2][*]
 *   b[0:4:2][3:5] = a[2:4][1:5:3]:[i][j];           -> 700
 *   a[2:4][1:5:3]:[i][j] = b[0:4:2][3:5];           -> 701
 *   b[0:4:2][3:5] += a[2:4][1:5:3]:[i][j];          -> 702
 *   a[2:4][1:5:3]:[i][j] -= b[0:4:2][3:5];          -> 703
 *   a[0:16][0:16:4]:[i][j] *= 3;                    -> 703 with an operand
 * checked against the same accesses through the native API's reference walk. */
#include "xmpc_test.h"

enum { D = 16 };

static long g_dims[] = {D, D};
static const xmpc_range k_rsec[] = {{2, 4, 1}, {1, 5, 3}}, k_lsec[] = {{0, 4, 2}, {3, 5, 1}};

static int value(int image, size_t flat) { return image * 1000 + (int)flat; }

/* Node indices of an image for codimensions [2][*]. */
static void node_of(int image, int *i, int *j)
{
    int ext = (xmpc_num_images() + 1) / 2;
    *i = (image - 1) / ext + 1;
    *j = (image - 1) % ext + 1;
}

#define RMA(code, a, b, op, operand, i, j)                                                 \
    _XMP_coarray_rma_ARRAY(code, a, b, 2, 2, 4, 1, (unsigned long long)D, 1, 5, 3, 1ULL, 2, \
                           0, 4, 2, (unsigned long long)D, 3, 5, 1, 1ULL, (char)(op),       \
                           (void *)(operand), i, j)

int main(int argc, char **argv)
{
    test_begin("xmpc-test-omni", &argc, &argv);
    const int me = xmpc_this_image(), next = next_image();
    int codims[] = {2, 0}, i, j;
    node_of(next, &i, &j);
    size_t ri[20], li[20];
    section_indices(2, g_dims, k_rsec, ri);
    section_indices(2, g_dims, k_lsec, li);

    xmpc_coarray *a = xmpc_coarray_alloc("a", XMPC_INT, sizeof(int), 2, g_dims);
    xmpc_coarray_set_codims(a, 2, codims);
    int *ad = xmpc_coarray_data(a), b[D * D];
    for (size_t f = 0; f < D * D; ++f)
        ad[f] = value(me, f);
    xmpc_sync_all();

    /* 700 get, then 702 get-accumulate onto the result */
    for (size_t f = 0; f < D * D; ++f)
        b[f] = -1;
    RMA(700, a, b, 0, NULL, i, j);
    for (size_t k = 0; k < 20; ++k)
        CHECK(b[li[k]] == value(next, ri[k]), "700: element %zu is %d", k, b[li[k]]);
    RMA(702, a, b, '+', NULL, i, j);
    for (size_t k = 0; k < 20; ++k)
        CHECK(b[li[k]] == 2 * value(next, ri[k]), "702: element %zu is %d", k, b[li[k]]);
    xmpc_sync_all();

    /* 701 put of b (= 2 * next's values) to next; 703 subtracts the original back */
    for (size_t f = 0; f < D * D; ++f)
        b[f] = (int)f;
    RMA(701, a, b, 0, NULL, i, j);
    xmpc_sync_all();
    for (size_t k = 0; k < 20; ++k)
        CHECK(ad[ri[k]] == (int)li[k], "701: element %zu is %d, want %zu", k, ad[ri[k]], li[k]);
    xmpc_sync_all();
    RMA(703, a, b, '-', NULL, i, j);
    xmpc_sync_all();
    for (size_t k = 0; k < 20; ++k)
        CHECK(ad[ri[k]] == 0, "703: element %zu is %d, want 0", k, ad[ri[k]]);

    /* 703 with a scalar operand over a[0:16][0:16:4] */
    int three = 3;
    _XMP_coarray_rma_ARRAY(703, a, NULL, 2, 0, D, 1, (unsigned long long)D, 0, D / 4, 4, 1ULL,
                           1, 0, 1, 1, 1ULL, (char)'*', (void *)&three, i, j);
    xmpc_sync_all();
    for (size_t f = 0; f < D * D; ++f) {
        int in_sec = 0, was = value(me, f);
        for (size_t k = 0; k < 20; ++k)
            in_sec |= ri[k] == f;
        if (in_sec)
            was = 0;
        int want = f % 4 == 0 ? 3 * was : was;
        CHECK(ad[f] == want, "703 scalar: element %zu is %d, want %d", f, ad[f], want);
    }
    return test_end();
}
