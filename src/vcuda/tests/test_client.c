/* CPU-only tests of the vcuda client core: `vcuda_client_test CASE`.  Servers are the
 * real server loop in forked children on ephemeral 127.0.0.1 ports with a tiny handler
 * (GET_DEVICE -> the server's index); PINGs answered are counted in shared memory. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "vcuda/client.h"
#include "vcuda/server_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vcuda_test.h"

#define TIMEOUT_MS 300
static const char TOKEN[] = "client-test-token";
static char why[VCUDA_WHY_LEN];
static volatile sig_atomic_t stop_flag;
static void on_term(int s) { (void)s; stop_flag = 1; }

/* The chunked-copy cases address this buffer of the child by offset: what is tested is
 * the framing (chunks, MORE, one reply, error at the end), not a GPU. */
#define STORE_BYTES (4u << 20)
static uint8_t store[STORE_BYTES];
static int store_error;

static int t_handle(void *ctx, vcuda_conn *c, const vcuda_msg *req, vcuda_msg *r, char *w)
{
    if (req->hdr.opcode == VCUDA_OP_GET_DEVICE) {
        r->v[0] = (uint64_t)(intptr_t)ctx, r->nv = 1;
        return 0;
    }
    if (req->hdr.opcode == VCUDA_OP_MEMCPY_H2D) {
        if (req->v[0] > STORE_BYTES || req->blob_len > STORE_BYTES - req->v[0]) store_error = 1;
        else memcpy(store + req->v[0], req->blob, req->blob_len);
        if (!(req->hdr.flags & VCUDA_FLAG_MORE) && store_error)
            store_error = 0, vcuda_reply_error(r, 1, "test: chunk outside the store");
        return 0;
    }
    if (req->hdr.opcode == VCUDA_OP_MEMCPY_D2H) { /* 64 KiB chunks; never past the store */
        uint64_t off = req->v[0], end = req->v[0] + req->v[1];
        if (end > STORE_BYTES) end = STORE_BYTES; /* short: the client must notice */
        while (end - off > (64u << 10)) {
            r->blob = store + off, r->blob_len = 64u << 10;
            if (vcuda_send_more(c, req, r, w)) return -1;
            memset(r, 0, sizeof *r);
            off += 64u << 10;
        }
        r->blob = store + off, r->blob_len = (uint32_t)(end - off);
        return 0;
    }
    vcuda_reply_error(r, 801, "test: not implemented");
    return 0;
}

typedef struct {
    pid_t pid;
    uint16_t port;
    volatile uint64_t *pings; /* shared with the child */
} server;

static int idle_timeout_ms; /* the servers' --idle-timeout-s, in ms (0: none) */
static int frame_tags_off;  /* the servers' --frame-tags off */
static int spin_us, nap_us, nap_ms; /* the servers' --spin-us, --nap-us, --nap-ms */

static void start(server *s, int index)
{
    int lfd = vcuda_listen(NULL, 0, &s->port, why);
    if (lfd < 0) fprintf(stderr, "listen: %s\n", why), exit(1);
    s->pings = mmap(NULL, sizeof *s->pings, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s->pings == MAP_FAILED) perror("mmap"), exit(1);
    fflush(NULL);
    s->pid = fork();
    if (s->pid == 0) {
        signal(SIGTERM, on_term);
        struct vcuda_handler h = {(void *)(intptr_t)index, t_handle, NULL, NULL};
        vcuda_server_config cfg = {.listen_fd = lfd, .token = (const uint8_t *)TOKEN,
                                   .token_len = strlen(TOKEN), .device = 0,
                                   .frame_timeout_ms = TIMEOUT_MS, .max_conns = 16,
                                   .handler = &h, .stop = &stop_flag, .log_prefix = "srv",
                                   .pings = s->pings, .idle_timeout_ms = idle_timeout_ms,
                                   .frame_tags_off = frame_tags_off, .spin_us = spin_us,
                                   .nap_us = nap_us, .nap_ms = nap_ms};
        _exit(vcuda_server_run(&cfg) ? 1 : 0);
    }
    close(lfd);
}

