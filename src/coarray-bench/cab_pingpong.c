/* cab-pingpong: P002 §4.1 ping-pong between images 1 and 2 (any further images only
 * join the barriers), as the translator emits figs. 2 and 3, with put protocols:
 *
 *   flag (default, race-free)          paper (P002 fig. 2, RACY)       get (fig. 3)
 *   rmt_buf[0:size]:[dest] = loc;      rmt_buf[0:size]:[dest] = loc;   loc = rmt_buf[0:size]:[dest];
 *   #pragma xmp sync_memory            #pragma xmp sync_memory         #pragma xmp barrier
 *   flag:[dest] = ++sent;              while (rmt_buf[size-1] != '0')  (image 2: barrier, then get)
 *   #pragma xmp sync_memory              #pragma xmp sync_memory       #pragma xmp barrier
 *   while (flag != ++recvd)            rmt_buf[size-1] = '1';
 *     #pragma xmp sync_memory
 *
 *   atomic (race-free, Fortran's conforming spin-wait): payload put, sync memory,
 *   xmpc_atomic_define(flag:[dest], ++sent); wait with xmpc_atomic_ref, then sync memory.
 *
 * The paper's protocol waits for the LAST BYTE OF THE SAME PUT to change.  Nothing
 * orders the bytes within one put (not xmpc, not MPI, and Fortran calls it a data
 * race), so the receiver can see the flag byte before the rest of the payload: a torn
 * round.  It is kept, as op "put-paper", so P002's numbers stay comparable; the
 * default "flag" protocol completes the payload (sync memory) before a separate flag
 * word is written, so the flag can only be seen once every payload byte is there.
 * The flag word is a coarray of its own (long flag[1]:[*], as in the program above and
 * in the Fortran peer), the atomic protocol's an int coarray of its own.  With
 * --flag-layout adjacent it is instead the word right after the largest payload in
 * rmt_buf: for small messages payload and flag then share one cache line, and the
 * receiver's polling takes that line back between the payload's store and the flag's,
 * so the time between the two puts is paid twice (kept to show that effect).  The raw
 * baseline always has the same layout (a window of its own for the flag, or the word
 * after the payload in the payload's window).
 *
 * --raw adds each protocol written directly in MPI-3 RMA (MPI_Put + MPI_Win_flush, a
 * second MPI_Put of the flag word, polling it with MPI_Win_sync and MPI_Test of a
 * receive nothing matches, the runtime's progress call too; MPI_Accumulate /
 * MPI_Fetch_and_op for atomic; MPI_Get + flush + MPI_Barrier), the baseline the
 * coarray layer is measured against in the same binary (mpi3/armci backends only).
 *
 * Reported per op and size: half round-trip latency = time / (2 LOOP) in µs (for get
 * it includes the barriers, as in the paper) and bandwidth = size / latency in MB/s
 * (10^6 bytes/s); the best of --trials runs of LOOP iterations, after a short warm-up.
 * The timed loops do nothing but the protocol.  After them --check-rounds more rounds
 * of the same protocol run with payloads that alternate between two patterns, and the
 * receiver checks every byte of every round: a round whose payload is not the one just
 * sent is torn (`torn_rounds` in the JSON).  A race-free protocol with a torn round is
 * a runtime bug (verified: false, exit 1); the paper protocol's torn rounds are its own
 * race and are reported, not failed.  The same race can deadlock the paper protocol
 * (a torn put rewrites the flag byte after the receiver reset it): a receiver that
 * waits longer than --hang-timeout gives up, the size is reported as a "hung" record
 * (racy: true) and the sweep goes on; a race-free protocol that hangs fails the run.
 *
 * Ops (JSON "op"): put, raw-put (flag protocol), put-paper, raw-put-paper,
 * put-atomic, raw-put-atomic, get, raw-get; every record also names its "protocol".
 *
 * --stream-count N adds P002's other put/get comparison, put's own transfer capability
 * (「put自体の転送能力」, the text after fig. 4), free of the ping-pong's flags and
 * barriers: image 1 moves N messages of --max bytes to image 2 back to back, the puts
 * completed by one sync memory, the gets one after another (XMP's get blocks); image 2
 * only waits.  Metric "stream_bandwidth" (op put | get), N x size / time, best of
 * --trials; image 2 checks the last put's payload, image 1 the last get's. */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "cab_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef CAB_HAVE_MPI
