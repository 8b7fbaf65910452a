/* CPU-only tests of the vcuda TCP transport and server loop: `vcuda_net_test CASE
 * [vcuda-server path]`.  The loop runs in a forked child on an ephemeral 127.0.0.1
 * port with a test handler (GET_DEVICE_COUNT -> 3), its stderr in a log file the
 * tests read back to check that each rejection was logged with its reason. */
#define _POSIX_C_SOURCE 200809L
#include "vcuda/client.h"
#include "vcuda/server_loop.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vcuda_test.h"

#define TIMEOUT_MS 300
static const char TOKEN[] = "s3cret-test-token";
static char why[VCUDA_WHY_LEN];
static vcuda_buf buf;
static vcuda_session sessions[1024]; /* each connection's, by fd */
#define SES(fd) (&sessions[fd])

/* ---- server in a child process --------------------------------------------------- */

static volatile sig_atomic_t stop_flag;
static void on_term(int s) { (void)s; stop_flag = 1; }

static uint8_t pattern(uint64_t at) { return (uint8_t)(at * 7 + 1); }
/* copies through the relay go in chunks of this many bytes: more than a MAC portion, so
 * a chunk is tagged and checked in pieces (mac.h), and the relay alters a later piece */
#define RELAY_CHUNK (96u << 10)

static int t_handle(void *ctx, vcuda_conn *c, const vcuda_msg *req, vcuda_msg *r, char *w)
{
    (void)ctx;
    if (req->hdr.opcode == VCUDA_OP_GET_DEVICE_COUNT) {
        r->v[0] = 3, r->nv = 1;
        return 0;
    }
    if (req->hdr.opcode == VCUDA_OP_MEMCPY_D2H) { /* size bytes of pattern(src + i), RELAY_CHUNK a chunk */
        static _Thread_local uint8_t chunk[RELAY_CHUNK];
        uint64_t size = req->v[1], off = 0;
        for (;;) {
            uint32_t n = size - off < sizeof chunk ? (uint32_t)(size - off) : (uint32_t)sizeof chunk;
            for (uint32_t i = 0; i < n; ++i) chunk[i] = pattern(req->v[0] + off + i);
            r->blob = chunk, r->blob_len = n;
            if ((off += n) >= size) return 0; /* the last chunk is the reply */
            if (vcuda_send_more(c, req, r, w)) return -1;
            memset(r, 0, sizeof *r);
        }
    }
    if (req->hdr.opcode == VCUDA_OP_DEVICE_RESET) { /* a handler may close, with a reason */
        snprintf(w, VCUDA_WHY_LEN, "test handler closes on DEVICE_RESET");
        return -1;
    }
    vcuda_reply_error(r, 801, "test: not implemented");
    return 0;
}
static void t_disconnect(void *ctx, vcuda_conn *c)
{
    (void)ctx;
    fprintf(stderr, "test-handler: disconnect %s\n", c->peer);
}

typedef struct {
    pid_t pid;
    uint16_t port;
    char log[64];
} server;

static void start(server *s)
{
    int lfd = vcuda_listen(NULL, 0, &s->port, why);
    if (lfd < 0) fprintf(stderr, "listen: %s\n", why), exit(1);
    snprintf(s->log, sizeof s->log, "vcuda-net-test-%d.log", (int)getpid());
    int logfd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    fflush(NULL);
    s->pid = fork();
    if (s->pid == 0) {
        dup2(logfd, 2);
        signal(SIGTERM, on_term);
        struct vcuda_handler h = {NULL, t_handle, t_disconnect, NULL};
        vcuda_server_config cfg = {.listen_fd = lfd, .token = (const uint8_t *)TOKEN,
                                   .token_len = strlen(TOKEN), .device = 0,
                                   .frame_timeout_ms = TIMEOUT_MS, .max_conns = 16,
                                   .handler = &h, .stop = &stop_flag, .log_prefix = "srv"};
        _exit(vcuda_server_run(&cfg) ? 1 : 0);
    }
    close(logfd);
    close(lfd);
}

/* Stops the server and returns its log (static buffer); echoed for the ctest output. */
static const char *finish(server *s)
{
    static char text[16384];
    return stop_server_read_log(s->pid, s->log, text, sizeof text);
}

/* The test server in the foreground, for test_cudart.py and test_ucx.py: prints its
 * port, then serves until SIGTERM (a CPU-only peer for the stand-in's plumbing and the
 * UCX transport; "serve ucx" listens on ucx://127.0.0.1:0). */