static void finish(server *s)
{
    kill(s->pid, SIGCONT);
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    munmap((void *)s->pings, sizeof *s->pings);
}

static uint16_t dead_port(void)
{
    uint16_t port;
    close(vcuda_listen(NULL, 0, &port, why));
    return port;
}

/* Sets VCUDA_SERVERS from ports (0: a dead one) and opens; stderr of open into log. */
static int open_with(const char *servers, const char *spares, char *log, size_t cap)
{
    setenv("VCUDA_SERVERS", servers, 1);
    if (spares) setenv("VCUDA_SPARES", spares, 1);
    else unsetenv("VCUDA_SPARES");
    char path[] = "vcuda-client-test-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    int rc = vcuda_client_open(why);
    fflush(stderr);
    dup2(saved, 2), close(saved);
    ssize_t n = pread(fd, log, cap - 1, 0);
    log[n > 0 ? n : 0] = 0;
    close(fd), unlink(path);
    fprintf(stderr, "open -> %d (%s); stderr:\n%s", rc, rc ? why : "", log);
    return rc;
}

static vcuda_client_status call(int dev, unsigned op, vcuda_msg *r)
{
    vcuda_msg m;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = (uint16_t)op;
    return vcuda_client_call(dev, &m, r, 0, why);
}

static void device_map(void)
{
    server a, b, sp;
    char list[256], spares[64], log[4096];
    start(&a, 10), start(&b, 11), start(&sp, 12);
    uint16_t dead = dead_port();
    snprintf(list, sizeof list, "127.0.0.1:%u,localhost:%u,127.0.0.1:%u", a.port, dead, b.port);
    snprintf(spares, sizeof spares, "127.0.0.1:%u", sp.port);
    CHECK(open_with(list, spares, log, sizeof log) == 0);
    CHECK(vcuda_client_device_count() == 3);
    char expect[160];
    snprintf(expect, sizeof expect, "vcuda: server localhost:%u (device 1) unreachable: ", dead);
    CHECK(strstr(log, expect) && strstr(log, "refused"));
    snprintf(expect, sizeof expect, "; using spare 127.0.0.1:%u\n", sp.port);
    CHECK(strstr(log, expect));
    vcuda_msg r;
    int want[] = {10, 12, 11};
    for (int i = 0; i < 3; ++i) CHECK(call(i, VCUDA_OP_GET_DEVICE, &r) == VCUDA_CLIENT_OK && r.v[0] == (uint64_t)want[i]);
    CHECK(call(3, VCUDA_OP_PING, &r) == VCUDA_CLIENT_BAD_DEVICE);
    /* no spare left: the dead entry is dropped, the rest renumbered densely */
    CHECK(open_with(list, NULL, log, sizeof log) == 0);
    CHECK(vcuda_client_device_count() == 2 && strstr(log, "; device dropped\n"));
    CHECK(call(1, VCUDA_OP_GET_DEVICE, &r) == VCUDA_CLIENT_OK && r.v[0] == 11);
    vcuda_client_close();
    finish(&a), finish(&b), finish(&sp);
}

static void bad_servers(void)
{
    char log[1024];
    CHECK(open_with("127.0.0.1:1,nohostport,127.0.0.1:2", NULL, log, sizeof log) < 0 &&
          strstr(why, "entry 2 'nohostport'"));
    CHECK(open_with("127.0.0.1:1,,127.0.0.1:2", NULL, log, sizeof log) < 0 && strstr(why, "entry 2 is empty"));
    CHECK(open_with("h:99999", NULL, log, sizeof log) < 0 && strstr(why, "'h:99999'"));
    CHECK(open_with("h:1", "h:x", log, sizeof log) < 0 && strstr(why, "VCUDA_SPARES entry 1 'h:x'"));
    setenv("VCUDA_TIMEOUT_MS", "0", 1);
    CHECK(open_with("h:1", NULL, log, sizeof log) < 0 && strstr(why, "VCUDA_TIMEOUT_MS"));
    unsetenv("VCUDA_SERVERS");
    CHECK(vcuda_client_open(why) < 0 && strstr(why, "VCUDA_SERVERS is not set"));
}