#include <mpi.h>
#endif

enum { OP_PUT, OP_GET, OP_RAW_PUT, OP_RAW_GET, N_OPS };
enum { P_FLAG, P_PAPER, P_ATOMIC, N_PROTOCOLS };
static const char *const k_protocol[N_PROTOCOLS] = {"flag", "paper", "atomic"};

static long long g_loop = 1000, g_trials = 1, g_check_rounds = -1;
static int g_me;
static size_t g_flag_off;         /* byte offset of the flag word in rmt_buf / the window */
static char *g_loc, *g_alt[2];    /* loc_buf; the two payloads the checked rounds alternate */
static xmpc_coarray *g_rmt;       /* rmt_buf: char rmt_buf[MAX + 8]:[*] */
static xmpc_coarray *g_aflag;     /* int aflag[1]:[*], the atomic protocol's flag */
static volatile char *g_rmt_mem;  /* this image's rmt_buf, polled */
static long g_sent, g_recvd;      /* messages sent / received by this image since prepare */
static long long g_torn;          /* checked rounds whose payload was not the one sent */
static double g_hang_timeout = 10; /* s a receiver waits before calling the protocol hung */
static int g_hung;                /* this image gave up waiting in this run */
static int g_flag_adjacent;       /* --flag-layout adjacent */
static xmpc_coarray *g_flag;      /* long flag[1]:[*] (separate layout) */
static volatile long *g_flag_mem; /* this image's flag word, polled */
#ifdef CAB_HAVE_MPI
static MPI_Win g_win; /* the raw baseline's buffer */
static volatile char *g_win_mem;
static MPI_Win g_fwin;  /* the raw baseline's flag word: its own window, or g_win */
static MPI_Aint g_fdisp; /* the flag word's displacement in g_fwin */
static volatile long *g_fwin_mem;
/* A receive nothing matches, on a communicator of its own: testing it is the raw
 * poll's progress call, as in the coarray runtime (the same poll on both sides). */
static MPI_Comm g_idle_comm = MPI_COMM_NULL;
static MPI_Request g_idle = MPI_REQUEST_NULL;
static int g_idle_buf;
#endif

/* Payload byte i of a message of `size` bytes in pattern `alt` (0 or 1): the two
 * patterns differ in every byte; the paper protocol's last byte is its flag '0'. */
static char pattern(size_t i, size_t size, int alt, int paper)
{
    if (paper && i + 1 == size)
        return '0';
    return (char)('a' + (i + (size_t)alt * 13) % 26);
}

static void fill(char *buf, size_t size, int alt, int paper)
{
    for (size_t i = 0; i < size; ++i)
        buf[i] = pattern(i, size, alt, paper);
}

/* ---- put ping-pong, one protocol, coarray or raw ---------------------------------------- */

static volatile long *flag_word(int raw)
{
#ifdef CAB_HAVE_MPI
    if (raw)
        return g_fwin_mem;
#endif
    (void)raw;
    return g_flag_mem;
}

static volatile char *recv_buf(int raw)
{
#ifdef CAB_HAVE_MPI
    if (raw)
        return g_win_mem;
#endif
    (void)raw;
    return g_rmt_mem;
}

static void send(int raw, int proto, const char *src, size_t size)
{
    const int dest = 3 - g_me;
    long seq = ++g_sent;
    if (!raw) {
        /* rmt_buf[0:size]:[dest] = loc_buf[0:size]; */
        CAB_RMA1(XMPC_RMA_PUT, g_rmt, src, 0, size, 0, 0, dest);
        xmpc_sync_memory();
        if (proto == P_FLAG) {
            if (g_flag_adjacent) /* rmt_buf[F:8]:[dest] = (char *)&seq */
                CAB_RMA1(XMPC_RMA_PUT, g_rmt, &seq, g_flag_off, sizeof seq, 0, 0, dest);
            else /* flag[0:1]:[dest] = seq */
                CAB_RMA1(XMPC_RMA_PUT, g_flag, &seq, 0, 1, 0, 0, dest);
            xmpc_sync_memory();
        } else if (proto == P_ATOMIC)
            xmpc_atomic_define(g_aflag, dest, 0, seq);
        return;
    }
#ifdef CAB_HAVE_MPI
    const int rank = dest - 1;
    MPI_Put(src, (int)size, MPI_BYTE, rank, 0, (int)size, MPI_BYTE, g_win);
    MPI_Win_flush(rank, g_win);
    if (proto == P_FLAG) {
        MPI_Put(&seq, 1, MPI_LONG, rank, g_fdisp, 1, MPI_LONG, g_fwin);
        MPI_Win_flush(rank, g_fwin);
    } else if (proto == P_ATOMIC) {
        MPI_Accumulate(&seq, 1, MPI_LONG, rank, g_fdisp, 1, MPI_LONG, MPI_REPLACE, g_fwin);
        MPI_Win_flush(rank, g_fwin);
    }
#endif
}