static int serve(int ucx)
{
    uint16_t port;
    int lfd = vcuda_listen_ep(ucx, "127.0.0.1", 0, &port, why);
    if (lfd < 0) return fprintf(stderr, "listen: %s\n", why), 1;
    printf("%u\n", (unsigned)port);
    fflush(stdout);
    signal(SIGTERM, on_term);
    struct vcuda_handler h = {NULL, t_handle, t_disconnect, NULL};
    vcuda_server_config cfg = {.listen_fd = lfd, .token = (const uint8_t *)TOKEN,
                               .token_len = strlen(TOKEN), .device = 0,
                               .frame_timeout_ms = 5000, .max_conns = 16,
                               .handler = &h, .stop = &stop_flag, .log_prefix = "srv"};
    return vcuda_server_run(&cfg) ? 1 : 0;
}

/* A stand-in for vcuda-server where there is no GPU, for test_launch.py: the same
 * command line (--device N --listen [ucx://]ADDR:PORT), the token from VCUDA_TOKEN or
 * VCUDA_TOKEN_FILE, and the same "listening on" line on stderr. */
static int fake_server(int argc, char **argv)
{
    const char *ep = NULL, *dev = "0";
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--listen")) ep = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) dev = argv[i + 1];
    }
    char addr[256];
    uint16_t port;
    int ucx;
    uint8_t token[VCUDA_MAX_TOKEN];
    size_t token_len = 0;
    if (!ep || vcuda_parse_endpoint(ep, &ucx, addr, &port)) return fprintf(stderr, "fake server: --listen ADDR:PORT\n"), 2;
    if (vcuda_token_load(token, &token_len, why) != VCUDA_OK) return fprintf(stderr, "fake server: token: %s\n", why), 2;
    int lfd = vcuda_listen_ep(ucx, addr, port, &port, why);
    if (lfd < 0) return fprintf(stderr, "fake server: %s\n", why), 1;
    fprintf(stderr, "vcuda-server: device %s listening on %s%s:%u\n", dev, ucx ? "ucx://" : "", addr, (unsigned)port);
    signal(SIGTERM, on_term);
    struct vcuda_handler h = {NULL, t_handle, t_disconnect, NULL};
    vcuda_server_config cfg = {.listen_fd = lfd, .token = token, .token_len = token_len, .device = atoi(dev),
                               .frame_timeout_ms = 5000, .max_conns = 16,
                               .handler = &h, .stop = &stop_flag, .log_prefix = "fake-server"};
    return vcuda_server_run(&cfg) ? 1 : 0;
}

/* ---- client helpers -------------------------------------------------------------- */

static int request(int fd, unsigned op, vcuda_msg *m)
{
    static uint64_t id = 100;
    memset(m, 0, sizeof *m);
    m->hdr.opcode = (uint16_t)op;
    m->hdr.request_id = ++id;
    if (vcuda_send_frame(fd, SES(fd), m, &buf, TIMEOUT_MS, why)) return -1;
    vcuda_net_status s = vcuda_recv_frame(fd, SES(fd), m, &buf, 2 * TIMEOUT_MS, why);
    if (s) return -(int)s;
    CHECK(m->hdr.request_id == id && m->hdr.opcode == op && (m->hdr.flags & VCUDA_FLAG_REPLY));
    return 0;
}

static int connect_hello(uint16_t port)
{
    int fd = vcuda_connect("127.0.0.1", port, 1000, why);
    CHECK(fd >= 0);
    CHECK(fd >= 0 && fd < 1024);
    CHECK(vcuda_handshake(fd, NULL, (const uint8_t *)TOKEN, strlen(TOKEN), 1000, TIMEOUT_MS, &buf, NULL, SES(fd), why) == 0);
    return fd;
}

/* The server closed us: the next read is EOF (or reset), well before 3 timeouts. */
static void expect_closed(int fd)
{
    uint8_t b[64];
    int64_t t0 = vcuda_now_ms();
    vcuda_net_status s;
    while ((s = vcuda_read_all(fd, b, 1, 3 * TIMEOUT_MS, why)) == VCUDA_NET_OK) {}
    CHECK(s == VCUDA_NET_CLOSED || s == VCUDA_NET_IO);
    CHECK(vcuda_now_ms() - t0 < 3 * TIMEOUT_MS);
}

static void raw_header(uint8_t *h, unsigned op, uint32_t len)
{
    vcuda_msg m;
    size_t n;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_PING; /* empty payload: encodes to just the header */
    vcuda_encode(&m, h, VCUDA_HEADER_SIZE, &n, why);
    h[6] = (uint8_t)op, h[7] = (uint8_t)(op >> 8);
    for (int i = 0; i < 4; ++i) h[20 + i] = (uint8_t)(len >> (8 * i));
}

