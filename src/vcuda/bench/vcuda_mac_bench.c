/* vcuda-mac-bench: what frame authentication (mac.h) costs, on the CPU alone.
 *
 *   mac_frame_time     tag + check of one frame as the transport does it (the sender's
 *                      vcuda_session_seal over header and bulk data where they lie, the
 *                      receiver's vcuda_session_open): a MEMCPY_H2D request carrying
 *                      --sizes bytes each (default 8 B, 1 KiB, 64 KiB, 1 MiB), ns per
 *                      frame, the median of --reps samples of --iters frames (fewer
 *                      above 1 KiB: the same bytes per sample)
 *   mac_bandwidth      the same as GB/s of frame bytes
 *   mac_key_time       one frame's E_K(J0) (an AES-256 block): both sides make it
 *                      ahead, while they wait for the peer (vcuda_session_prepare), so
 *                      a call's path has mac_frame_time - 2 x this per frame
 *                      (mac_frame_path_time)
 *   call_time          round trips through the client core over loopback to a server
 *                      loop in a child process, every frame tagged both ways: PING, and
 *                      MEMCPY_H2D / MEMCPY_D2H of 8 B and 1 KiB, the frames the libcudart
 *                      stand-in sends for cudaMemcpy (the handler here drops or makes
 *                      the bytes: no GPU), us per call, the median of --reps samples of
 *                      --calls calls
 *   bulk_bandwidth     the same loopback connection moving --bulk-mib MiB (default 64)
 *                      in the stand-in's chunks (VCUDA_CHUNK_KIB, default 1 MiB): H2D
 *                      (MEMCPY_H2D chunks, dropped by the handler), D2H (the handler
 *                      answers in 1 MiB reply chunks, as vcuda-server does) and the bare
 *                      transport (SINK, answered by the server loop: vcuda-bench's
 *                      "transport" line), GB/s, the median of --bulk-reps copies
 *
 * Tags are always on (protocol 6): a call's cost without them is the same measurement
 * on a build of the previous release (protocol 5).  Every line is one JSON object
 * (umstudy/support.h); params.mac_impl says which path computed the tags (mac.h: the
 * CPU's AES and carry-less multiply instructions, or the portable code; VCUDA_MAC_IMPL
 * asks for less than the best). */
#define _POSIX_C_SOURCE 200809L
#include "umstudy/support.h"
#include "vcuda/client.h"
#include "vcuda/mac.h"
#include "vcuda/server_loop.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char TOKEN[] = "vcuda-mac-bench-token";

/* ---- the primitive ----------------------------------------------------------------- */

static void frame_time(size_t bytes, long long reps, long long iters, double key_time)
{
    static uint8_t head[256];
    uint8_t *data = malloc(bytes ? bytes : 1), tag[VCUDA_TAG_SIZE], nc[VCUDA_NONCE_SIZE], ns[VCUDA_NONCE_SIZE];
    double *t = malloc((size_t)reps * sizeof *t);
    char why[VCUDA_WHY_LEN];
    if (!data || !t) ums_fail("out of memory");
    for (size_t i = 0; i < bytes; ++i) data[i] = (uint8_t)(i * 131);
    if (vcuda_random(nc, sizeof nc) || vcuda_random(ns, sizeof ns)) ums_fail("no random bytes");
    vcuda_msg m;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_H2D;
    m.v[0] = 0x7f0000000000ull, m.nv = 2;
    m.blob = data, m.blob_len = (uint32_t)bytes;
    size_t len = 0, hl = 0;
    if (vcuda_encode_split(&m, head, sizeof head, &len, &hl, why)) ums_fail("encode: %s", why);
    vcuda_session tx, rx;
    vcuda_session_start(&tx, 0, (const uint8_t *)TOKEN, strlen(TOKEN), nc, ns, 250, 0, "client");
    vcuda_session_start(&rx, 1, (const uint8_t *)TOKEN, strlen(TOKEN), nc, ns, 250, 0, "server");
    for (long long r = -1; r < reps; ++r) { /* r = -1: warm-up */
        double t0 = ums_now();
        for (long long i = 0; i < iters; ++i) {
            vcuda_session_seal(&tx, head, hl, data, len - hl, tag);
            if (!vcuda_session_open(&rx, head, hl, data, len - hl, tag, why)) ums_fail("%s", why);
        }
        if (r >= 0) t[r] = (ums_now() - t0) / (double)iters;
    }
    double med = ums_median(t, (size_t)reps), lo = t[0], hi = t[reps - 1];
    ums_rec rec;
    ums_rec_begin(&rec, "mac_frame_time", med * 1e9, "ns");
    ums_rec_int(&rec, "payload_bytes", (long long)bytes);
    ums_rec_int(&rec, "frame_bytes", (long long)len);
    ums_rec_num(&rec, "min", lo * 1e9);
    ums_rec_num(&rec, "max", hi * 1e9);
    ums_rec_str(&rec, "what", "seal + open");
    ums_rec_emit(&rec);
    ums_rec_begin(&rec, "mac_bandwidth", (double)len / med / 1e9, "GB/s");
    ums_rec_int(&rec, "payload_bytes", (long long)bytes);
    ums_rec_str(&rec, "what", "seal + open (each byte tagged once and checked once)");
    ums_rec_emit(&rec);
    ums_rec_begin(&rec, "mac_frame_path_time", (med - 2 * key_time) * 1e9, "ns");
    ums_rec_int(&rec, "payload_bytes", (long long)bytes);
    ums_rec_str(&rec, "what", "mac_frame_time - 2 x mac_key_time: seal + open with E_K(J0) made ahead");
    ums_rec_emit(&rec);
    free(data), free(t);
}

