/* Coarray atomics: fetch-and-add from every image onto one counter (no update lost),
 * a compare-and-swap lock that guards a plain read-modify-write of another element,
 * and a ring of atomic_define / atomic_ref spin-waits (Fortran's conforming way to
 * wait for another image), on int and long coarrays. */
#include "xmpc_test.h"

enum { ADDS = 200, LOCKED = 50, RING = 20 };

static void run(xmpc_type t)
{
    const int me = xmpc_this_image(), n = xmpc_num_images();
    const char *tn = xmpc_type_name(t);
    long dims[] = {4};
    xmpc_coarray *c = xmpc_coarray_alloc("atom", t, t == XMPC_INT ? sizeof(int) : sizeof(long), 1, dims);

    /* element 0 of image 1: a counter every image adds to */
    long seen_max = -1;
    for (int i = 0; i < ADDS; ++i) {
        long old = xmpc_atomic_fetch_add(c, 1, 0, 1);
        CHECK(old >= 0 && old < (long)n * ADDS, "%s fetch-add: old value %ld", tn, old);
        seen_max = old > seen_max ? old : seen_max;
    }
    xmpc_sync_all();
    CHECK(xmpc_atomic_ref(c, 1, 0) == (long)n * ADDS, "%s fetch-add: counter is %ld, want %ld",
          tn, xmpc_atomic_ref(c, 1, 0), (long)n * ADDS);

    /* element 1 of the last image: a CAS lock; element 2 a total updated under it by
     * atomic_ref + atomic_define (not atomic on their own: the lock makes them so) */
    for (int i = 0; i < LOCKED; ++i) {
        while (xmpc_atomic_cas(c, n, 1, 0, me) != 0)
            ;
        long v = xmpc_atomic_ref(c, n, 2);
        xmpc_atomic_define(c, n, 2, v + 3);
        CHECK(xmpc_atomic_cas(c, n, 1, me, 0) == me, "%s cas: the lock was not held by %d", tn, me);
    }
    xmpc_sync_all();
    CHECK(xmpc_atomic_ref(c, n, 2) == 3L * n * LOCKED, "%s cas lock: total %ld, want %ld", tn,
          xmpc_atomic_ref(c, n, 2), 3L * n * LOCKED);

    /* element 3: a ring; image k waits for round r from its predecessor, then passes it on */
    const int next = next_image(), prev = prev_image();
    for (long r = 1; r <= RING; ++r) {
        if (me != 1 || r > 1)
            while (xmpc_atomic_ref(c, me, 3) != (me == 1 ? r - 1 : r) * 10 + (me == 1 ? n : prev) % 10)
                ;
        xmpc_atomic_define(c, next, 3, r * 10 + me % 10);
    }
    if (me == 1)
        while (xmpc_atomic_ref(c, me, 3) != RING * 10L + n % 10)
            ;
    xmpc_sync_all();
    (void)seen_max;
    xmpc_coarray_free(c);
}

int main(int argc, char **argv)
{
    test_begin("xmpc-test-atomics", &argc, &argv);
    run(XMPC_INT);
    run(XMPC_LONG);
    return test_end();
}