/* ---- cases ----------------------------------------------------------------------- */

static void good_client(void)
{
    server s;
    vcuda_msg m;
    start(&s);
    int fd = connect_hello(s.port);
    CHECK(request(fd, VCUDA_OP_PING, &m) == 0 && !(m.hdr.flags & VCUDA_FLAG_ERROR));
    CHECK(request(fd, VCUDA_OP_GET_DEVICE_COUNT, &m) == 0 && m.v[0] == 3);
    CHECK(request(fd, VCUDA_OP_DEVICE_SYNCHRONIZE, &m) == 0 && (m.hdr.flags & VCUDA_FLAG_ERROR) &&
          m.v[0] == 801);
    CHECK(request(fd, VCUDA_OP_DEVICE_RESET, &m) < 0); /* handler closed it */
    close(fd);
    fd = connect_hello(s.port); /* and the server still serves */
    close(fd);
    poll(NULL, 0, 100); /* let the server log the last disconnect */
    const char *log = finish(&s);
    CHECK(strstr(log, "authenticated"));
    CHECK(strstr(log, "closed: test handler closes on DEVICE_RESET"));
    /* disconnect ran for both authenticated connections */
    CHECK(strstr(log, "test-handler: disconnect") && strstr(strstr(log, "test-handler: disconnect") + 1, "test-handler: disconnect"));
}

/* SINK chunks (the transport benchmark) get one reply, after the last; MORE on a
 * request that is not a chunked copy closes the connection with the reason, as do
 * NOREPLY on one that is not a launch and SYNC anywhere but on an H2D copy's last chunk. */
static void chunked_requests(void)
{
    server s;
    vcuda_msg m, r;
    static uint8_t data[1u << 16];
    start(&s);
    int fd = connect_hello(s.port);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_SINK;
    m.hdr.request_id = 7;
    m.blob = data, m.blob_len = sizeof data;
    for (int i = 0; i < 5; ++i) {
        m.hdr.flags = i < 4 ? VCUDA_FLAG_MORE : 0;
        CHECK(vcuda_send_frame(fd, SES(fd), &m, &buf, TIMEOUT_MS, why) == VCUDA_NET_OK);
    }
    CHECK(vcuda_recv_frame(fd, SES(fd), &r, &buf, TIMEOUT_MS, why) == VCUDA_NET_OK && r.hdr.request_id == 7 &&
          r.hdr.opcode == VCUDA_OP_SINK && !(r.hdr.flags & (VCUDA_FLAG_ERROR | VCUDA_FLAG_MORE)));
    CHECK(request(fd, VCUDA_OP_PING, &r) == 0); /* exactly one reply: the next one is the PING's */
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_GET_DEVICE_COUNT;
    m.hdr.flags = VCUDA_FLAG_MORE;
    CHECK(vcuda_send_frame(fd, SES(fd), &m, &buf, TIMEOUT_MS, why) == VCUDA_NET_OK);
    expect_closed(fd);
    close(fd);
    fd = connect_hello(s.port); /* only a launch may go unanswered */
    m.hdr.flags = VCUDA_FLAG_NOREPLY;
    CHECK(vcuda_send_frame(fd, SES(fd), &m, &buf, TIMEOUT_MS, why) == VCUDA_NET_OK);
    expect_closed(fd);
    close(fd);
    fd = connect_hello(s.port); /* only an H2D copy's last chunk may be host-synchronous */
    m.hdr.flags = VCUDA_FLAG_SYNC;
    CHECK(vcuda_send_frame(fd, SES(fd), &m, &buf, TIMEOUT_MS, why) == VCUDA_NET_OK);
    expect_closed(fd);
    close(fd);
    fd = connect_hello(s.port);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_H2D;
    m.hdr.request_id = 8;
    m.nv = 2, m.blob = data, m.blob_len = 16;
    m.hdr.flags = VCUDA_FLAG_MORE;
    CHECK(vcuda_send_frame(fd, SES(fd), &m, &buf, TIMEOUT_MS, why) == VCUDA_NET_OK);
    m.hdr.flags = VCUDA_FLAG_SYNC; /* the last: taken (the test handler answers every copy 801) */
    CHECK(vcuda_send_frame(fd, SES(fd), &m, &buf, TIMEOUT_MS, why) == VCUDA_NET_OK);
    CHECK(vcuda_recv_frame(fd, SES(fd), &r, &buf, TIMEOUT_MS, why) == VCUDA_NET_OK && r.hdr.request_id == 8 &&
          (r.hdr.flags & VCUDA_FLAG_ERROR) && r.v[0] == 801);
    m.hdr.flags = VCUDA_FLAG_MORE | VCUDA_FLAG_SYNC;
    CHECK(vcuda_send_frame(fd, SES(fd), &m, &buf, TIMEOUT_MS, why) == VCUDA_NET_OK);
    expect_closed(fd);
    close(fd);
    const char *log = finish(&s);
    CHECK(strstr(log, "closed: MORE flag on GET_DEVICE_COUNT, which is not a chunked request"));
    CHECK(strstr(log, "closed: NOREPLY flag on GET_DEVICE_COUNT, which must be answered"));
    CHECK(strstr(log, "closed: SYNC flag on GET_DEVICE_COUNT"));
    CHECK(strstr(log, "closed: SYNC flag on a chunk before the last of MEMCPY_H2D"));
}