/* One frame's E_K(J0) (vcuda_aead_mask), the median of reps samples of iters. */
static double key_time(long long reps, long long iters)
{
    uint8_t key[VCUDA_KEY_SIZE], nonce[VCUDA_IV_SIZE] = {0}, mask[16];
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t || vcuda_random(key, sizeof key)) ums_fail("no memory or no random bytes");
    vcuda_gcm_key k;
    vcuda_gcm_init(&k, key);
    for (long long r = -1; r < reps; ++r) {
        double t0 = ums_now();
        for (long long i = 0; i < iters; ++i) {
            nonce[4] = (uint8_t)i, nonce[5] = (uint8_t)(i >> 8);
            vcuda_aead_mask(&k, nonce, mask);
            nonce[0] ^= mask[0]; /* each depends on the last: none can be skipped */
        }
        if (r >= 0) t[r] = (ums_now() - t0) / (double)iters;
    }
    double med = ums_median(t, (size_t)reps);
    ums_rec rec;
    ums_rec_begin(&rec, "mac_key_time", med * 1e9, "ns");
    ums_rec_num(&rec, "min", t[0] * 1e9);
    ums_rec_num(&rec, "max", t[reps - 1] * 1e9);
    ums_rec_str(&rec, "what", "one frame's E_K(J0) (an AES-256 block), made ahead");
    ums_rec_emit(&rec);
    free(t);
    return med;
}

/* ---- round trips ------------------------------------------------------------------- */

static volatile sig_atomic_t stop_flag;
static void on_term(int s) { (void)s; stop_flag = 1; }

#define REPLY_CHUNK (1u << 20) /* vcuda-server's default --chunk-kib */

static int handle(void *ctx, vcuda_conn *c, const vcuda_msg *req, vcuda_msg *r, char *why)
{
    static uint8_t out[REPLY_CHUNK]; /* only read: its bytes are whatever they are */
    (void)ctx;
    if (req->hdr.opcode == VCUDA_OP_MEMCPY_H2D) return 0; /* the bytes arrived: dropped */
    if (req->hdr.opcode == VCUDA_OP_MEMCPY_D2H) { /* in reply chunks, the last one the reply */
        uint64_t size = req->v[1];
        for (;;) {
            r->blob = out, r->blob_len = (uint32_t)(size < REPLY_CHUNK ? size : REPLY_CHUNK);
            size -= r->blob_len;
            if (size == 0) return 0;
            if (vcuda_send_more(c, req, r, why)) return -1;
            memset(r, 0, sizeof *r);
        }
    }
    vcuda_reply_error(r, 801, "vcuda-mac-bench: not served here");
    return 0;
}