static void poll_progress(int raw)
{
#ifdef CAB_HAVE_MPI
    if (raw) {
        MPI_Win_sync(g_fwin); /* the target's view of its window memory catches up */
        /* Where no hardware writes the window (RMA emulated over TCP: Open MPI's osc/ucx
         * on UCX's tcp transport), a put lands only while this target runs MPI's progress
         * engine, which MPI_Win_sync does not enter there; testing a request does. */
        int done;
        MPI_Test(&g_idle, &done, MPI_STATUS_IGNORE);
        return;
    }
#endif
    (void)raw;
    xmpc_sync_memory();
}

/* 1 once one message has been waited for longer than --hang-timeout.  The clock is
 * read only every 1024 polls (it costs more than a poll), and first read then: a
 * message that comes within 1024 polls costs no clock read at all.  The paper protocol can deadlock: a torn put may write the flag
 * byte again after the receiver reset it, the receiver later takes that stale '0'
 * for a new message, and both images end up waiting for each other.  A watchdog turns
 * that into a reported outcome instead of a hung job. */
static int timed_out(unsigned long *polls, double *since)
{
    if ((++*polls & 1023) != 0)
        return 0;
    double now = ums_now();
    if (*since == 0)
        *since = now;
    if (now - *since < g_hang_timeout)
        return 0;
    g_hung = 1;
    return 1;
}

/* Waits for the next message; with `check`, compares it with pattern `alt`. */
static void receive(int raw, int proto, size_t size, int check, int alt)
{
    long want = ++g_recvd;
    volatile char *buf = recv_buf(raw);
    unsigned long polls = 0;
    double since = 0;
    if (proto == P_PAPER) {
        while (buf[size - 1] != '0')
            if (poll_progress(raw), timed_out(&polls, &since))
                return;
    } else if (proto == P_FLAG) {
        while (*flag_word(raw) != want)
            if (poll_progress(raw), timed_out(&polls, &since))
                return;
    } else if (!raw) {
        while (xmpc_atomic_ref(g_aflag, g_me, 0) != want)
            if (timed_out(&polls, &since))
                return;
        xmpc_sync_memory(); /* the payload, complete before the flag, becomes visible */
    } else {
#ifdef CAB_HAVE_MPI
        long v;
        do {
            MPI_Fetch_and_op(NULL, &v, MPI_LONG, g_me - 1, g_fdisp, MPI_NO_OP, g_fwin);
            MPI_Win_flush(g_me - 1, g_fwin);
            if (v != want && timed_out(&polls, &since))
                return;
        } while (v != want);
        MPI_Win_sync(g_win);
#endif
    }
    if (check) {
        /* The flag may have been seen before any sync in the wait: one more orders this
         * image's reads after it (Fortran's segment rule; MPI_Win_sync on the window
         * that holds the payload).  Untimed: the timed rounds never read the payload. */
#ifdef CAB_HAVE_MPI
        if (raw)
            MPI_Win_sync(g_win);
#endif
        if (!raw)
            xmpc_sync_memory();
        size_t n = proto == P_PAPER ? size - 1 : size;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (memcmp((const char *)buf, g_alt[alt], n) != 0)
            ++g_torn;
    }
    if (proto == P_PAPER)
        buf[size - 1] = '1';
}