static void wrong_token(void)
{
    server s;
    start(&s);
    int fd = vcuda_connect("127.0.0.1", s.port, 1000, why);
    CHECK(vcuda_handshake(fd, NULL, (const uint8_t *)"s3cret-test-tokem", 17, 1000, TIMEOUT_MS, &buf, NULL, NULL, why) == -2 &&
          strstr(why, "authentication failed"));
    expect_closed(fd);
    close(fd);
    const char *log = finish(&s);
    CHECK(strstr(log, "peer 127.0.0.1:") && strstr(log, "closed: authentication failed"));
    CHECK(!strstr(log, "test-handler: disconnect")); /* never authenticated: no state */
}

static void not_hello_first(void)
{
    server s;
    vcuda_msg m;
    start(&s);
    int fd = vcuda_connect("127.0.0.1", s.port, 1000, why);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_GET_DEVICE_COUNT;
    CHECK(vcuda_send_frame(fd, NULL, &m, &buf, TIMEOUT_MS, why) == VCUDA_NET_OK);
    expect_closed(fd);
    close(fd);
    CHECK(strstr(finish(&s), "closed: first frame is GET_DEVICE_COUNT, not HELLO"));
}

static void oversize(void)
{
    server s;
    uint8_t h[VCUDA_HEADER_SIZE];
    start(&s);
    int fd = connect_hello(s.port); /* authenticated, so only the global bound applies */
    raw_header(h, VCUDA_OP_MEMCPY_H2D, VCUDA_MAX_PAYLOAD + 1);
    CHECK(vcuda_write_all(fd, h, sizeof h, TIMEOUT_MS, why) == VCUDA_NET_OK);
    expect_closed(fd); /* closed at once: no payload was sent, none was waited for */
    close(fd);
    /* before authentication the bound is HELLO's size */
    fd = vcuda_connect("127.0.0.1", s.port, 1000, why);
    raw_header(h, VCUDA_OP_HELLO, 1u << 20);
    CHECK(vcuda_write_all(fd, h, sizeof h, TIMEOUT_MS, why) == VCUDA_NET_OK);
    expect_closed(fd);
    close(fd);
    const char *log = finish(&s);
    CHECK(strstr(log, "closed: oversize") || strstr(log, "> limit"));
    CHECK(strstr(log, "HELLO payload of 1048576 bytes"));
}

static void truncated(void)
{
    server s;
    uint8_t h[VCUDA_HEADER_SIZE];
    start(&s);
    int fd = connect_hello(s.port);
    raw_header(h, VCUDA_OP_MALLOC, 8);
    CHECK(vcuda_write_all(fd, h, sizeof h, TIMEOUT_MS, why) == VCUDA_NET_OK);
    CHECK(vcuda_write_all(fd, "\1\2\3", 3, TIMEOUT_MS, why) == VCUDA_NET_OK); /* 5 short */
    int64_t t0 = vcuda_now_ms();
    expect_closed(fd);
    CHECK(vcuda_now_ms() - t0 >= TIMEOUT_MS - 50); /* closed by the timeout, not earlier */
    close(fd);
    /* silence right after connecting: no HELLO within the timeout */
    fd = vcuda_connect("127.0.0.1", s.port, 1000, why);
    expect_closed(fd);
    close(fd);
    const char *log = finish(&s);
    CHECK(strstr(log, "stalled mid-frame after 27 bytes"));
    CHECK(strstr(log, "no HELLO within"));
}

