/* One contiguous transfer larger than 2 GiB (2^31 + 64 bytes, past MPI's and ARMCI's
 * int counts), put and get, every byte checked.  Needs about 2 x 2 GiB per image; it
 * skips (exit 77, the reason on stderr) when MemAvailable says less is free than all
 * images need, and CTest runs it alone (RESOURCE_LOCK). */
#include "xmpc_test.h"

#include <stdint.h>
#include <string.h>

static const size_t k_bytes = ((size_t)1 << 31) + 64;

static unsigned char byte_at(size_t i, int salt)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull + (uint64_t)salt;
    return (unsigned char)(x >> 56 ^ x >> 24);
}

static long mem_available_kib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static size_t count_bad(const unsigned char *p, int salt)
{
    size_t bad = 0;
    for (size_t i = 0; i < k_bytes; ++i)
        bad += p[i] != byte_at(i, salt);
    return bad;
}

int main(int argc, char **argv)
{
    /* Asked before anything is allocated, on every image alike (one host). */
    long need_kib = (long)(2 * (k_bytes >> 10) + (256 << 10)), avail = mem_available_kib();
    test_begin("xmpc-test-big", &argc, &argv);
    const int me = xmpc_this_image(), n = xmpc_num_images();
    if (avail >= 0 && avail < need_kib * n) {
        if (me == 1)
            fprintf(stderr, "skipped: %d images need %ld MiB, MemAvailable is %ld MiB\n", n,
                    need_kib * n >> 10, avail >> 10);
        xmpc_finalize();
        return 77;
    }
    long dims[] = {(long)k_bytes};
    xmpc_coarray *a = xmpc_coarray_alloc("big", XMPC_BYTE, 1, 1, dims);
    unsigned char *mine = xmpc_coarray_data(a), *buf = malloc(k_bytes);
    if (!buf) {
        fprintf(stderr, "image %d: cannot allocate %zu bytes\n", me, k_bytes);
        xmpc_abort(UMS_EXIT_FAILED);
    }
    xmpc_range all[] = {{0, (long)k_bytes, 1}};
    xmpc_local l = {buf, 1, dims, all};
    const int target = n; /* image 1 puts to the last image, which gets it back */
    if (me == 1) {
        for (size_t i = 0; i < k_bytes; ++i)
            buf[i] = byte_at(i, 1);
        xmpc_put(a, target, all, &l);
    }
    xmpc_sync_all();
    if (me == target) {
        size_t bad = count_bad(mine, 1);
        CHECK(bad == 0, "put of %zu bytes: %zu bytes wrong at the target", k_bytes, bad);
        for (size_t i = 0; i < k_bytes; ++i)
            mine[i] = byte_at(i, 2);
    }
    xmpc_sync_all();
    if (me == 1) {
        memset(buf, 0, k_bytes);
        xmpc_get(a, target, all, &l);
        size_t bad = count_bad(buf, 2);
        CHECK(bad == 0, "get of %zu bytes: %zu bytes wrong", k_bytes, bad);
    }
    free(buf);
    xmpc_coarray_free(a);
    return test_end();
}