/* One copy of `bytes` (MEMCPY_H2D, MEMCPY_D2H or SINK) through the client core. */
static void copy(int op, uint8_t *buf, size_t bytes, const char *name)
{
    vcuda_msg m, rep;
    vcuda_client_status s;
    char why[VCUDA_WHY_LEN];
    memset(&m, 0, sizeof m);
    m.hdr.opcode = (uint16_t)op;
    if (op == VCUDA_OP_MEMCPY_D2H) {
        m.v[0] = 0x7f0000000000ull, m.v[1] = bytes, m.nv = 3;
        s = vcuda_client_recv_chunks(0, &m, buf, bytes, &rep, why);
    } else {
        if (op == VCUDA_OP_MEMCPY_H2D) m.v[0] = 0x7f0000000000ull, m.nv = 2;
        s = vcuda_client_send_chunks(0, &m, 0, buf, bytes, vcuda_client_chunk(), &rep, why);
    }
    if (s) ums_fail("%s: %s", name, why);
}

static void bulk(long long reps, size_t bytes)
{
    static const struct { int op; const char *name; } dirs[] = {
        {VCUDA_OP_MEMCPY_H2D, "H2D"}, {VCUDA_OP_MEMCPY_D2H, "D2H"}, {VCUDA_OP_SINK, "transport"}};
    uint8_t *buf = malloc(bytes);
    double *t = malloc((size_t)reps * sizeof *t);
    if (!buf || !t) ums_fail("out of memory");
    for (size_t i = 0; i < bytes; ++i) buf[i] = (uint8_t)(i * 131);
    for (size_t d = 0; d < sizeof dirs / sizeof *dirs; ++d) {
        for (long long r = -1; r < reps; ++r) {
            double t0 = ums_now();
            copy(dirs[d].op, buf, bytes, dirs[d].name);
            if (r >= 0) t[r] = ums_now() - t0;
        }
        double med = ums_median(t, (size_t)reps);
        ums_rec rec;
        ums_rec_begin(&rec, "bulk_bandwidth", (double)bytes / med / 1e9, "GB/s");
        ums_rec_str(&rec, "dir", dirs[d].name);
        ums_rec_int(&rec, "bytes", (long long)bytes);
        ums_rec_int(&rec, "chunk", (long long)vcuda_client_chunk());
        ums_rec_num(&rec, "min", (double)bytes / t[reps - 1] / 1e9);
        ums_rec_num(&rec, "max", (double)bytes / t[0] / 1e9);
        ums_rec_int(&rec, "proto_version", VCUDA_PROTO_VERSION);
        ums_rec_emit(&rec);
    }
    free(buf), free(t);
}

static double calls(int op, size_t bytes, long long reps, long long n, const char *name)
{
    static uint8_t buf[1 << 16];
    double *t = malloc((size_t)reps * sizeof *t);
    char why[VCUDA_WHY_LEN];
    if (!t) ums_fail("out of memory");
    for (long long r = -1; r < reps; ++r) {
        double t0 = ums_now();
        for (long long i = 0; i < n; ++i) {
            if (op != VCUDA_OP_PING) {
                copy(op, buf, bytes, name);
                continue;
            }
            vcuda_msg m, rep;
            memset(&m, 0, sizeof m);
            m.hdr.opcode = (uint16_t)op;
            if (vcuda_client_call(0, &m, &rep, 0, why)) ums_fail("%s: %s", name, why);
        }
        if (r >= 0) t[r] = (ums_now() - t0) / (double)n;
    }
    double med = ums_median(t, (size_t)reps);
    ums_rec rec;
    ums_rec_begin(&rec, "call_time", med * 1e6, "us");
    ums_rec_str(&rec, "call", name);
    ums_rec_int(&rec, "bytes", (long long)bytes);
    ums_rec_num(&rec, "min", t[0] * 1e6);
    ums_rec_num(&rec, "max", t[reps - 1] * 1e6);
    ums_rec_int(&rec, "proto_version", VCUDA_PROTO_VERSION);
    ums_rec_emit(&rec);
    free(t);
    return med;
}