static void hostile_and_good(void)
{
    server s;
    vcuda_msg m;
    uint8_t h[VCUDA_HEADER_SIZE];
    start(&s);
    /* hostile: authenticated, then stalls mid-frame; another sends garbage */
    int bad = connect_hello(s.port);
    raw_header(h, VCUDA_OP_MALLOC, 8);
    CHECK(vcuda_write_all(bad, h, 10, TIMEOUT_MS, why) == VCUDA_NET_OK);
    int junk = vcuda_connect("127.0.0.1", s.port, 1000, why);
    CHECK(vcuda_write_all(junk, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27, TIMEOUT_MS, why) == VCUDA_NET_OK);
    int good = connect_hello(s.port);
    int64_t t0 = vcuda_now_ms();
    for (int i = 0; i < 20; ++i)
        CHECK(request(good, VCUDA_OP_GET_DEVICE_COUNT, &m) == 0 && m.v[0] == 3);
    CHECK(vcuda_now_ms() - t0 < TIMEOUT_MS); /* served while the stalled one waits */
    expect_closed(bad);
    expect_closed(junk);
    CHECK(request(good, VCUDA_OP_PING, &m) == 0);
    close(bad), close(junk), close(good);
    const char *log = finish(&s);
    CHECK(strstr(log, "stalled mid-frame after 10 bytes"));
    CHECK(strstr(log, "is not a vcuda frame"));
}

/* ---- a relay on the path ---------------------------------------------------------- *
 * A proxy thread between the client core and the server that forwards frame by frame
 * (it knows where each ends: the header's length, and the tag on every frame after each
 * side's first two, HELLO and AUTH) and tampers with one of them.  Frames are counted
 * per direction from the first tagged one: the client sends PING (0, the start-up
 * check), GET_DEVICE_COUNT (1), three SINK chunks (2-4), MEMCPY_D2H (5), PING (6); the
 * server answers PING (0), GET_DEVICE_COUNT (1), SINK (2), three D2H chunks (3-5), PING (6). */

enum { PASS, INJECT, REPLAY, FLIP, DROP, REORDER, REPLY_FLIP, REPLY_REPLAY, REPLY_INJECT, AUTH_FIELD, AUTH_OPTIONS };
static const char *const relay_modes[] = {"pass",       "inject",       "replay",       "flip",        "drop", "reorder",
                                          "reply_flip", "reply_replay", "reply_inject", "auth_field",
                                          "auth_options"};

typedef struct {
    int lfd, mode, acted;
    uint16_t port, to;
} relay_t;

#define RELAY_FRAME (VCUDA_HEADER_SIZE + 64 + RELAY_CHUNK + VCUDA_TAG_SIZE)

/* One frame from fd into f; its size, or 0 at EOF or error. */
static size_t relay_read(int fd, uint8_t *f, int tagged)
{
    char w[VCUDA_WHY_LEN];
    if (vcuda_read_all(fd, f, VCUDA_HEADER_SIZE, 5000, w)) return 0;
    size_t len = (size_t)f[20] | (size_t)f[21] << 8 | (size_t)f[22] << 16 | (size_t)f[23] << 24;
    size_t n = VCUDA_HEADER_SIZE + len + (tagged ? VCUDA_TAG_SIZE : 0);
    if (n > RELAY_FRAME || vcuda_read_all(fd, f + VCUDA_HEADER_SIZE, n - VCUDA_HEADER_SIZE, 5000, w)) return 0;
    return n;
}

/* A well-formed frame with a made-up tag: what someone on the path without the key sends. */
static size_t forged(uint8_t *f, unsigned op, uint32_t flags, uint64_t id, uint64_t value, unsigned nv)
{
    vcuda_msg m;
    size_t n = 0;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = (uint16_t)op, m.hdr.flags = flags, m.hdr.request_id = id;
    m.v[0] = value, m.nv = nv;
    CHECK(vcuda_encode(&m, f, RELAY_FRAME, &n, why) == VCUDA_OK);
    memset(f + n, 0xa5, VCUDA_TAG_SIZE);
    return n + VCUDA_TAG_SIZE;
}

