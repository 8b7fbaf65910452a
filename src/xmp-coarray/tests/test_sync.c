/* Synchronisation: sync memory makes a put visible (data, sync memory, flag; the
 * reader spins on the flag, then checks the data), sync images pairs images in order,
 * sync all and sync memory + barrier publish puts to every image. */
#include "xmpc_test.h"

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

int main(int argc, char **argv)
{
    test_begin("xmpc-test-sync", &argc, &argv);
    flag_then_data();
    sync_images_star_and_all();
    return test_end();
}
