/* Error paths: image 1 makes the mistake named by --case while the others wait in a
 * barrier; the run must end on every image (the abort is collective) with a non-zero
 * status and a message naming the coarray, image and section.  CTest checks both.
 * Some mistakes are collective (a shape that differs between images) or come after
 * xmpc_finalize (then each image stops on its own: there is nothing left to abort). */
#include "xmpc_test.h"

#include <limits.h>
#include <string.h>

/* The cases every image takes part in; 1 when `which` was one of them. */
static int collective_case(const char *which, xmpc_coarray *a, const xmpc_range *r4,
                           const xmpc_local *local)
{
    const int me = xmpc_this_image(), n = xmpc_num_images();
    if (!strcmp(which, "overflow-2d")) { /* 2^32 x 2^32 elements: a count that wraps to 0 */
        const long h32 = 1L << 32;
        long d2[] = {4, 4};
        int junk[16] = {0};
        xmpc_range wrap2[] = {{0, h32, h32 + 1}, {0, h32, h32 + 1}};
        xmpc_coarray *b = xmpc_coarray_alloc("b2", XMPC_INT, sizeof(int), 2, d2);
        if (me == 1)
            xmpc_put(b, n, wrap2, &(xmpc_local){junk, 2, d2, wrap2});
    } else if (!strcmp(which, "atomic-type")) {
        long one[] = {1};
        xmpc_coarray *f = xmpc_coarray_alloc("f", XMPC_DOUBLE, sizeof(double), 1, one);
        if (me == 1)
            xmpc_atomic_define(f, n, 0, 1);
    } else if (!strcmp(which, "shape-mismatch")) { /* image 1 declares b[10], the others b[12] */
        long bd[] = {me == 1 ? 10 : 12};
        xmpc_coarray_alloc("b", XMPC_INT, sizeof(int), 1, bd);
    } else if (!strcmp(which, "use-after-free")) {
        xmpc_coarray_free(a);
        if (me == 1)
            xmpc_put(a, n, r4, local);
    } else if (!strcmp(which, "put-after-finalize")) {
        xmpc_finalize();
        if (me == 1)
            xmpc_put(a, n, r4, local);
        exit(0);
    } else if (!strcmp(which, "double-finalize")) {
        xmpc_finalize();
        xmpc_finalize();
        exit(0);
    } else if (!strcmp(which, "init-after-finalize")) {
        xmpc_finalize();
        xmpc_init(NULL, NULL);
        exit(0);
    } else if (!strcmp(which, "int-div-overflow") || !strcmp(which, "int-div-overflow-get")) {
        /* a[] = INT_MIN everywhere; image 1 divides image n's a[] by -1 (put-acc: found
         * where the dividend is, under the accumulate lock), or its own INT_MIN local
         * values by image n's a[] = -1 (get-acc). */
        int *d = xmpc_coarray_data(a);
        int get = !strcmp(which, "int-div-overflow-get");
        for (int i = 0; i < 10; ++i)
            d[i] = get ? -1 : INT_MIN;
        int v[4] = {get ? INT_MIN : -1, get ? INT_MIN : -1, get ? INT_MIN : -1, get ? INT_MIN : -1};
        xmpc_local lv = *local;
        lv.addr = v;
        xmpc_sync_all();
        if (me == 1) {
            if (get)
                xmpc_get_acc(a, n, r4, XMPC_OP_DIV, XMPC_INT, &lv);
            else
                xmpc_put_acc(a, n, r4, XMPC_OP_DIV, XMPC_INT, &lv);
        }
    } else
        return 0;
    return 1;
}