/* `loop` round trips; with `check`, message k carries pattern k % 2 and is checked. */
static void put_pingpong(int raw, int proto, size_t size, long long loop, int check)
{
    for (long long i = 0; i < loop && !g_hung; ++i) {
        int alt = (int)(i % 2);
        const char *src = check ? g_alt[alt] : g_loc;
        if (g_me == 1) {
            send(raw, proto, src, size);
            receive(raw, proto, size, check, alt);
        } else if (g_me == 2) {
            receive(raw, proto, size, check, alt);
            if (!g_hung)
                send(raw, proto, src, size);
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

#ifdef CAB_HAVE_MPI
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

/* ---- one (op, protocol, size) measurement ----------------------------------------------- */

static int is_raw(int op) { return op == OP_RAW_PUT || op == OP_RAW_GET; }
static int is_put(int op) { return op == OP_PUT || op == OP_RAW_PUT; }

static void sync_all_any(int op);

static void run_op(int op, int proto, size_t size, long long loop, int check)
{
    if (is_put(op))
        put_pingpong(is_raw(op), proto, size, loop, check);
    else if (op == OP_GET)
        get_pingpong(size, loop);
#ifdef CAB_HAVE_MPI
    else
        raw_get_pingpong(size, loop);
#endif
}

/* sync all, or its MPI form for the raw ops (window sync + barrier). */
static void sync_all_any(int op)
{
#ifdef CAB_HAVE_MPI
    if (is_raw(op)) {
        MPI_Win_sync(g_win);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_sync(g_win);
        return;
    }
#endif
    (void)op;
    xmpc_sync_all();
}

/* Put ops: the receiver's buffer starts as '1' (so the paper's flag is down), its flag
 * words at 0, the sender's payload is pattern 0.  Get ops: the remote buffer holds the
 * pattern, the local one zeros. */
static void prepare(int op, int proto, size_t size)
{
    int put = is_put(op), paper = proto == P_PAPER;
    char *buf = (char *)recv_buf(is_raw(op));
    if (put) {
        memset(buf, '1', size);
        fill(g_loc, size, 0, paper);
    } else {
        fill(buf, size, 0, 0);
        memset(g_loc, 0, size);
    }
    fill(g_alt[0], size, 0, paper);
    fill(g_alt[1], size, 1, paper);
    *flag_word(is_raw(op)) = 0;
    if (g_aflag)
        *(volatile int *)xmpc_coarray_data(g_aflag) = 0;
    g_sent = g_recvd = 0;
    sync_all_any(op);
}

/* 1 when this image holds the right bytes after the last timed round (images past 2: 1). */
static int check_final(int op, int proto, size_t size)
{
    if (g_me > 2)
        return 1;
    int put = is_put(op), paper = proto == P_PAPER;
    const volatile char *got = put ? recv_buf(is_raw(op)) : (const volatile char *)g_loc;
    /* After the last paper round the receiver has reset its flag byte to '1'. */
    size_t n = put && paper ? size - 1 : size;
    for (size_t i = 0; i < n; ++i)
        if (got[i] != pattern(i, size, 0, put && paper)) {
            fprintf(stderr, "cab-pingpong: image %d: %s (%s) of %zu bytes: byte %zu is 0x%02x, want 0x%02x\n",
                    g_me, put ? "put" : "get", k_protocol[proto], size, i, (unsigned char)got[i],
                    (unsigned char)pattern(i, size, 0, put && paper));
            return 0;
        }
    return 1;
}

typedef struct {
    double half;        /* best half round trip, s */
    int final_ok;       /* the payload after the timed rounds was right on every image */
    int hung;           /* a receiver waited past --hang-timeout (then nothing is timed) */
    long long torn;     /* torn rounds in the checked rounds (both images) */
    long long checked;  /* checked rounds (round trips) */
} result;

/* Collective: did any image give up waiting?  Then all leave the run together. */
static int any_hung(int op)
{
    double h = g_hung;
    cab_allreduce_max(&h, 1);
    sync_all_any(op);
    return h > 0;
}

static result measure(int op, int proto, size_t size)
{
    result res = {.half = 1e300};
    double best = 1e300, v[3] = {0, 0, 0};
    g_hung = 0;
    prepare(op, proto, size);
    run_op(op, proto, size, g_loop < 10 ? g_loop : 10, 0); /* warm-up: connections, page faults */
    res.hung = any_hung(op);
    for (long long t = 0; t < g_trials && !res.hung; ++t) {
        sync_all_any(op);
        double t0 = ums_now();
        run_op(op, proto, size, g_loop, 0);
        double dt = ums_now() - t0;
        if (dt < best)
            best = dt;
        res.hung = any_hung(op);
    }
    if (!res.hung) {
        v[0] = !check_final(op, proto, size);
        if (is_put(op) && g_check_rounds > 0) {
            prepare(op, proto, size);
            g_torn = 0;
            put_pingpong(is_raw(op), proto, size, g_check_rounds, 1);
            res.hung = any_hung(op);
            v[1] = (double)g_torn;
            res.checked = g_check_rounds;
        }
    }
    cab_allreduce_sum(v, 2);
    /* Image 1's clock: it starts and ends every round trip. */
    v[2] = best / (2.0 * (double)g_loop);
    cab_allreduce_max(&v[2], 1); /* image 2's clock is not used: make them agree */
    cab_allreduce_free(); /* the timed loops see rmt_buf only, as the paper's program */
    res.half = v[2];
    res.final_ok = v[0] == 0;
    res.torn = (long long)v[1];
    return res;
}

/* JSON op name: the flag protocol keeps the plain names (put, raw-put), the others
 * carry theirs (put-paper, raw-put-atomic). */
static void op_name(char *buf, size_t cap, int op, int proto)
{
    static const char *const base[N_OPS] = {"put", "get", "raw-put", "raw-get"};
    if (is_put(op) && proto != P_FLAG)
        snprintf(buf, cap, "%s-%s", base[op], k_protocol[proto]);
    else
        snprintf(buf, cap, "%s", base[op]);
}

static void emit(const char *metric, double value, const char *unit, const char *op,
                 int proto_or_get, size_t size, const result *r, int ok)
{
    ums_rec rec;
    ums_rec_begin(&rec, metric, value, unit);
    ums_rec_str(&rec, "op", op);
    ums_rec_str(&rec, "protocol", proto_or_get < 0 ? "barrier" : k_protocol[proto_or_get]);
    ums_rec_int(&rec, "bytes", (long long)size);
    ums_rec_bool(&rec, "verified", ok);
    if (r->checked) {
        ums_rec_int(&rec, "torn_rounds", r->torn);
        ums_rec_int(&rec, "checked_rounds", r->checked);
    }
    ums_rec_emit(&rec);
}

/* metric (flag protocol) or metric_<protocol>: coarray / raw, when both ran. */
static void emit_ratio(const char *metric, int proto, const double v[2])
{
    if (!(v[0] > 0 && v[1] > 0))
        return;
    char name[64];
    snprintf(name, sizeof name, "%s%s%s", metric, proto == P_FLAG ? "" : "_",
             proto == P_FLAG ? "" : k_protocol[proto]);
    ums_rec rec;
    ums_rec_begin(&rec, name, v[0] / v[1], "ratio");
    ums_rec_str(&rec, "protocol", k_protocol[proto]);
    ums_rec_emit(&rec);
}

/* One stream of `count` puts or gets of `size` bytes from image 1 to image 2 (see the
 * top comment): the best bandwidth of g_trials runs in MB/s, and whether the last
 * payload arrived whole (*ok, on every image). */
static double stream(int put, size_t size, long long count, int *ok)
{
    const int dest = 2, last = (int)((count - 1) % 2);
    double best = 0;
    fill(g_alt[0], size, 0, 0);
    fill(g_alt[1], size, 1, 0);
    if (!put && g_me == 2) /* what image 1's gets must bring back */
        memcpy((char *)g_rmt_mem, g_alt[last], size);
    *ok = 1;
    for (long long t = 0; t < g_trials; ++t) {
        memset(g_loc, 0, size);
        xmpc_barrier();
        double t0 = ums_now();
        if (g_me == 1) {
            for (long long i = 0; i < count; ++i) {
                if (put)
                    CAB_RMA1(XMPC_RMA_PUT, g_rmt, g_alt[i % 2], 0, (long)size, 0, 0, dest);
                else
                    CAB_RMA1(XMPC_RMA_GET, g_rmt, g_loc, 0, (long)size, 0, 0, dest);
            }
            if (put)
                xmpc_sync_memory();
        }
        double dt = ums_now() - t0;
        xmpc_barrier(); /* the puts are complete and visible on image 2 from here */
        if (put && g_me == 2)
            *ok &= memcmp((const char *)g_rmt_mem, g_alt[last], size) == 0;
        if (!put && g_me == 1)
            *ok &= memcmp(g_loc, g_alt[last], size) == 0;
        if (g_me == 1 && dt > 0 && (double)count * (double)size / dt / 1e6 > best)
            best = (double)count * (double)size / dt / 1e6;
    }
    /* image 2 holds the put verdict: every image learns it (sync all, then image 1 reads). */
    int flag[1] = {*ok};
    long one[] = {1};
    xmpc_coarray *v = xmpc_coarray_alloc("stream_ok", XMPC_INT, sizeof(int), 1, one);
    *(int *)xmpc_coarray_data(v) = flag[0];
    xmpc_barrier();
    if (g_me == 1)
        CAB_RMA1(XMPC_RMA_GET, v, flag, 0, 1, 0, 0, dest);
    *ok &= flag[0];
    xmpc_barrier();
    xmpc_coarray_free(v);
    return best;
}

int main(int argc, char **argv)
{
    size_t min = 1, max = 4u << 20;
    const char *ops = "put,get", *protocols = "flag", *flag_layout = "separate";
    int raw = 0;
    long long stream_count = 0;
    const ums_arg args[] = {
        {"loop", UMS_ARG_INT, &g_loop, "round trips per size (LOOP; default 1000)", 1, 1e9, NULL},
        {"min", UMS_ARG_SIZE, &min, "smallest message, a power of two (default 1)", 1, 1 << 30, NULL},
        {"max", UMS_ARG_SIZE, &max, "largest message, a power of two (default 4M)", 1, 1 << 30, NULL},
        {"ops", UMS_ARG_STRING, &ops, "comma-separated coarray ops: put,get (default both)", 0, -1, NULL},
        {"protocol", UMS_ARG_STRING, &protocols,
         "comma-separated put protocols: flag (race-free, default), atomic (race-free, coarray "
         "atomics), paper (P002 fig. 2: waits on the payload's last byte, RACY)", 0, -1, NULL},
        {"raw", UMS_ARG_FLAG, &raw, "also run the same protocols in raw MPI-3 RMA (baseline)", 0, -1, NULL},
        {"trials", UMS_ARG_INT, &g_trials, "timed runs per size, the best is reported (default 1)", 1, 1000, NULL},
        {"hang-timeout", UMS_ARG_DOUBLE, &g_hang_timeout,
         "seconds a receiver waits for one message before the run counts as hung (default 10)",
         0.001, 1e6, NULL},
        {"stream-count", UMS_ARG_INT, &stream_count,
         "also stream this many --max-byte puts and gets from image 1 to 2 (put's own transfer "
         "capability vs get's; default 0: off)", 0, 1e9, NULL},
        {"check-rounds", UMS_ARG_INT, &g_check_rounds,
         "untimed put rounds per size with every payload byte checked (default: LOOP; 0: none)",
         0, 1e9, NULL},
        {"flag-layout", UMS_ARG_STRING, &flag_layout,
         "where the flag protocol's flag word lives: separate (a coarray of its own, default) "
         "or adjacent (right after the largest payload, in its cache line for small messages)",
         0, -1, NULL},
    };
    ums_args_parse(argc, argv,
                   "P002 ping-pong: coarray put (payload, then a flag) and get (barriers) "
                   "between images 1 and 2; JSON lines on stdout.",
                   args, sizeof args / sizeof args[0]);
    /* Input checks that need no image count: before the runtime starts. */
    ums_json_init("cab-pingpong");
    if (!cab_is_pow2((long)min) || !cab_is_pow2((long)max))
        ums_usage_fail("--min %zu and --max %zu must be powers of two", min, max);
    if (min > max)
        ums_usage_fail("--min %zu is larger than --max %zu", min, max);
    if (g_check_rounds < 0)
        g_check_rounds = g_loop;
    int want[N_OPS] = {0}, nwant = 0, proto_on[N_PROTOCOLS] = {0}, nproto = 0;
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
    snprintf(list, sizeof list, "%s", protocols);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int p = 0;
        while (p < N_PROTOCOLS && strcmp(tok, k_protocol[p]) != 0)
            ++p;
        if (p == N_PROTOCOLS)
            ums_usage_fail("--protocol: unknown protocol '%s' (flag|atomic|paper)", tok);
        proto_on[p] = 1;
        ++nproto;
    }
    if (!nproto)
        ums_usage_fail("--protocol: no protocol given (flag|atomic|paper)");
    if (strcmp(flag_layout, "adjacent") == 0)
        g_flag_adjacent = 1;
    else if (strcmp(flag_layout, "separate") != 0)
        ums_usage_fail("--flag-layout: unknown layout '%s' (separate|adjacent)", flag_layout);

    cab_start("cab-pingpong", &argc, &argv);
    g_me = xmpc_this_image();
    if (xmpc_num_images() < 2)
        cab_usage_fail("ping-pong needs at least 2 images, got %d", xmpc_num_images());
    ums_param_int("loop", g_loop);
    ums_param_int("trials", g_trials);
    ums_param_int("check_rounds", g_check_rounds);
    ums_param_str("flag_layout", g_flag_adjacent ? "adjacent" : "separate");

    g_flag_off = (max + 7) & ~(size_t)7;
    long dims[] = {(long)(g_flag_off + sizeof(long))}, one[] = {1};
    g_rmt = xmpc_coarray_alloc("rmt_buf", XMPC_BYTE, 1, 1, dims);
    g_rmt_mem = xmpc_coarray_data(g_rmt);
    if (g_flag_adjacent)
        g_flag_mem = (volatile long *)(g_rmt_mem + g_flag_off);
    else {
        g_flag = xmpc_coarray_alloc("flag", XMPC_LONG, sizeof(long), 1, one);
        g_flag_mem = xmpc_coarray_data(g_flag);
    }
    if (proto_on[P_ATOMIC] && want[OP_PUT]) {
        g_aflag = xmpc_coarray_alloc("aflag", XMPC_INT, sizeof(int), 1, one);
    }
    g_loc = calloc(max, 1);
    g_alt[0] = calloc(max, 1);
    g_alt[1] = calloc(max, 1);
    if (!g_loc || !g_alt[0] || !g_alt[1])
        cab_usage_fail("cannot allocate 3 x %zu bytes", max);

    if (raw) {
        if (cab_mpi_usable()) {
#ifdef CAB_HAVE_MPI
            char *mem;
            MPI_Win_allocate((MPI_Aint)(g_flag_off + sizeof(long)), 1, MPI_INFO_NULL,
                             MPI_COMM_WORLD, &mem, &g_win);
            g_win_mem = mem;
            MPI_Win_lock_all(MPI_MODE_NOCHECK, g_win);
            g_fwin = g_win;
            g_fdisp = (MPI_Aint)g_flag_off;
            if (!g_flag_adjacent) {
                MPI_Win_allocate(sizeof(long), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &g_fwin);
                MPI_Win_lock_all(MPI_MODE_NOCHECK, g_fwin);
                g_fdisp = 0;
            }
            g_fwin_mem = (volatile long *)(mem + (g_flag_adjacent ? g_flag_off : 0));
            MPI_Comm_dup(MPI_COMM_WORLD, &g_idle_comm);
            MPI_Irecv(&g_idle_buf, 1, MPI_INT, MPI_ANY_SOURCE, 0, g_idle_comm, &g_idle);
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

    /* per protocol: 8-byte latency and 4 MB bandwidth of put and raw-put, for the ratios */
    double lat8[N_PROTOCOLS][2] = {{0}}, bw4m[N_PROTOCOLS][2] = {{0}};
    long long torn_total[N_PROTOCOLS][2] = {{0}}, checked_total[N_PROTOCOLS][2] = {{0}};
    int all_ok = 1;
    for (int op = 0; op < N_OPS; ++op) {
        if (!want[op])
            continue;
        for (int proto = 0; proto < N_PROTOCOLS; ++proto) {
            if (!proto_on[proto])
                continue;
            int first = 0;
            while (!proto_on[first])
                ++first;
            if (!is_put(op) && proto != first)
                continue; /* get has one protocol (barriers): run it once */
            char name[32];
            op_name(name, sizeof name, op, proto);
            int side = is_raw(op);
            for (size_t size = min; size <= max; size *= 2) {
                result r = measure(op, proto, size);
                if (r.hung) {
                    /* The paper protocol's race can deadlock it; a race-free one must not. */
                    all_ok &= proto == P_PAPER;
                    if (g_me == 1) {
                        ums_rec rec;
                        ums_rec_begin(&rec, "hung", 1, "runs");
                        ums_rec_str(&rec, "op", name);
                        ums_rec_str(&rec, "protocol", k_protocol[proto]);
                        ums_rec_int(&rec, "bytes", (long long)size);
                        ums_rec_bool(&rec, "racy", proto == P_PAPER);
                        if (proto != P_PAPER)
                            ums_rec_bool(&rec, "verified", 0);
                        ums_rec_emit(&rec);
                        fprintf(stderr, "%-14s %9zu B  HUNG: no message for %g s%s\n", name, size,
                                g_hang_timeout, proto == P_PAPER ? " (the paper protocol's race)"
                                                                 : " (a race-free protocol: a bug)");
                    }
                    continue;
                }
                /* A race-free protocol must never tear; the paper's may (its own race). */
                int ok = r.final_ok && (proto == P_PAPER || r.torn == 0);
                all_ok &= ok;
                double us = r.half * 1e6, mbps = (double)size / r.half / 1e6;
                if (is_put(op)) {
                    if (size == 8)
                        lat8[proto][side] = us;
                    if (size == (4u << 20))
                        bw4m[proto][side] = mbps;
                    torn_total[proto][side] += r.torn;
                    checked_total[proto][side] += r.checked;
                }
                if (g_me == 1) {
                    int pr = is_put(op) ? proto : -1;
                    emit("latency", us, "us", name, pr, size, &r, ok);
                    emit("bandwidth", mbps, "MB/s", name, pr, size, &r, ok);
                    fprintf(stderr, "%-14s %9zu B  %10.3f us  %10.2f MB/s  %s", name, size, us,
                            mbps, ok ? "ok" : "DATA MISMATCH");
                    if (r.checked)
                        fprintf(stderr, "  torn %lld/%lld", r.torn, r.checked);
                    fputc('\n', stderr);
                }
            }
            if (g_me == 1 && is_put(op) && g_check_rounds > 0) {
                ums_rec rec;
                ums_rec_begin(&rec, "torn_rounds", (double)torn_total[proto][side], "rounds");
                ums_rec_str(&rec, "op", name);
                ums_rec_str(&rec, "protocol", k_protocol[proto]);
                ums_rec_int(&rec, "checked_rounds", checked_total[proto][side]);
                ums_rec_bool(&rec, "racy", proto == P_PAPER);
                ums_rec_emit(&rec);
            }
        }
    }
    for (int put = 1; stream_count > 0 && put >= 0; --put) {
        int ok;
        double mbps = stream(put, max, stream_count, &ok);
        all_ok &= ok;
        if (g_me == 1) {
            ums_rec rec;
            ums_rec_begin(&rec, "stream_bandwidth", mbps, "MB/s");
            ums_rec_str(&rec, "op", put ? "put" : "get");
            ums_rec_int(&rec, "bytes", (long long)max);
            ums_rec_int(&rec, "count", stream_count);
            ums_rec_bool(&rec, "verified", ok);
            ums_rec_emit(&rec);
            fprintf(stderr, "stream %-4s %9zu B x %lld  %10.2f MB/s  %s\n", put ? "put" : "get", max,
                    stream_count, mbps, ok ? "ok" : "DATA MISMATCH");
        }
    }
    /* The coarray layer's cost over raw MPI RMA: same protocol on both sides, same
     * transport, same binary.  The flag protocol's ratios keep the plain names. */
    for (int proto = 0; g_me == 1 && proto < N_PROTOCOLS; ++proto) {
        emit_ratio("put_lat8_over_raw", proto, lat8[proto]);
        emit_ratio("put_bw4m_over_raw", proto, bw4m[proto]);
    }

#ifdef CAB_HAVE_MPI
    if (want[OP_RAW_PUT] || want[OP_RAW_GET]) {
        MPI_Cancel(&g_idle);
        MPI_Wait(&g_idle, MPI_STATUS_IGNORE);
        MPI_Comm_free(&g_idle_comm);
        if (g_fwin != g_win) {
            MPI_Win_unlock_all(g_fwin);
            MPI_Win_free(&g_fwin);
        }
        MPI_Win_unlock_all(g_win);
        MPI_Win_free(&g_win);
    }
#endif
    free(g_loc);
    free(g_alt[0]);
    free(g_alt[1]);
    if (!all_ok && g_me == 1)
        fprintf(stderr, "cab-pingpong: data verification FAILED\n");
    cab_exit(all_ok ? 0 : UMS_EXIT_FAILED);
}