static void round_trip(void)
{
    server a;
    char list[64], log[1024];
    vcuda_msg r;
    start(&a, 7);
    snprintf(list, sizeof list, "127.0.0.1:%u", a.port);
    CHECK(open_with(list, NULL, log, sizeof log) == 0 && vcuda_client_device_count() == 1 && !log[0]);
    for (int i = 0; i < 50; ++i) CHECK(call(0, VCUDA_OP_GET_DEVICE, &r) == VCUDA_CLIENT_OK && r.v[0] == 7);
    CHECK(call(0, VCUDA_OP_DEVICE_SYNCHRONIZE, &r) == VCUDA_CLIENT_REMOTE_ERROR && r.v[0] == 801);
    CHECK(call(0, VCUDA_OP_PING, &r) == VCUDA_CLIENT_OK); /* still usable after an error reply */
    vcuda_client_close();
    finish(&a);
}

/* A server that dies (SIGKILL) or stalls (SIGSTOP) mid-session. */
static void failure(int sig)
{
    server a;
    char list[64], log[1024];
    vcuda_msg r;
    start(&a, 0);
    snprintf(list, sizeof list, "127.0.0.1:%u", a.port);
    CHECK(open_with(list, NULL, log, sizeof log) == 0);
    CHECK(call(0, VCUDA_OP_PING, &r) == VCUDA_CLIENT_OK);
    kill(a.pid, sig);
    if (sig == SIGKILL) waitpid(a.pid, NULL, 0);
    else wait_stopped(a.pid);
    int64_t t0 = vcuda_now_ms();
    vcuda_client_status s = call(0, VCUDA_OP_GET_DEVICE, &r);
    CHECK(s == VCUDA_CLIENT_UNAVAILABLE && vcuda_client_cuda_error(s) == 46);
    CHECK(vcuda_now_ms() - t0 <= 2 * TIMEOUT_MS); /* bounded (slack for a loaded CI box) */
    if (sig == SIGSTOP) CHECK(strstr(why, "timed out"));
    t0 = vcuda_now_ms();
    for (int i = 0; i < 10; ++i) CHECK(call(0, VCUDA_OP_PING, &r) == VCUDA_CLIENT_UNAVAILABLE);
    CHECK(vcuda_now_ms() - t0 < TIMEOUT_MS / 2 && strstr(why, "lost earlier")); /* fail fast, no timeouts */
    vcuda_client_close();
    if (sig == SIGKILL) munmap((void *)a.pings, sizeof *a.pings);
    else finish(&a);
}

/* Copies in chunks both ways: data intact, one reply per chunked request, a failed
 * chunk reported at the end with the connection still usable, a short reply caught. */