int main(int argc, char **argv)
{
    long dims[] = {10}, ldims[] = {4};
    int buf[10] = {0};
    xmpc_range r5[] = {{0, 5, 3}}, r4[] = {{0, 4, 1}}, r3[] = {{0, 3, 1}}, l4[] = {{0, 4, 1}},
               l4far[] = {{1, 4, 1}};
    xmpc_local local = {buf, 1, ldims, l4}, local_far = {buf, 1, ldims, l4far},
               local3 = {buf, 1, ldims, r3};
    /* Looked for before xmpc_init, which is the point of this case; every other
     * argument is parsed after it (launchers may pass arguments gasnet_init eats). */
    for (int i = 1; i < argc; ++i)
        if (strstr(argv[i], "before-init")) {
            xmpc_coarray *none = NULL;
            xmpc_get(none, 1, r4, &local);
            return 0;
        }
    test_begin("xmpc-test-errors", &argc, &argv);
    const char *which = "none";
    const ums_arg args[] = {
        {"case", UMS_ARG_CHOICE, &which, "the mistake to make", 0, -1,
         "none|before-init|oob-remote|oob-local|bad-image|type-mismatch|bad-op|count-mismatch|"
         "int-div-zero|omni-distance|overflow-stride|overflow-stride-base|overflow-local|"
         "overflow-2d|zero-stride|zero-stride-local|int-div-overflow|int-div-overflow-get|"
         "sync-duplicate|sync-negative|empty-count-mismatch|sync-null-count|put-after-finalize|"
         "double-finalize|init-after-finalize|"
         "use-after-free|data-null|bad-handle|null-local|shape-mismatch|atomic-type|"
         "atomic-index"},
    };
    ums_args_parse(argc, argv, "xmpc error-path checks", args, 1);
    xmpc_coarray *a = xmpc_coarray_alloc("a", XMPC_INT, sizeof(int), 1, dims);
    const int n = xmpc_num_images();
    /* 2^62+4: (3-1)*step wraps a 64-bit index to 8, inside a[10]. */
    const long huge = (1L << 62) + 4;
    xmpc_range ovf[] = {{0, 3, huge}}, ovf_base[] = {{1000, 3, huge}}, zero[] = {{0, 4, 0}};

    if (collective_case(which, a, r4, &local)) {
    } else if (xmpc_this_image() == 1) {
        if (!strcmp(which, "oob-remote")) /* a[0:5:3] reaches a[12] of a[10] */
            xmpc_put(a, n, r5, &(xmpc_local){buf, 1, dims, r5});
        else if (!strcmp(which, "oob-local")) /* b[1:4] of b[4] */
            xmpc_get(a, n, r4, &local_far);
        else if (!strcmp(which, "bad-image"))
            xmpc_get(a, n + 1, r4, &local);
        else if (!strcmp(which, "type-mismatch"))
            xmpc_put_acc(a, n, r4, XMPC_OP_SUM, XMPC_DOUBLE, &local);
        else if (!strcmp(which, "bad-op"))
            xmpc_put_acc(a, n, r4, (xmpc_op)'%', XMPC_INT, &local);
        else if (!strcmp(which, "count-mismatch"))
            xmpc_get(a, n, r4, &local3);
        else if (!strcmp(which, "empty-count-mismatch")) { /* a[0:0]:[n] = l[0:4] */
            xmpc_range empty[] = {{0, 0, 1}};
            xmpc_put(a, n, empty, &local);
        } else if (!strcmp(which, "sync-null-count"))
            xmpc_sync_images(1, NULL);
        else if (!strcmp(which, "int-div-zero"))
            xmpc_put_acc(a, n, r4, XMPC_OP_DIV, XMPC_INT, &local); /* buf is all zeros */
        else if (!strcmp(which, "omni-distance")) /* a is 1-d: its distance is 1, not 2 */
            _XMP_coarray_rma_ARRAY(700, a, buf, 1, 0, 4, 1, 2ULL, 1, 0, 4, 1, 1ULL, (char)0,
                                   (void *)NULL, n);
        else if (!strcmp(which, "overflow-stride")) /* would write a[0], a[4], a[8] */
            xmpc_put(a, n, ovf, &(xmpc_local){buf, 1, ldims, r3});
        else if (!strcmp(which, "overflow-stride-base"))
            xmpc_put(a, n, ovf_base, &(xmpc_local){buf, 1, ldims, r3});
        else if (!strcmp(which, "overflow-local")) /* would write far past b[4] */
            xmpc_get(a, n, r3, &(xmpc_local){buf, 1, ldims, ovf});
        else if (!strcmp(which, "zero-stride"))
            xmpc_put(a, n, zero, &local);
        else if (!strcmp(which, "zero-stride-local"))
            xmpc_get(a, n, r4, &(xmpc_local){buf, 1, ldims, zero});
        else if (!strcmp(which, "sync-duplicate")) {
            int list[] = {n, n};
            xmpc_sync_images(2, list);
        } else if (!strcmp(which, "sync-negative")) {
            int list[] = {n};
            xmpc_sync_images(-1, list);
        } else if (!strcmp(which, "data-null"))
            xmpc_coarray_data(NULL);
        else if (!strcmp(which, "bad-handle")) {
            long fake[64] = {0}; /* looks like nothing the runtime handed out */
            xmpc_put((xmpc_coarray *)fake, n, r4, &local);
        } else if (!strcmp(which, "null-local"))
            xmpc_put(a, n, r4, NULL);
        else if (!strcmp(which, "atomic-index"))
            xmpc_atomic_fetch_add(a, n, 10, 1);
    }
    xmpc_barrier(); /* where the other images wait for the abort */
    return test_end();
}
