/* cab-pingpong: P002 §4.1 ping-pong between images 1 and 2 (any further images only
 * join the barriers), as the translator emits figs. 2 and 3:
 *
 *   put (fig. 2)                                   get (fig. 3)
 *   if (me == 1) {                                 if (me == 1) {
 *     rmt_buf[0:size]:[dest] = loc_buf[0:size];      loc_buf[0:size] = rmt_buf[0:size]:[dest];
 *     #pragma xmp sync_memory                        #pragma xmp barrier
 *     while (rmt_buf[size-1] != '0')               } else {
 *       #pragma xmp sync_memory                      #pragma xmp barrier
 *     rmt_buf[size-1] = '1';                         loc_buf[0:size] = rmt_buf[0:size]:[dest];
 *   } else { the same, wait first }                }
 *                                                  #pragma xmp barrier
 *
 * --raw adds the same two protocols written directly in MPI-3 RMA (MPI_Put + flush +
 * polling the flag byte with MPI_Win_sync; MPI_Get + flush + MPI_Barrier), the
 * baseline the coarray layer is measured against (mpi3/armci backends only).
 *
 * Reported per op and size: half round-trip latency = time / (2 LOOP) in µs (for get
 * it includes the barriers, as in the paper) and bandwidth = size / latency in MB/s
 * (10^6 bytes/s); the best of --trials runs of LOOP iterations, after a short warm-up.
 * The payload carries a pattern whose last byte is the flag; after each size the
 * receiving image checks every byte. */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "cab_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef CAB_HAVE_MPI
#include <mpi.h>
#endif

enum { OP_PUT, OP_GET, OP_RAW_PUT, OP_RAW_GET, N_OPS };
static const char *const k_op_name[N_OPS] = {"put", "get", "raw-put", "raw-get"};

static long long g_loop = 1000, g_trials = 1;
static int g_me;
static char *g_loc;              /* loc_buf: a plain local array */
static xmpc_coarray *g_rmt;      /* rmt_buf: char rmt_buf[MAX]:[*] */
static volatile char *g_rmt_mem; /* this image's rmt_buf, polled */
#ifdef CAB_HAVE_MPI
static MPI_Win g_win; /* the raw baseline's buffer */
static volatile char *g_win_mem;
#endif

static char pattern(size_t i, size_t size) { return i + 1 == size ? '0' : (char)('a' + i % 26); }

/* ---- coarray ping-pong --------------------------------------------------------------- */

static void put_pingpong(size_t size, long long loop)
{
    const int dest = 3 - g_me;
    for (long long i = 0; i < loop; ++i) {
        if (g_me == 1) {
            /* rmt_buf[0:size]:[dest] = loc_buf[0:size]; */
            CAB_RMA1(XMPC_RMA_PUT, g_rmt, g_loc, 0, size, 0, 0, dest);
            xmpc_sync_memory();
            while (g_rmt_mem[size - 1] != '0')
                xmpc_sync_memory();
            g_rmt_mem[size - 1] = '1';
        } else if (g_me == 2) {
            while (g_rmt_mem[size - 1] != '0')
                xmpc_sync_memory();
            g_rmt_mem[size - 1] = '1';
            CAB_RMA1(XMPC_RMA_PUT, g_rmt, g_loc, 0, size, 0, 0, dest);
            xmpc_sync_memory();
        }
    }
}

static void get_pingpong(size_t size, long long loop)
{
    const int dest = 3 - g_me;
    for (long long i = 0; i < loop; ++i) {
        if (g_me == 1) {
            /* loc_buf[0:size] = rmt_buf[0:size]:[dest]; */
            CAB_RMA1(XMPC_RMA_GET, g_rmt, g_loc, 0, size, 0, 0, dest);
            xmpc_barrier();
        } else {
            xmpc_barrier();
            if (g_me == 2)
                CAB_RMA1(XMPC_RMA_GET, g_rmt, g_loc, 0, size, 0, 0, dest);
        }
        xmpc_barrier();
    }
}

/* ---- the same protocols in MPI-3 RMA ------------------------------------------------------ */
#ifdef CAB_HAVE_MPI
static void raw_wait_flag(size_t size)
{
    while (g_win_mem[size - 1] != '0')
        MPI_Win_sync(g_win); /* the target's view of its window memory catches up */
}

static void raw_put_pingpong(size_t size, long long loop)
{
    const int dest = 2 - g_me; /* rank of the other image */
    for (long long i = 0; i < loop; ++i) {
        if (g_me == 1) {
            MPI_Put(g_loc, (int)size, MPI_BYTE, dest, 0, (int)size, MPI_BYTE, g_win);
            MPI_Win_flush(dest, g_win);
            raw_wait_flag(size);
            g_win_mem[size - 1] = '1';
        } else if (g_me == 2) {
            raw_wait_flag(size);
            g_win_mem[size - 1] = '1';
            MPI_Put(g_loc, (int)size, MPI_BYTE, dest, 0, (int)size, MPI_BYTE, g_win);
            MPI_Win_flush(dest, g_win);
        }
    }
}