static void chunked(void)
{
    server a;
    char list[64], log[1024];
    static uint8_t out[STORE_BYTES], in[STORE_BYTES];
    vcuda_msg m, r;
    start(&a, 0);
    snprintf(list, sizeof list, "127.0.0.1:%u", a.port);
    CHECK(open_with(list, NULL, log, sizeof log) == 0);
    for (size_t i = 0; i < sizeof out; ++i) out[i] = (uint8_t)(i * 7 + i / 4096);
    const uint64_t n = (3u << 20) + 17; /* not a multiple of either side's chunk */
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_H2D;
    m.v[0] = 100, m.v[1] = 0, m.nv = 2;
    CHECK(vcuda_client_send_chunks(0, &m, 0, out, n, 256u << 10, &r, why) == VCUDA_CLIENT_OK);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_D2H;
    m.v[0] = 100, m.v[1] = n, m.v[2] = 0, m.nv = 3;
    CHECK(vcuda_client_recv_chunks(0, &m, in, n, &r, why) == VCUDA_CLIENT_OK);
    CHECK(memcmp(in, out, n) == 0);
    /* the middle chunk fails; the error arrives with the reply to the last */
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_H2D;
    m.v[0] = STORE_BYTES - (1u << 20), m.nv = 2;
    CHECK(vcuda_client_send_chunks(0, &m, 0, out, 3u << 20, 1u << 20, &r, why) == VCUDA_CLIENT_REMOTE_ERROR &&
          r.v[0] == 1);
    CHECK(call(0, VCUDA_OP_PING, &r) == VCUDA_CLIENT_OK);
    /* the server sends less than asked: a broken server, the device is lost */
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_D2H;
    m.v[0] = STORE_BYTES - 1000, m.v[1] = 2000, m.nv = 3;
    CHECK(vcuda_client_recv_chunks(0, &m, in, 2000, &r, why) == VCUDA_CLIENT_UNAVAILABLE &&
          strstr(why, "sent 1000 of 2000 bytes"));
    vcuda_client_close();
    finish(&a);
}

/* Against a server started by test_ucx.py at `endpoint` (ucx://...): calls, error
 * replies, chunked SINKs of 64 MiB, and many round trips. */
static void remote_session(const char *endpoint)
{
    char log[1024];
    static uint8_t data[64u << 20];
    vcuda_msg m, r;
    CHECK(open_with(endpoint, NULL, log, sizeof log) == 0 && vcuda_client_device_count() == 1);
    CHECK(call(0, VCUDA_OP_GET_DEVICE_COUNT, &r) == VCUDA_CLIENT_OK && r.v[0] == 3);
    CHECK(call(0, VCUDA_OP_DEVICE_SYNCHRONIZE, &r) == VCUDA_CLIENT_REMOTE_ERROR && r.v[0] == 801);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_SINK;
    for (size_t i = 0; i < sizeof data; ++i) data[i] = (uint8_t)i;
    for (size_t chunk = 256u << 10; chunk <= (4u << 20); chunk *= 4) {
        int64_t t0 = vcuda_now_ms();
        CHECK(vcuda_client_send_chunks(0, &m, 0, data, sizeof data, chunk, &r, why) == VCUDA_CLIENT_OK);
        fprintf(stderr, "64 MiB SINK in %zu KiB chunks: %lld ms\n", chunk >> 10, (long long)(vcuda_now_ms() - t0));
    }
    for (int i = 0; i < 200; ++i) CHECK(call(0, VCUDA_OP_PING, &r) == VCUDA_CLIENT_OK);
    vcuda_client_close();
}

/* The server at `endpoint` was killed: the start-up check drops it, promptly. */
static void remote_dead(const char *endpoint)
{
    char log[1024];
    int64_t t0 = vcuda_now_ms();
    CHECK(open_with(endpoint, NULL, log, sizeof log) == 0 && vcuda_client_device_count() == 0);
    CHECK(strstr(log, "device dropped") != NULL);
    CHECK(vcuda_now_ms() - t0 <= 3 * TIMEOUT_MS);
    vcuda_client_close();
}

static void keepalive(void)
{
    server a;
    char list[64], log[1024];
    start(&a, 0);
    snprintf(list, sizeof list, "127.0.0.1:%u", a.port);
    for (int on = 0; on < 2; ++on) {
        if (on) setenv("VCUDA_KEEPALIVE_MS", "20", 1);
        else unsetenv("VCUDA_KEEPALIVE_MS");
        CHECK(open_with(list, NULL, log, sizeof log) == 0);
        uint64_t before = *a.pings; /* the health check's PING is already counted */
        poll(NULL, 0, 200);
        uint64_t n = *a.pings - before;
        fprintf(stderr, "keep-alive %s: %llu PINGs in 200 ms idle\n", on ? "20 ms" : "off", (unsigned long long)n);
        CHECK(on ? n >= 4 && n <= 20 : n == 0);
        vcuda_client_close();
    }
    finish(&a);
}

