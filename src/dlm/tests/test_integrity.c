/* Randomised multi-threaded integrity against a shadow copy, across many evictions:
 * an array several times the compute capacity, small pages, threads that share every
 * page (element i belongs to thread i % T, so concurrent faults hit the same pages
 * while each element has one writer and the shadow stays exact).
 *   phase 1  random writes and read-checks of own elements (direct access: faults),
 *            now and then by a short-lived thread (created, faulting, gone)
 *   phase 2  dlm_put of random sub-ranges of each thread's own block, then
 *   phase 3  dlm_get of random ranges anywhere + direct reads, against the shadow
 *   phase 4  every element, directly and by one whole-array dlm_get
 * Prints {"metric":"mismatches",...}; exits 1 on any mismatch.
 *   test_integrity [--elements N] [--ops N] [--threads T] [--seed S]   (DLM_* from env) */
#include "dlm/dlm.h"
#include "umstudy/support.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

/* Short-lived threads that fault and exit while other faults are installed: a thread
 * that exits with the SIGSEGV engines' stop signal pending must not hang them. */
typedef struct {
    uint64_t *a, *shadow, rs;
    size_t first, step, count;
    long long bad;
} helper_arg;

static uint64_t xorshift(uint64_t *s);

static void *helper(void *p)
{
    helper_arg *h = p;
    for (int k = 0; k < 20; ++k) {
        size_t i = h->first + h->step * (xorshift(&h->rs) % h->count);
        if (xorshift(&h->rs) & 1)
            h->a[i] = h->shadow[i] = xorshift(&h->rs);
        else
            h->bad += h->a[i] != h->shadow[i];
    }
    return NULL;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

int main(int argc, char **argv)
{
    long long elements = 1 << 18, ops = 20000, threads = 4, seed = 12345;
    const ums_arg args[] = {
        {"elements", UMS_ARG_INT, &elements, "uint64 elements in DLM", 1, 1e10, NULL},
        {"ops", UMS_ARG_INT, &ops, "random operations per thread and phase", 1, 1e9, NULL},
        {"threads", UMS_ARG_INT, &threads, "threads", 1, 256, NULL},
        {"seed", UMS_ARG_INT, &seed, "random seed", 1, 1e18, NULL},
    };
    ums_args_parse(argc, argv, "DLM integrity test against a shadow copy", args, 4);
    ums_json_init("dlm-test-integrity");
    int st = dlm_startup(&argc, &argv);
    if (st != DLM_OK) {
        fprintf(stderr, "test_integrity: %s\n", dlm_error());
        if (st == DLM_EUNSUPPORTED)
            printf("{\"bench\":\"dlm-test-integrity\",\"status\":\"unsupported\",\"reason\":\"see stderr\"}\n");
        dlm_exit(st);
    }
    size_t n = (size_t)elements;
    uint64_t *a = dlm_alloc(n * 8), *shadow = calloc(n, 8);
    if (!a || !shadow) {
        fprintf(stderr, "test_integrity: %s\n", dlm_error());
        dlm_exit(2);
    }
    long long bad = 0;
    int T = (int)threads;
    omp_set_num_threads(T);
    double t0 = ums_now();
#pragma omp parallel reduction(+ : bad)
    {
        int t = omp_get_thread_num();
        uint64_t rs = (uint64_t)seed * 7919 + (uint64_t)t * 104729 + 1;
        size_t mine = (n - (size_t)t + (size_t)T - 1) / (size_t)T;
        /* phase 1 */
        for (long long k = 0; k < ops; ++k) {
            size_t i = (size_t)t + (size_t)T * (xorshift(&rs) % mine);
            if (xorshift(&rs) & 1) {
                uint64_t v = xorshift(&rs);
                a[i] = v;
                shadow[i] = v;
            } else if (a[i] != shadow[i]) {
                ++bad;
            }
            if (k % 500 == 499) {
                helper_arg h = {a, shadow, rs ^ (uint64_t)k, (size_t)t, (size_t)T, mine, 0};
                pthread_t th;
                if (pthread_create(&th, NULL, helper, &h) == 0) {
                    pthread_join(th, NULL);
                    bad += h.bad;
                }
            }
        }
#pragma omp barrier
        /* phase 2: own contiguous block */
        size_t lo = n * (size_t)t / (size_t)T, hi = n * (size_t)(t + 1) / (size_t)T;
        uint64_t *buf = malloc(sizeof(uint64_t) * (hi - lo + 1));
        for (long long k = 0; k < ops / 16 + 1 && hi > lo; ++k) {
            size_t s = lo + xorshift(&rs) % (hi - lo), len = 1 + xorshift(&rs) % (hi - s);
            for (size_t j = 0; j < len; ++j)
                buf[j] = xorshift(&rs);
            if (dlm_put(a + s, buf, len * 8) != 0)
                ++bad;
            memcpy(shadow + s, buf, len * 8);
        }
#pragma omp barrier
        /* phase 3: any range */
        for (long long k = 0; k < ops / 16 + 1; ++k) {
            size_t s = xorshift(&rs) % n, len = 1 + xorshift(&rs) % (n - s);
            if (len > hi - lo + 1)
                len = hi - lo + 1;
            if (dlm_get(a + s, buf, len * 8) != 0)
                ++bad;
            for (size_t j = 0; j < len; ++j)
                bad += buf[j] != shadow[s + j];
            size_t i = xorshift(&rs) % n;
            bad += a[i] != shadow[i];
        }
        free(buf);
#pragma omp barrier
        /* phase 4 */
#pragma omp for
        for (size_t i = 0; i < n; ++i)
            bad += a[i] != shadow[i];
    }
    uint64_t *all = malloc(n * 8);
    if (dlm_get(a, all, n * 8) != 0)
        ++bad;
    for (size_t i = 0; i < n; ++i)
        bad += all[i] != shadow[i];
    double secs = ums_now() - t0;
    dlm_stats s;
    dlm_stats_get(&s);
    ums_rec r;
    ums_rec_begin(&r, "mismatches", (double)bad, "count");
    ums_rec_str(&r, "engine", dlm_get_config()->engine);
    ums_rec_int(&r, "threads", T);
    ums_rec_int(&r, "uffd_user_mode_only", dlm_get_config()->uffd_user_mode_only);
    ums_rec_int(&r, "faults", (long long)s.faults);
    ums_rec_int(&r, "evictions", (long long)s.evictions);
    ums_rec_int(&r, "writebacks", (long long)s.writebacks);
    ums_rec_num(&r, "seconds", secs);
    ums_rec_emit(&r);
    fprintf(stderr, "test_integrity %s: %lld mismatches, %llu faults, %llu evictions, %llu write-backs, %.2f s\n",
            dlm_get_config()->engine, bad, (unsigned long long)s.faults, (unsigned long long)s.evictions,
            (unsigned long long)s.writebacks, secs);
    if (s.evictions < 10) {
        fprintf(stderr, "test_integrity: too few evictions (%llu) to test anything: raise --elements\n",
                (unsigned long long)s.evictions);
        bad++;
    }
    free(all);
    free(shadow);
    dlm_free(a);
    dlm_exit(bad ? 1 : 0);
}