static void raw_get_pingpong(size_t size, long long loop)
{
    const int dest = 2 - g_me;
    for (long long i = 0; i < loop; ++i) {
        if (g_me == 1) {
            MPI_Get(g_loc, (int)size, MPI_BYTE, dest, 0, (int)size, MPI_BYTE, g_win);
            MPI_Win_flush(dest, g_win);
            MPI_Barrier(MPI_COMM_WORLD);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
            if (g_me == 2) {
                MPI_Get(g_loc, (int)size, MPI_BYTE, dest, 0, (int)size, MPI_BYTE, g_win);
                MPI_Win_flush(dest, g_win);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
}
#endif

/* ---- one (op, size) measurement ---------------------------------------------------------- */

static void run_op(int op, size_t size, long long loop)
{
    switch (op) {
    case OP_PUT: put_pingpong(size, loop); break;
    case OP_GET: get_pingpong(size, loop); break;
#ifdef CAB_HAVE_MPI
    case OP_RAW_PUT: raw_put_pingpong(size, loop); break;
    case OP_RAW_GET: raw_get_pingpong(size, loop); break;
#endif
    default: break;
    }
}

/* sync all, or its MPI form for the raw ops (window sync + barrier). */
static void sync_all_any(int op)
{
#ifdef CAB_HAVE_MPI
    if (op == OP_RAW_PUT || op == OP_RAW_GET) {
        MPI_Win_sync(g_win);
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
#endif
    (void)op;
    xmpc_sync_all();
}

/* Put ops: the receiver's buffer starts as '1' (so the flag is down), the sender's
 * payload is the pattern.  Get ops: the remote buffer holds the pattern, the local one
 * zeros. */
static void prepare(int op, size_t size)
{
    int put = op == OP_PUT || op == OP_RAW_PUT;
    volatile char *buf = g_rmt_mem;
#ifdef CAB_HAVE_MPI
    if (op == OP_RAW_PUT || op == OP_RAW_GET)
        buf = g_win_mem;
#endif
    for (size_t i = 0; i < size; ++i) {
        buf[i] = put ? '1' : pattern(i, size);
        g_loc[i] = put ? pattern(i, size) : 0;
    }
    sync_all_any(op);
}

/* 1 when this image holds the right bytes after the last round (images past 2: 1). */
static int check(int op, size_t size)
{
    if (g_me > 2)
        return 1;
    int raw = op == OP_RAW_PUT || op == OP_RAW_GET, put = op == OP_PUT || op == OP_RAW_PUT;
    const volatile char *got = put ? g_rmt_mem : (const volatile char *)g_loc;
#ifdef CAB_HAVE_MPI
    if (raw && put)
        got = g_win_mem;
#endif
    (void)raw;
    /* After the last round the receiver has reset its flag byte to '1'. */
    size_t n = put ? size - 1 : size;
    for (size_t i = 0; i < n; ++i)
        if (got[i] != pattern(i, size)) {
            fprintf(stderr, "cab-pingpong: image %d: %s of %zu bytes: byte %zu is 0x%02x, want 0x%02x\n",
                    g_me, k_op_name[op], size, i, (unsigned char)got[i],
                    (unsigned char)pattern(i, size));
            return 0;
        }
    return 1;
}

/* Returns the best half round-trip time in seconds; *ok: every image's check passed. */
static double measure(int op, size_t size, int *ok)
{
    prepare(op, size);
    run_op(op, size, g_loop < 10 ? g_loop : 10); /* warm-up: connections, page faults */
    sync_all_any(op);
    double best = 1e300;
    for (long long t = 0; t < g_trials; ++t) {
        sync_all_any(op);
        double t0 = ums_now();
        run_op(op, size, g_loop);
        double dt = ums_now() - t0;
        if (dt < best)
            best = dt;
    }
    sync_all_any(op);
    double bad = !check(op, size);
    cab_allreduce_sum(&bad, 1);
    /* Image 1's clock: it starts and ends every round trip. */
    double half = best / (2.0 * (double)g_loop);
    cab_allreduce_max(&half, 1); /* image 2's clock is not used: make them agree */
    cab_allreduce_free(); /* the timed loops see rmt_buf only, as the paper's program */
    *ok = bad == 0;
    return half;
}

int main(int argc, char **argv)
{
    size_t min = 1, max = 4u << 20;
    const char *ops = "put,get";
    int raw = 0;
    const ums_arg args[] = {
        {"loop", UMS_ARG_INT, &g_loop, "round trips per size (LOOP; default 1000)", 1, 1e9, NULL},
        {"min", UMS_ARG_SIZE, &min, "smallest message, a power of two (default 1)", 1, 1 << 30, NULL},
        {"max", UMS_ARG_SIZE, &max, "largest message, a power of two (default 4M)", 1, 1 << 30, NULL},
        {"ops", UMS_ARG_STRING, &ops, "comma-separated coarray ops: put,get (default both)", 0, -1, NULL},
        {"raw", UMS_ARG_FLAG, &raw, "also run the same protocols in raw MPI-3 RMA (baseline)", 0, -1, NULL},
        {"trials", UMS_ARG_INT, &g_trials, "timed runs per size, the best is reported (default 1)", 1, 1000, NULL},
    };
    ums_args_parse(argc, argv,
                   "P002 ping-pong: coarray put (busy-wait + sync memory) and get (barriers) "
                   "between images 1 and 2; JSON lines on stdout.",
                   args, sizeof args / sizeof args[0]);
    /* Input checks that need no image count: before the runtime starts. */
    ums_json_init("cab-pingpong");
    if (!cab_is_pow2((long)min) || !cab_is_pow2((long)max))
        ums_usage_fail("--min %zu and --max %zu must be powers of two", min, max);
    if (min > max)
        ums_usage_fail("--min %zu is larger than --max %zu", min, max);
    int want[N_OPS] = {0}, nwant = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", ops);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "put") == 0)
            want[OP_PUT] = 1;
        else if (strcmp(tok, "get") == 0)
            want[OP_GET] = 1;
        else
            ums_usage_fail("--ops: unknown op '%s' (put|get)", tok);
        ++nwant;
    }
    if (!nwant)
        ums_usage_fail("--ops: no op given (put,get)");

    cab_start("cab-pingpong", &argc, &argv);
    g_me = xmpc_this_image();
    if (xmpc_num_images() < 2)
        cab_usage_fail("ping-pong needs at least 2 images, got %d", xmpc_num_images());
    ums_param_int("loop", g_loop);
    ums_param_int("trials", g_trials);

    long dims[] = {(long)max};
    g_rmt = xmpc_coarray_alloc("rmt_buf", XMPC_BYTE, 1, 1, dims);
    g_rmt_mem = xmpc_coarray_data(g_rmt);
    g_loc = calloc(max, 1);
    if (!g_loc)
        cab_usage_fail("cannot allocate %zu bytes", max);

    if (raw) {
        if (cab_mpi_usable()) {
#ifdef CAB_HAVE_MPI
            char *mem;
            MPI_Win_allocate((MPI_Aint)max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &g_win);
            g_win_mem = mem;
            MPI_Win_lock_all(MPI_MODE_NOCHECK, g_win);
            want[OP_RAW_PUT] = want[OP_PUT];
            want[OP_RAW_GET] = want[OP_GET];
#endif
        } else if (g_me == 1) {
            ums_rec r;
            ums_rec_begin_status(&r, "skipped");
            ums_rec_str(&r, "reason", "--raw needs MPI-3 RMA: backend is not mpi3/armci or no MPI built");
            ums_rec_emit(&r);
        }
    }

    double lat8[N_OPS] = {0}, bw4m[N_OPS] = {0}; /* 8-byte latency, 4 MB bandwidth */
    int all_ok = 1;
    for (int op = 0; op < N_OPS; ++op) {
        if (!want[op])
            continue;
        for (size_t size = min; size <= max; size *= 2) {
            int ok;
            double half = measure(op, size, &ok);
            all_ok &= ok;
            double us = half * 1e6, mbps = (double)size / half / 1e6;
            if (size == 8)
                lat8[op] = us;
            if (size == (4u << 20))
                bw4m[op] = mbps;
            if (g_me == 1) {
                ums_rec r;
                ums_rec_begin(&r, "latency", us, "us");
                ums_rec_str(&r, "op", k_op_name[op]);
                ums_rec_int(&r, "bytes", (long long)size);
                ums_rec_bool(&r, "verified", ok);
                ums_rec_emit(&r);
                ums_rec_begin(&r, "bandwidth", mbps, "MB/s");
                ums_rec_str(&r, "op", k_op_name[op]);
                ums_rec_int(&r, "bytes", (long long)size);
                ums_rec_bool(&r, "verified", ok);
                ums_rec_emit(&r);
                fprintf(stderr, "%-8s %9zu B  %10.3f us  %10.2f MB/s  %s\n", k_op_name[op], size,
                        us, mbps, ok ? "ok" : "DATA MISMATCH");
            }
        }
    }
    /* The coarray layer's cost over raw MPI RMA (same protocol, same transport). */
    if (g_me == 1 && lat8[OP_PUT] > 0 && lat8[OP_RAW_PUT] > 0)
        ums_result("put_lat8_over_raw", lat8[OP_PUT] / lat8[OP_RAW_PUT], "ratio");
    if (g_me == 1 && bw4m[OP_PUT] > 0 && bw4m[OP_RAW_PUT] > 0)
        ums_result("put_bw4m_over_raw", bw4m[OP_PUT] / bw4m[OP_RAW_PUT], "ratio");

#ifdef CAB_HAVE_MPI
    if (want[OP_RAW_PUT] || want[OP_RAW_GET]) {
        MPI_Win_unlock_all(g_win);
        MPI_Win_free(&g_win);
    }
#endif
    free(g_loc);
    if (!all_ok && g_me == 1)
        fprintf(stderr, "cab-pingpong: data verification FAILED\n");
    cab_exit(all_ok ? 0 : UMS_EXIT_FAILED);
}