/* Sessions without frame tags where both ends say so: calls, pipelined chunks both ways
 * and a small frame after a large one (nothing read past a frame); either end alone asking
 * for it is refused by name. */
static void tags_off(void)
{
    static uint8_t out[STORE_BYTES], in[STORE_BYTES];
    char list[64], log[1024];
    vcuda_msg m, r;
    for (int server_off = 1; server_off >= 0; --server_off) {
        server a;
        frame_tags_off = server_off;
        start(&a, 0);
        snprintf(list, sizeof list, "127.0.0.1:%u", a.port);
        for (int client_off = 1; client_off >= 0; --client_off) {
            setenv("VCUDA_FRAME_TAGS", client_off ? "off" : "on", 1);
            int rc = open_with(list, NULL, log, sizeof log);
            if (client_off != server_off) { /* refused, saying why: the device is dropped */
                CHECK(vcuda_client_device_count() == 0 && strstr(log, "frame tags"));
                vcuda_client_close();
                continue;
            }
            CHECK(rc == 0);
            if (rc) continue;
            if (server_off) {
                for (size_t i = 0; i < sizeof out; ++i) out[i] = (uint8_t)(i * 13 + i / 1000);
                const uint64_t n = (3u << 20) + 5;
                memset(&m, 0, sizeof m);
                m.hdr.opcode = VCUDA_OP_MEMCPY_H2D;
                m.v[0] = 64, m.v[1] = 0, m.nv = 2;
                CHECK(vcuda_client_send_chunks(0, &m, 0, out, n, 256u << 10, &r, why) == VCUDA_CLIENT_OK);
                CHECK(call(0, VCUDA_OP_PING, &r) == VCUDA_CLIENT_OK);
                memset(&m, 0, sizeof m);
                m.hdr.opcode = VCUDA_OP_MEMCPY_D2H;
                m.v[0] = 64, m.v[1] = n, m.v[2] = 0, m.nv = 3;
                CHECK(vcuda_client_recv_chunks(0, &m, in, n, &r, why) == VCUDA_CLIENT_OK);
                CHECK(memcmp(in, out, n) == 0);
                for (int i = 0; i < 100; ++i) CHECK(call(0, VCUDA_OP_GET_DEVICE, &r) == VCUDA_CLIENT_OK);
            }
            vcuda_client_close();
        }
        setenv("VCUDA_FRAME_TAGS", "sometimes", 1);
        open_with(list, NULL, log, sizeof log);
        CHECK(vcuda_client_device_count() == 0 && strstr(log, "VCUDA_FRAME_TAGS=sometimes: expected on or off"));
        vcuda_client_close();
        finish(&a);
    }
    unsetenv("VCUDA_FRAME_TAGS");
    frame_tags_off = 0;
}

/* A server closing sessions idle 600 ms: a client left idle 1.5 s keeps its session with
 * an idle PING every 150 ms, and loses it (the next call fails) without. */
static void idle_ping(void)
{
    server a;
    char list[64], log[1024];
    vcuda_msg r;
    idle_timeout_ms = 600;
    start(&a, 0);
    snprintf(list, sizeof list, "127.0.0.1:%u", a.port);
    for (int on = 1; on >= 0; --on) {
        setenv("VCUDA_IDLE_PING_MS", on ? "150" : "0", 1);
        CHECK(open_with(list, NULL, log, sizeof log) == 0);
        poll(NULL, 0, 1500);
        vcuda_client_status st = call(0, VCUDA_OP_GET_DEVICE, &r);
        fprintf(stderr, "idle ping %s: a call after 1.5 s idle -> %d (%s)\n", on ? "150 ms" : "off", (int)st,
                st ? why : "ok");
        CHECK(on ? st == VCUDA_CLIENT_OK : st != VCUDA_CLIENT_OK);
        vcuda_client_close();
    }
    unsetenv("VCUDA_IDLE_PING_MS");
    finish(&a);
}