static void *relay_main(void *arg)
{
    relay_t *r = arg;
    static uint8_t f[RELAY_FRAME], kept[RELAY_FRAME], extra[RELAY_FRAME];
    size_t kept_n = 0;
    char w[VCUDA_WHY_LEN];
    int fd[2] = {-1, -1}; /* the client's side, the server's */
    unsigned count[2] = {0, 0};
    struct pollfd lp = {.fd = r->lfd, .events = POLLIN};
    if (poll(&lp, 1, 5000) <= 0 || (fd[0] = accept(r->lfd, NULL, NULL)) < 0) return NULL;
    if ((fd[1] = vcuda_connect("127.0.0.1", r->to, 1000, w)) < 0) goto out;
    for (;;) {
        struct pollfd p[2] = {{.fd = fd[0], .events = POLLIN}, {.fd = fd[1], .events = POLLIN}};
        if (poll(p, 2, 5000) <= 0) break;
        int d = p[0].revents ? 0 : 1, to = fd[!d];
        size_t n = relay_read(fd[d], f, count[d] >= 2);
        if (!n) break;
        long t = (long)count[d]++ - 2; /* the tagged frame's number in its direction */
        int m = r->mode, send_it = 1;
        size_t en = 0; /* bytes of `extra` to send before it */
        if (d == 0 && m == INJECT && t == 1)
            en = forged(extra, VCUDA_OP_MALLOC, 0, 77, 1u << 20, 1), r->acted = 1;
        if (d == 1 && m == REPLY_INJECT && t == 1) { /* a reply the client would take: 7 devices */
            uint64_t id = 0;
            for (int i = 7; i >= 0; --i) id = id << 8 | f[12 + i]; /* the real reply's request id */
            en = forged(extra, VCUDA_OP_GET_DEVICE_COUNT, VCUDA_FLAG_REPLY, id, 7, 1), r->acted = 1;
        }
        if (en && vcuda_write_all(to, extra, en, 1000, w)) break;
        if ((d == 0 && (m == REPLAY || m == REORDER) && t == (m == REPLAY ? 0 : 3)) ||
            (d == 1 && m == REPLY_REPLAY && t == 3))
            memcpy(kept, f, n), kept_n = n, send_it = m != REORDER;
        if ((d == 0 && m == FLIP && t == 3) || (d == 1 && m == REPLY_FLIP && t == 4))
            f[VCUDA_HEADER_SIZE + 4 + 80000] ^= 0x10, r->acted = 1; /* a bit of the copied data */
        if (d == 0 && m == DROP && t == 3) send_it = 0, r->acted = 1;
        if (d == 0 && m == AUTH_FIELD && t == -1) /* AUTH's heartbeat_ms (after the 4 + 32-byte proof) */
            f[VCUDA_HEADER_SIZE + 36] ^= 1, r->acted = 1;
        if (d == 0 && m == AUTH_OPTIONS && t == -1) /* AUTH's options: frame tags asked off */
            f[VCUDA_HEADER_SIZE + 40] ^= VCUDA_AUTH_TAGS, r->acted = 1;
        if (d == 1 && m == REPLY_REPLAY && t == 4) /* chunk 1 again for chunk 2: same id, flags, length */
            memcpy(f, kept, kept_n), n = kept_n, r->acted = 1;
        if (send_it && vcuda_write_all(to, f, n, 1000, w)) break;
        if (d == 0 && ((m == REPLAY && t == 1) || (m == REORDER && t == 4))) {
            if (vcuda_write_all(to, kept, kept_n, 1000, w)) break;
            r->acted = 1;
        }
    }
out:
    for (int i = 0; i < 2; ++i)
        if (fd[i] >= 0) close(fd[i]);
    return NULL;
}

