/* Synchronisation: sync memory makes a put visible (data, sync memory, flag; the
 * reader spins on the flag, then checks the data), sync images pairs images in order,
 * sync all and sync memory + barrier publish puts to every image. */
#include "xmpc_test.h"

#include <string.h>

enum { DATA = 1 << 15, ROUNDS = 5 };

static void flag_then_data(void)
{
    const int me = xmpc_this_image(), prev = prev_image(), next = next_image();
    long ddims[] = {DATA}, fdims[] = {1}, one[] = {1}, bdims[] = {DATA};
    xmpc_coarray *data = xmpc_coarray_alloc("data", XMPC_INT, sizeof(int), 1, ddims);
    xmpc_coarray *flag = xmpc_coarray_alloc("flag", XMPC_LONG, sizeof(long), 1, fdims);
    int *buf = malloc(DATA * sizeof *buf);
    volatile long *my_flag = xmpc_coarray_data(flag);
    const int *my_data = xmpc_coarray_data(data);
    int partners[] = {prev, next};
    for (long round = 1; round <= ROUNDS; ++round) {
        for (int i = 0; i < DATA; ++i)
            buf[i] = (int)round * 1000000 + me * 100000 + i % 1000;
        xmpc_range all[] = {{0, DATA, 1}}, first[] = {{0, 1, 1}};
        xmpc_local bl = {buf, 1, bdims, all}, fl = {&round, 1, one, first};
        xmpc_put(data, next, all, &bl);
        xmpc_sync_memory(); /* the data is complete at `next` before the flag is sent */
        xmpc_put(flag, next, first, &fl);
        xmpc_sync_memory();
        long spins = 0;
        while (*my_flag != round) {
            xmpc_sync_memory(); /* progress + visibility: what a coarray spin loop needs */
            ++spins;
        }
        int bad = 0;
        for (int i = 0; i < DATA; ++i)
            bad += my_data[i] != (int)round * 1000000 + prev * 100000 + i % 1000;
        CHECK(bad == 0, "round %ld: %d of %d elements from image %d not visible after its flag",
              round, bad, DATA, prev);
        /* The writer may not start the next round before this image has checked. */
        xmpc_sync_images(prev == next ? 1 : 2, partners);
    }
    free(buf);
    xmpc_coarray_free(flag);
    xmpc_coarray_free(data);
}

static void sync_images_star_and_all(void)
{
    const int me = xmpc_this_image(), n = xmpc_num_images();
    long dims[] = {n}, one[] = {1};
    xmpc_coarray *slots = xmpc_coarray_alloc("slots", XMPC_INT, sizeof(int), 1, dims);
    const int *s = xmpc_coarray_data(slots);
    for (int round = 1; round <= 3 * ROUNDS; ++round) {
        int v = round * 100 + me;
        xmpc_range mine[] = {{me - 1, 1, 1}}, first[] = {{0, 1, 1}};
        xmpc_local l = {&v, 1, one, first};
        for (int t = 1; t <= n; ++t)
            xmpc_put(slots, t, mine, &l);
        /* three ways to publish the puts to every image */
        if (round % 3 == 0)
            xmpc_sync_images(0, NULL); /* sync images(*) */
        else if (round % 3 == 1)
            xmpc_sync_all();
        else {
            xmpc_sync_memory();
            xmpc_barrier();
        }
        for (int i = 0; i < n; ++i)
            CHECK(s[i] == round * 100 + i + 1, "round %d: slot %d is %d", round, i, s[i]);
        xmpc_sync_all(); /* everyone has checked before the next round writes */
    }
    xmpc_coarray_free(slots);
}

/* The *_stat variants return the error instead of stopping every image, and leave
 * nothing half done: a rejected list synchronises with nobody. */
static void status_variants(void)
{
    const int n = xmpc_num_images(), me = xmpc_this_image();
    int st = -1, dup[] = {me, me}, bad[] = {n + 1}, ok[] = {me};
    xmpc_sync_images_stat(2, dup, &st);
    CHECK(st == XMPC_STAT_DUPLICATE_IMAGE, "duplicate list: status %d (%s)", st, xmpc_errmsg());
    CHECK(strstr(xmpc_errmsg(), "listed twice") != NULL, "duplicate list: message '%s'", xmpc_errmsg());
    xmpc_sync_images_stat(-1, ok, &st);
    CHECK(st == XMPC_STAT_BAD_COUNT, "negative count: status %d (%s)", st, xmpc_errmsg());
    xmpc_sync_images_stat(1, bad, &st);
    CHECK(st == XMPC_STAT_BAD_IMAGE, "image %d: status %d (%s)", n + 1, st, xmpc_errmsg());
    xmpc_sync_images_stat(1, ok, &st); /* with oneself: a valid list */
    CHECK(st == XMPC_STAT_OK, "sync images(me): status %d", st);
    xmpc_sync_memory_stat(&st);
    CHECK(st == XMPC_STAT_OK, "sync memory: status %d", st);
    xmpc_sync_all_stat(&st);
    CHECK(st == XMPC_STAT_OK, "sync all: status %d", st);
}

/* A put to this image's own coarray is visible to its own loads at once (Fortran's
 * program order), in place and through the temporary (overlapping) path alike. */
static void put_to_self_visible(void)
{
    const int me = xmpc_this_image();
    long dims[] = {64}, one[] = {1};
    xmpc_coarray *a = xmpc_coarray_alloc("self", XMPC_LONG, sizeof(long), 1, dims);
    long *d = xmpc_coarray_data(a);
    for (long round = 1; round <= 100; ++round) {
        long v = round * 1000 + me;
        xmpc_range at[] = {{round % 64, 1, 1}}, first[] = {{0, 1, 1}};
        xmpc_put(a, me, at, &(xmpc_local){&v, 1, one, first});
        CHECK(d[round % 64] == v, "put to self, round %ld: element is %ld, want %ld", round,
              d[round % 64], v);
        xmpc_range lo[] = {{0, 8, 1}}, hi[] = {{32, 8, 1}};
        xmpc_put(a, me, hi, &(xmpc_local){d, 1, dims, lo}); /* from the coarray itself */
        for (int i = 0; i < 8; ++i)
            CHECK(d[32 + i] == d[i], "overlapping put to self, round %ld: element %d", round, 32 + i);
    }
    xmpc_sync_all();
    xmpc_coarray_free(a);
}

int main(int argc, char **argv)
{
    test_begin("xmpc-test-sync", &argc, &argv);
    flag_then_data();
    sync_images_star_and_all();
    status_variants();
    put_to_self_visible();
    test_end();
    /* After xmpc_finalize the status variants say so instead of stopping. */
    int st = -1;
    xmpc_sync_all_stat(&st);
    if (st != XMPC_STAT_NOT_RUNNING || !strstr(xmpc_errmsg(), "after xmpc_finalize")) {
        fprintf(stderr, "sync all after finalize: status %d, message '%s'\n", st, xmpc_errmsg());
        return 1;
    }
    return 0;
}