static void round_trips(const char *what, long long reps, long long n, long long spin_us, long long bulk_reps,
                        size_t bulk_bytes)
{
    char why[VCUDA_WHY_LEN], servers[64];
    uint16_t port;
    int lfd = vcuda_listen(NULL, 0, &port, why);
    if (lfd < 0) ums_fail("listen: %s", why);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) ums_fail("fork failed");
    if (pid == 0) {
        signal(SIGTERM, on_term);
        struct vcuda_handler h = {NULL, handle, NULL, NULL};
        vcuda_server_config cfg = {.listen_fd = lfd, .token = (const uint8_t *)TOKEN, .token_len = strlen(TOKEN),
                                   .frame_timeout_ms = 5000, .handler = &h, .stop = &stop_flag,
                                   .log_prefix = "vcuda-mac-bench server", .spin_us = (int)spin_us};
        _exit(vcuda_server_run(&cfg) ? 1 : 0);
    }
    close(lfd);
    char spin[32];
    snprintf(servers, sizeof servers, "127.0.0.1:%u", (unsigned)port);
    snprintf(spin, sizeof spin, "%lld", spin_us);
    setenv("VCUDA_SERVERS", servers, 1);
    setenv("VCUDA_TOKEN", TOKEN, 1);
    setenv("VCUDA_SPIN_US", spin, 1);
    unsetenv("VCUDA_KEEPALIVE_MS");
    unsetenv("VCUDA_SPARES");
    if (vcuda_client_open(why) || vcuda_client_device_count() != 1) {
        kill(pid, SIGTERM);
        ums_fail("client: %s", vcuda_client_device_count() ? why : "the server did not answer");
    }
    if (strcmp(what, "bulk")) {
        calls(VCUDA_OP_PING, 0, reps, n, "ping");
        calls(VCUDA_OP_MEMCPY_H2D, 8, reps, n, "h2d");
        calls(VCUDA_OP_MEMCPY_H2D, 1024, reps, n, "h2d");
        calls(VCUDA_OP_MEMCPY_D2H, 8, reps, n, "d2h");
        calls(VCUDA_OP_MEMCPY_D2H, 1024, reps, n, "d2h");
    }
    if (strcmp(what, "calls")) bulk(bulk_reps, bulk_bytes);
    vcuda_client_close();
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
}

int main(int argc, char **argv)
{
    long long reps = 101, iters = 2000, n = 200, spin_us = 200, bulk_reps = 21, bulk_mib = 64;
    const char *sizes = "8,1024,65536,1048576", *what = "all";
    const ums_arg args[] = {
        {"reps", UMS_ARG_INT, &reps, "samples per measurement (median)", 5, 100000, NULL},
        {"iters", UMS_ARG_INT, &iters, "frames tagged and checked per sample", 1, 100000000, NULL},
        {"calls", UMS_ARG_INT, &n, "round trips per sample", 1, 1000000, NULL},
        {"sizes", UMS_ARG_STRING, &sizes, "payload bytes of the tagged frames, comma-separated", 0, 0, NULL},
        {"spin-us", UMS_ARG_INT, &spin_us, "client's and server's busy-wait for the next frame (VCUDA_SPIN_US)", 0,
         100000, NULL},
        {"bulk-reps", UMS_ARG_INT, &bulk_reps, "copies per bulk direction (median)", 5, 100000, NULL},
        {"bulk-mib", UMS_ARG_INT, &bulk_mib, "MiB per bulk copy", 1, 4096, NULL},
        {"what", UMS_ARG_CHOICE, &what, "which measurements (calls: round trips, bulk: large copies)", 0, 0,
         "all|mac|calls|bulk"},
    };
    ums_args_parse(argc, argv, "vcuda-mac-bench: the cost of vcuda's frame tags (CPU only)", args,
                   sizeof args / sizeof *args);
    double sz[16];
    int nsz = ums_parse_numbers(sizes, sz, 16, 0, VCUDA_MAX_CHUNK);
    if (nsz < 0) ums_usage_fail("--sizes '%s': comma-separated byte counts in [0, %u]", sizes, VCUDA_MAX_CHUNK);
    signal(SIGPIPE, SIG_IGN);
    ums_json_init("vcuda-mac-bench");
    ums_param_int("reps", reps);
    ums_param_int("proto_version", VCUDA_PROTO_VERSION);
    ums_param_str("mac_impl", vcuda_mac_impl());
    if (!strcmp(what, "all") || !strcmp(what, "mac")) {
        double kt = key_time(reps, iters);
        for (int i = 0; i < nsz; ++i) {
            long long k = sz[i] > 1024 ? (long long)((double)iters * 1024 / sz[i]) : iters;
            frame_time((size_t)sz[i], reps, k < 5 ? 5 : k, kt);
        }
    }
    if (strcmp(what, "mac")) round_trips(what, reps, n, spin_us, bulk_reps, (size_t)bulk_mib << 20);
    return 0;
}