/* The client core through the relay; the expectations of each mode. */
static void relay_case(int mode)
{
    server s;
    start(&s);
    relay_t r = {.mode = mode, .to = s.port};
    r.lfd = vcuda_listen(NULL, 0, &r.port, why);
    CHECK(r.lfd >= 0);
    pthread_t t;
    pthread_create(&t, NULL, relay_main, &r);
    char servers[64];
    snprintf(servers, sizeof servers, "127.0.0.1:%u", (unsigned)r.port);
    setenv("VCUDA_SERVERS", servers, 1);
    setenv("VCUDA_TOKEN", TOKEN, 1);
    setenv("VCUDA_TIMEOUT_MS", "2000", 1);
    unsetenv("VCUDA_KEEPALIVE_MS");
    CHECK(vcuda_client_open(why) == 0);
    if (mode == AUTH_FIELD || mode == AUTH_OPTIONS) {
        /* AUTH_FIELD: the proofs hold (they cover the nonces), but the two sides derived
         * different keys: the first tagged frame, the start-up PING, is refused.
         * AUTH_OPTIONS: the client's proof covers its options: a relay that turns the
         * tags off fails it.  Either way the device is dropped. */
        CHECK(vcuda_client_device_count() == 0);
        vcuda_client_close();
        pthread_join(t, NULL);
        close(r.lfd);
        poll(NULL, 0, 100);
        const char *log = finish(&s);
        CHECK(r.acted);
        if (mode == AUTH_FIELD)
            CHECK(strstr(log, "authenticated") && strstr(log, "frame 0 from 127.0.0.1:") &&
                  strstr(log, "bad authentication tag"));
        else
            CHECK(strstr(log, "authentication failed (tenant default: wrong proof"));
        return;
    }
    CHECK(vcuda_client_device_count() == 1);
    static uint8_t data[3 * RELAY_CHUNK], back[3 * RELAY_CHUNK];
    static char w[4][VCUDA_WHY_LEN];
    vcuda_client_status st[4];
    vcuda_msg m, rep;
    for (size_t i = 0; i < sizeof data; ++i) data[i] = (uint8_t)(i * 13);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_GET_DEVICE_COUNT;
    st[0] = vcuda_client_call(0, &m, &rep, 0, w[0]);
    int count_ok = st[0] == VCUDA_CLIENT_OK && rep.v[0] == 3;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_SINK;
    st[1] = vcuda_client_send_chunks(0, &m, 0, data, sizeof data, RELAY_CHUNK, &rep, w[1]);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_MEMCPY_D2H;
    m.v[0] = 5000, m.v[1] = sizeof back, m.v[2] = 0, m.nv = 3;
    st[2] = vcuda_client_recv_chunks(0, &m, back, sizeof back, &rep, w[2]);
    int data_ok = 1;
    for (size_t i = 0; i < sizeof back; ++i) data_ok &= back[i] == pattern(5000 + i);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_PING;
    st[3] = vcuda_client_call(0, &m, &rep, 0, w[3]);
    vcuda_client_close();
    pthread_join(t, NULL);
    close(r.lfd);
    for (int i = 0; i < 4; ++i)
        printf("%s: call %d: %s%s%s\n", relay_modes[mode], i, vcuda_client_status_name(st[i]), st[i] ? ": " : "",
               st[i] ? w[i] : "");
    poll(NULL, 0, 100); /* the server logs the close */
    const char *log = finish(&s);
    const char *reason = "bad authentication tag (injected, replayed or corrupted)";
    /* the first call that fails, and the frame its refusal names */
    static const struct { int fails; const char *frame; int at_server; } want[] = {
        [PASS] = {4, NULL, 0},          [INJECT] = {0, "frame 1 from 127.0.0.1:", 1},
        [REPLAY] = {1, "frame 2 from 127.0.0.1:", 1}, [FLIP] = {1, "frame 3 from 127.0.0.1:", 1},
        [DROP] = {1, "frame 3 from 127.0.0.1:", 1},   [REORDER] = {1, "frame 3 from 127.0.0.1:", 1},
        [REPLY_FLIP] = {2, "frame 4 from 127.0.0.1:", 0}, [REPLY_REPLAY] = {2, "frame 4 from 127.0.0.1:", 0},
        [REPLY_INJECT] = {0, "frame 1 from 127.0.0.1:", 0}};
    int k = want[mode].fails;
    for (int i = 0; i < 4; ++i) CHECK(i < k ? st[i] == VCUDA_CLIENT_OK : st[i] == VCUDA_CLIENT_UNAVAILABLE);
    if (k > 0) CHECK(count_ok); /* never the forged count */
    if (k > 2) CHECK(data_ok);
    if (mode == PASS) {
        CHECK(!strstr(log, "bad authentication tag"));
        return;
    }
    CHECK(r.acted);
    if (want[mode].at_server) { /* the server refused it and said why */
        CHECK(strstr(log, want[mode].frame) && strstr(log, reason));
    } else { /* the client refused it, and reports a lost server as for any broken one */
        CHECK(strstr(w[k], want[mode].frame) && strstr(w[k], reason));
        CHECK(!strstr(log, reason));
    }
}