/* VCUDA_STATS / vcuda_client_get_stats: a call, a chunked copy either way and a read
 * each one round trip, posts counted apart, the keep-alive's own round trips apart from
 * the program's; the line on stderr at close says the same. */
static void stats(void)
{
    static uint8_t buf[3u << 20];
    server a;
    char list[64], log[1024];
    vcuda_msg m, r;
    vcuda_client_stats t;
    start(&a, 0);
    snprintf(list, sizeof list, "127.0.0.1:%u", a.port);
    setenv("VCUDA_STATS", "1", 1);
    CHECK(open_with(list, NULL, log, sizeof log) == 0);
    CHECK(vcuda_client_get_stats(0, &t) == 0 && t.round_trips == 0 && t.posts == 0); /* the health check is not the program's */
    CHECK(vcuda_client_get_stats(1, &t) == -1);
    for (int i = 0; i < 5; ++i) CHECK(call(0, VCUDA_OP_GET_DEVICE, &r) == VCUDA_CLIENT_OK);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_H2D;
    m.v[0] = 0, m.nv = 2;
    CHECK(vcuda_client_send_chunks(0, &m, 0, buf, sizeof buf, 256u << 10, &r, why) == VCUDA_CLIENT_OK); /* 12 frames */
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_D2H;
    m.v[0] = 0, m.v[1] = 1u << 20, m.nv = 3;
    CHECK(vcuda_client_recv_chunks(0, &m, buf, 1u << 20, &r, why) == VCUDA_CLIENT_OK); /* 16 frames back */
    const uint32_t arg = 0;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_LAUNCH; /* (the test server answers no GPU request: posted, nothing comes back) */
    m.nv = 9, m.nsizes = 1, m.sizes[0] = 4, m.blob = (const uint8_t *)&arg, m.blob_len = 4;
    for (int i = 1; i <= 6; ++i) m.v[i] = 1; /* grid and block */
    for (int i = 0; i < 2; ++i) CHECK(vcuda_client_post(0, &m, why) == VCUDA_CLIENT_OK);
    CHECK(call(0, VCUDA_OP_PING, &r) == VCUDA_CLIENT_OK);
    CHECK(vcuda_client_get_stats(0, &t) == 0);
    fprintf(stderr, "stats: %llu round trips, %llu posts, %llu keep-alives, %llu bytes out, %llu back\n",
            (unsigned long long)t.round_trips, (unsigned long long)t.posts, (unsigned long long)t.keepalives,
            (unsigned long long)t.bytes_to_server, (unsigned long long)t.bytes_from_server);
    CHECK(t.round_trips == 8 && t.posts == 2 && t.keepalives == 0);
    CHECK(t.bytes_to_server == sizeof buf + 8 && t.bytes_from_server == 1u << 20);
    /* the line at close */
    char path[] = "vcuda-client-test-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    vcuda_client_close();
    fflush(stderr);
    dup2(saved, 2), close(saved);
    ssize_t n = pread(fd, log, sizeof log - 1, 0);
    log[n > 0 ? n : 0] = 0;
    close(fd), unlink(path);
    fprintf(stderr, "at close: %s", log);
    CHECK(strstr(log, "\"metric\":\"round_trips\",\"value\":8,") && strstr(log, "\"posts\":2,"));
    /* the keep-alive's round trips are its own */
    setenv("VCUDA_KEEPALIVE_MS", "20", 1);
    unsetenv("VCUDA_STATS");
    CHECK(open_with(list, NULL, log, sizeof log) == 0);
    poll(NULL, 0, 200);
    CHECK(vcuda_client_get_stats(0, &t) == 0 && t.round_trips == 0 && t.keepalives >= 4);
    vcuda_client_close();
    unsetenv("VCUDA_KEEPALIVE_MS");
    finish(&a);
}

/* The server's CPU while its client idles with P003's 2 ms keep-alive, over `idle_ms`
 * (its whole life's CPU time, from wait4, over its life). */
