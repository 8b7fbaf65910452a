/* Shared bits of the xmpc conformance tests: checks that count failures on every
 * image, an error stop if any image failed, a JSON line from image 1 if all passed,
 * and a reference walk of a section (flat row-major indices) to predict results. */
#ifndef XMPC_TEST_H
#define XMPC_TEST_H

#include "umstudy/support.h"
#include "xmpc/coarray.h"

#include <stdio.h>
#include <stdlib.h>

static long g_checks, g_failures;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        ++g_checks;                                                                       \
        if (!(cond)) {                                                                    \
            if (++g_failures <= 20) {                                                     \
                fprintf(stderr, "image %d: %s:%d: check failed: %s: ", xmpc_this_image(), \
                        __FILE__, __LINE__, #cond);                                       \
                fprintf(stderr, __VA_ARGS__);                                             \
                fputc('\n', stderr);                                                      \
            }                                                                             \
        }                                                                                 \
    } while (0)

static inline void test_begin(const char *name, int *argc, char ***argv)
{
    xmpc_init(argc, argv);
    ums_json_init(name);
    ums_param_str("backend", xmpc_backend_name());
    ums_param_int("images", xmpc_num_images());
}

/* Any image's failure stops all of them with status 1; the launcher reports it.  Without
 * the sync all (sync_all 0) where an image has stopped: it would report that image. */
static inline int test_finish(int sync_all)
{
    if (g_failures) {
        fprintf(stderr, "image %d: %ld of %ld checks failed\n", xmpc_this_image(), g_failures,
                g_checks);
        xmpc_abort(UMS_EXIT_FAILED);
    }
    if (sync_all)
        xmpc_sync_all();
    if (xmpc_this_image() == 1) {
        ums_rec r;
        ums_rec_begin_status(&r, "passed");
        ums_rec_int(&r, "checks_image1", g_checks);
        ums_rec_emit(&r);
    }
    xmpc_finalize();
    return 0;
}

static inline int test_end(void) { return test_finish(1); }

/* Flat row-major indices of the elements of section r of an array of shape dims, in
 * the order the runtime pairs them; returns the count. */
static inline size_t section_indices(int nd, const long *dims, const xmpc_range *r, size_t *out)
{
    long idx[XMPC_MAX_DIMS] = {0};
    size_t n = 0;
    for (int d = 0; d < nd; ++d)
        if (r[d].length == 0)
            return 0;
    for (;;) {
        size_t flat = 0;
        for (int d = 0; d < nd; ++d)
            flat = flat * (size_t)dims[d] + (size_t)(r[d].base + idx[d] * r[d].step);
        out[n++] = flat;
        int d = nd - 1;
        while (d >= 0 && ++idx[d] == r[d].length)
            idx[d--] = 0;
        if (d < 0)
            return n;
    }
}

static inline int next_image(void) { return xmpc_this_image() % xmpc_num_images() + 1; }
static inline int prev_image(void)
{
    return (xmpc_this_image() + xmpc_num_images() - 2) % xmpc_num_images() + 1;
}

#endif