static void unreachable(void)
{
    /* nothing listening: a port we bound and closed again */
    uint16_t port;
    int lfd = vcuda_listen(NULL, 0, &port, why);
    close(lfd);
    int64_t t0 = vcuda_now_ms();
    CHECK(vcuda_connect("127.0.0.1", port, 1000, why) < 0);
    CHECK(vcuda_now_ms() - t0 < 500 && strstr(why, "refused"));

    /* a server that stalls (stopped) or dies mid-session: an error within the timeout */
    server s;
    vcuda_msg m;
    start(&s);
    int fd = connect_hello(s.port);
    kill(s.pid, SIGSTOP);
    wait_stopped(s.pid);
    t0 = vcuda_now_ms();
    int rq = request(fd, VCUDA_OP_PING, &m);
    if (rq != -(int)VCUDA_NET_TIMEOUT) fprintf(stderr, "request: %d (%s)\n", rq, why);
    CHECK(rq == -(int)VCUDA_NET_TIMEOUT);
    CHECK(vcuda_now_ms() - t0 < 3 * TIMEOUT_MS);
    kill(s.pid, SIGKILL);
    waitpid(s.pid, NULL, 0);
    t0 = vcuda_now_ms();
    CHECK(request(fd, VCUDA_OP_PING, &m) < 0);
    CHECK(vcuda_now_ms() - t0 < 3 * TIMEOUT_MS);
    close(fd);
    unlink(s.log);
}

/* Runs the server binary with env edits (NAME=VALUE sets, NAME= unsets); exit status,
 * stderr in out. */
static int run_server(const char *exe, const char *const *env, char *out, size_t cap)
{
    int p[2];
    if (pipe(p)) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        for (; *env; ++env) {
            char name[64];
            const char *eq = strchr(*env, '=');
            snprintf(name, sizeof name, "%.*s", (int)(eq - *env), *env);
            if (eq[1]) setenv(name, eq + 1, 1);
            else unsetenv(name);
        }
        dup2(p[1], 2), close(p[0]);
        execl(exe, exe, "--device", "0", "--listen", "127.0.0.1:0", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    while (n < cap - 1 && (r = read(p[0], out + n, cap - 1 - n)) > 0) n += (size_t)r;
    out[n] = 0;
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    fprintf(stderr, "vcuda-server said: %s", out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int server_exe(const char *exe)
{
    char out[1024];
    const char *no_token[] = {"VCUDA_TOKEN=", "VCUDA_TOKEN_FILE=", NULL};
    CHECK(run_server(exe, no_token, out, sizeof out) == 2 && strstr(out, "token"));

    char path[] = "vcuda-token-XXXXXX";
    int tfd = mkstemp(path);
    CHECK(tfd >= 0 && write(tfd, "abc\n", 4) == 4);
    close(tfd);
    chmod(path, 0644);
    char envf[128];
    snprintf(envf, sizeof envf, "VCUDA_TOKEN_FILE=%s", path);
    const char *bad_file[] = {"VCUDA_TOKEN=", envf, NULL};
    CHECK(run_server(exe, bad_file, out, sizeof out) == 2 && strstr(out, "chmod 600"));
    unlink(path);

    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cuda) {
        dlclose(cuda);
        printf("no-GPU check skipped: libcuda.so.1 is present here\n");
        return failures ? 1 : 77;
    }
    const char *with_token[] = {"VCUDA_TOKEN=abc", NULL};
    CHECK(run_server(exe, with_token, out, sizeof out) == 77 &&
          strstr(out, "no CUDA driver (libcuda.so.1") && strstr(out, "nothing to serve"));
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) return fprintf(stderr, "usage: %s CASE [vcuda-server]\n", argv[0]), 2;
    const char *c = argv[1];
    if (!strcmp(c, "server_exe")) return argc > 2 ? server_exe(argv[2]) : 2;
    if (!strcmp(c, "serve")) return serve(argc > 2 && !strcmp(argv[2], "ucx"));
    if (!strcmp(c, "fake_server")) return fake_server(argc, argv);
    if (!strcmp(c, "good_client")) good_client();
    else if (!strcmp(c, "wrong_token")) wrong_token();
    else if (!strcmp(c, "chunked_requests")) chunked_requests();
    else if (!strcmp(c, "not_hello_first")) not_hello_first();
    else if (!strcmp(c, "oversize")) oversize();
    else if (!strcmp(c, "truncated")) truncated();
    else if (!strcmp(c, "hostile_and_good")) hostile_and_good();
    else if (!strcmp(c, "unreachable")) unreachable();
    else if (!strncmp(c, "relay_", 6)) {
        int mode = -1;
        for (int i = 0; i < (int)(sizeof relay_modes / sizeof *relay_modes); ++i)
            if (!strcmp(c + 6, relay_modes[i])) mode = i;
        if (mode < 0) return fprintf(stderr, "unknown case %s\n", c), 2;
        relay_case(mode);
    }
    else return fprintf(stderr, "unknown case %s\n", c), 2;
    vcuda_buf_free(&buf);
    return failures ? 1 : 0;
}