static double idle_cpu_share(int idle_ms)
{
    server a;
    char list[64], log[1024];
    struct rusage ru;
    start(&a, 0);
    int64_t t0 = vcuda_now_ms();
    snprintf(list, sizeof list, "127.0.0.1:%u", a.port);
    setenv("VCUDA_KEEPALIVE_MS", "2", 1);
    CHECK(open_with(list, NULL, log, sizeof log) == 0);
    poll(NULL, 0, idle_ms);
    vcuda_client_close();
    unsetenv("VCUDA_KEEPALIVE_MS");
    kill(a.pid, SIGTERM);
    CHECK(wait4(a.pid, NULL, 0, &ru) == a.pid);
    munmap((void *)a.pings, sizeof *a.pings);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
                 (double)ru.ru_stime.tv_usec * 1e-6;
    return cpu / ((double)(vcuda_now_ms() - t0) / 1000.0);
}

/* The adaptive wait (vcuda-server --nap-us): a server whose client only sends the 2 ms
 * keep-alive stays within 5% of a core with the default nap, and with a nap far too short
 * for this machine (25 us, which alone costs the 2-core CI VM a fifth of a core: 50 us 12%,
 * 100 us 8%, 200 us 5%, 400 us 3%, and the former 200 us spin after every keep-alive 8%):
 * the worker lengthens its naps until they fit.  Spinning through the gaps (--spin-us
 * 100000, naps off) is measured the same way and takes a large share of a core (all of
 * one on an idle machine), so the measurement can tell them apart. */
static void nap_cpu(void)
{
    spin_us = 200, nap_us = VCUDA_NAP_US_DEFAULT, nap_ms = 100;
    double napping = idle_cpu_share(1500);
    nap_us = 25;
    double short_naps = idle_cpu_share(1500);
    spin_us = 100000, nap_us = 0;
    double spinning = idle_cpu_share(1500);
    fprintf(stderr, "server CPU with a 2 ms keep-alive only: %.1f%% napping (%d us), %.1f%% from 25 us naps, "
            "%.1f%% spinning\n", 100 * napping, VCUDA_NAP_US_DEFAULT, 100 * short_naps, 100 * spinning);
    CHECK(napping <= 0.05);
    CHECK(short_naps <= 0.05);
    CHECK(spinning >= 0.1 && spinning >= 3 * napping);
    spin_us = nap_us = nap_ms = 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) return fprintf(stderr, "usage: %s CASE\n", argv[0]), 2;
    /* remote_* cases talk to test_net's server, whose token test_ucx.py passes on */
    const char *tok = getenv("VCUDA_TEST_TOKEN");
    setenv("VCUDA_TOKEN", tok && *tok ? tok : TOKEN, 1);
    unsetenv("VCUDA_KEEPALIVE_MS");
    char t[16];
    snprintf(t, sizeof t, "%d", TIMEOUT_MS);
    setenv("VCUDA_TIMEOUT_MS", t, 1);
    const char *c = argv[1];
    if (!strcmp(c, "device_map")) device_map();
    else if (!strcmp(c, "bad_servers")) bad_servers();
    else if (!strcmp(c, "round_trip")) round_trip();
    else if (!strcmp(c, "killed")) failure(SIGKILL);
    else if (!strcmp(c, "stopped")) failure(SIGSTOP);
    else if (!strcmp(c, "keepalive")) keepalive();
    else if (!strcmp(c, "idle_ping")) idle_ping();
    else if (!strcmp(c, "tags_off")) tags_off();
    else if (!strcmp(c, "chunked")) chunked();
    else if (!strcmp(c, "stats")) stats();
    else if (!strcmp(c, "nap_cpu")) nap_cpu();
    else if (!strcmp(c, "remote_session") && argc > 2) remote_session(argv[2]);
    else if (!strcmp(c, "remote_dead") && argc > 2) remote_dead(argv[2]);
    else return fprintf(stderr, "unknown case %s\n", c), 2;
    return failures ? 1 : 0;
}
