/* Error paths: image 1 makes the mistake named by --case while the others wait in a
 * barrier; the run must end on every image (the abort is collective) with a non-zero
 * status and a message naming the coarray, image and section.  CTest checks both. */
#include "xmpc_test.h"

#include <string.h>

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
         "int-div-zero|omni-distance"},
    };
    ums_args_parse(argc, argv, "xmpc error-path checks", args, 1);
    xmpc_coarray *a = xmpc_coarray_alloc("a", XMPC_INT, sizeof(int), 1, dims);
    const int n = xmpc_num_images();
    if (xmpc_this_image() == 1) {
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
        else if (!strcmp(which, "int-div-zero"))
            xmpc_put_acc(a, n, r4, XMPC_OP_DIV, XMPC_INT, &local); /* buf is all zeros */
        else if (!strcmp(which, "omni-distance")) /* a is 1-d: its distance is 1, not 2 */
            _XMP_coarray_rma_ARRAY(700, a, buf, 1, 0, 4, 1, 2ULL, 1, 0, 4, 1, 1ULL, (char)0,
                                   (void *)NULL, n);
    }
    xmpc_barrier(); /* where the other images wait for the abort */
    return test_end();
}
