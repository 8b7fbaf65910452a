/* vcuda TCP transport (see net.h). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MSG_NOSIGNAL, getaddrinfo's helpers on older glibc */
#include "vcuda/net.h"
#include "vcuda/tenants.h"

#include "ucx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define nfail(why, s, ...) ((vcuda_net_status)vcuda_fail(why, s, __VA_ARGS__))
#define FRAME_MAX ((size_t)VCUDA_HEADER_SIZE + VCUDA_MAX_PAYLOAD)


const char *vcuda_net_status_name(vcuda_net_status s)
{
    static const char *const n[] = {"ok", "closed", "timeout", "i/o error", "protocol error"};
    return (unsigned)s < 5 ? n[s] : "unknown";
}

int64_t vcuda_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t vcuda_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int spin_us;
void vcuda_net_set_spin_us(int us) { spin_us = us < 0 ? 0 : us; }

int vcuda_buf_reserve(vcuda_buf *b, size_t n)
{
    if (n <= b->cap) return 0;
    if (n > FRAME_MAX) return -1;
    /* grow geometrically, but a big copy chunk is allocated once at its size */
    size_t c = b->cap ? b->cap * 2 : 4096;
    if (c < n) c = n;
    if (c > FRAME_MAX) c = FRAME_MAX;
    uint8_t *p = realloc(b->data, c);
    if (!p) return -1;
    b->data = p;
    b->cap = c;
    return 0;
}

void vcuda_buf_free(vcuda_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->cap = 0;
}

/* Waits for `ev` until the deadline (-1: none). */
static vcuda_net_status wait_fd(int fd, short ev, int64_t deadline, char *why)
{
    int ucx = vcuda_ucx_is(fd);
    for (;;) {
#ifdef VCUDA_HAVE_UCX
        if (ucx && vcuda_ucx_pending(fd)) return VCUDA_NET_OK;
#endif
        int ms = -1;
        if (deadline >= 0) {
            int64_t left = deadline - vcuda_now_ms();
            if (left <= 0) return nfail(why, VCUDA_NET_TIMEOUT, "peer stalled: timed out");
            ms = left > 1000000 ? 1000000 : (int)left;
        }
        struct pollfd p = {.fd = fd, .events = ucx ? POLLIN : ev}; /* a UCX event fd only reads */
        int r = poll(&p, 1, ms);
        if (r > 0) return VCUDA_NET_OK; /* POLLERR/POLLHUP: the next call reports it */
        if (r < 0 && errno != EINTR) return nfail(why, VCUDA_NET_IO, "poll: %s", strerror(errno));
    }
}

static int64_t deadline_of(int timeout_ms) { return timeout_ms < 0 ? -1 : vcuda_now_ms() + timeout_ms; }

/* fn (may be NULL): while the peer does not take our bytes, frames it sends are handed
 * to fn (see vcuda_send_frame_live); each one it accepts restarts the deadline. */
static vcuda_net_status write_until(int fd, const uint8_t *p, size_t n, int64_t dl, int more, int timeout_ms,
                                    vcuda_input_fn fn, void *arg, char *why)
{
#ifdef VCUDA_HAVE_UCX
    if (vcuda_ucx_is(fd)) return vcuda_ucx_send(fd, p, n, dl, why);
#endif
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT | (more ? MSG_MORE : 0));
        if (w > 0) {
            p += w, n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return nfail(why, VCUDA_NET_IO, "send: %s", strerror(errno));
        if (fn) {
            int64_t left = dl - vcuda_now_ms();
            if (left <= 0) return nfail(why, VCUDA_NET_TIMEOUT, "peer stalled: timed out");
            struct pollfd pf = {.fd = fd, .events = POLLOUT | POLLIN};
            int r = poll(&pf, 1, left > 1000000 ? 1000000 : (int)left);
            if (r < 0 && errno != EINTR) return nfail(why, VCUDA_NET_IO, "poll: %s", strerror(errno));
            if (r > 0 && (pf.revents & POLLIN)) {
                int k = fn(arg, why);
                if (k < 0) return VCUDA_NET_IO;
                if (k > 0) dl = vcuda_now_ms() + timeout_ms;
            }
            continue;
        }
        vcuda_net_status s = wait_fd(fd, POLLOUT, dl, why);
        if (s) return s;
    }
    return VCUDA_NET_OK;
}

/* `got` counts bytes already part of the frame, to tell clean EOF from truncation. */
static vcuda_net_status read_until(int fd, uint8_t *p, size_t n, int64_t dl, size_t got, char *why)
{
    int64_t spin_end = spin_us ? vcuda_now_ns() + (int64_t)spin_us * 1000 : 0;
    while (n) {
        ssize_t r = vcuda_recv_some(fd, p, n);
        if (r > 0) {
            p += r, n -= (size_t)r, got += (size_t)r;
            continue;
        }
        if (r == 0)
            return got ? nfail(why, VCUDA_NET_IO, "peer closed mid-frame after %zu bytes", got)
                       : nfail(why, VCUDA_NET_CLOSED, "peer closed the connection");
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return nfail(why, VCUDA_NET_IO, "recv: %s", strerror(errno));
        if (spin_end && vcuda_now_ns() < spin_end) continue; /* see vcuda_net_set_spin_us */
        vcuda_net_status s = wait_fd(fd, POLLIN, dl, why);
        if (s == VCUDA_NET_TIMEOUT && got)
            return nfail(why, s, "peer stalled mid-frame after %zu bytes: timed out", got);
        if (s) return s;
    }
    return VCUDA_NET_OK;
}

vcuda_net_status vcuda_write_all(int fd, const void *p, size_t n, int timeout_ms, char *why)
{
    return write_until(fd, p, n, deadline_of(timeout_ms), 0, timeout_ms, NULL, NULL, why);
}

vcuda_net_status vcuda_read_all(int fd, void *p, size_t n, int timeout_ms, char *why)
{
    return read_until(fd, p, n, deadline_of(timeout_ms), 0, why);
}

vcuda_net_status vcuda_send_frame(int fd, const vcuda_msg *m, vcuda_buf *b, int timeout_ms,
                                  char *why)
{
    return vcuda_send_frame_live(fd, m, b, timeout_ms, NULL, NULL, why);
}

vcuda_net_status vcuda_send_frame_live(int fd, const vcuda_msg *m, vcuda_buf *b, int timeout_ms,
                                       vcuda_input_fn fn, void *arg, char *why)
{
    size_t len = 0, head = 0;
    /* bulk bytes at the end of a frame go out from the caller's memory, not via b */
    vcuda_status s = vcuda_encode_split(m, b->data, b->cap, &len, &head, why);
    if (s == VCUDA_E_NO_SPACE) {
        if (vcuda_buf_reserve(b, head)) return nfail(why, VCUDA_NET_IO, "no memory for a %zu-byte frame", head);
        s = vcuda_encode_split(m, b->data, b->cap, &len, &head, why);
    }
    if (s) return VCUDA_NET_PROTO; /* why already says which field */
    int64_t dl = deadline_of(timeout_ms);
    vcuda_net_status ns = write_until(fd, b->data, head, dl, head < len, timeout_ms, fn, arg, why);
    if (!ns && head < len) ns = write_until(fd, m->blob, len - head, dl, 0, timeout_ms, fn, arg, why);
    return ns;
}

vcuda_net_status vcuda_recv_frame(int fd, vcuda_msg *m, vcuda_buf *b, int timeout_ms, char *why)
{
    return vcuda_recv_frame_to(fd, m, b, NULL, 0, timeout_ms, why);
}

vcuda_net_status vcuda_recv_frame_to(int fd, vcuda_msg *m, vcuda_buf *b, uint8_t *dst, size_t cap,
                                     int timeout_ms, char *why)
{
    int64_t dl = deadline_of(timeout_ms);
    uint8_t hb[VCUDA_HEADER_SIZE];
    vcuda_header h;
    vcuda_net_status ns = read_until(fd, hb, sizeof hb, dl, 0, why);
    if (ns) return ns;
    /* the declared length is trusted only after the header passed every check */
    if (vcuda_decode_header(hb, sizeof hb, &h, why)) return VCUDA_NET_PROTO;
    if (dst && vcuda_layout_is_bytes_only(vcuda_layout(h.opcode, h.flags)) && h.payload_len >= 4) {
        uint8_t lb[4];
        if ((ns = read_until(fd, lb, 4, dl, sizeof hb, why))) return ns;
        uint32_t n = (uint32_t)lb[0] | (uint32_t)lb[1] << 8 | (uint32_t)lb[2] << 16 | (uint32_t)lb[3] << 24;
        /* the same checks the decoder applies, before a byte lands in dst */
        if (n != h.payload_len - 4 || n > VCUDA_MAX_CHUNK)
            return nfail(why, VCUDA_NET_PROTO, "bytes field of %u in a %u-byte payload", n, h.payload_len);
        if (n > cap) return nfail(why, VCUDA_NET_PROTO, "%u bytes sent, %zu expected at most", n, cap);
        if ((ns = read_until(fd, dst, n, dl, sizeof hb + 4, why))) return ns;
        memset(m, 0, offsetof(vcuda_msg, sizes));
        m->hdr = h;
        m->blob = dst, m->blob_len = n;
        return VCUDA_NET_OK;
    }
    if (vcuda_buf_reserve(b, h.payload_len ? h.payload_len : 1))
        return nfail(why, VCUDA_NET_IO, "no memory for a %u-byte payload", h.payload_len);
    ns = read_until(fd, b->data, h.payload_len, dl, sizeof hb, why);
    if (ns) return ns;
    if (vcuda_decode_payload(&h, b->data, h.payload_len, m, why)) return VCUDA_NET_PROTO;
    return VCUDA_NET_OK;
}

ssize_t vcuda_recv_some(int fd, void *p, size_t n)
{
#ifdef VCUDA_HAVE_UCX
    if (vcuda_ucx_is(fd)) return vcuda_ucx_recv(fd, p, n);
#endif
    return recv(fd, p, n, MSG_DONTWAIT);
}

int vcuda_fd_pending(int fd)
{
#ifdef VCUDA_HAVE_UCX
    if (vcuda_ucx_is(fd)) return vcuda_ucx_pending(fd);
#endif
    (void)fd;
    return 0;
}

void vcuda_close(int fd)
{
#ifdef VCUDA_HAVE_UCX
    if (vcuda_ucx_is(fd)) {
        vcuda_ucx_close(fd);
        return;
    }
#endif
    close(fd);
}

int vcuda_have_ucx(void)
{
#ifdef VCUDA_HAVE_UCX
    return 1;
#else
    return 0;
#endif
}

static void set_nodelay(int fd)
{
    int one = 1; /* small request/reply frames: Nagle would add ~40 ms per call */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int vcuda_connect(const char *host, uint16_t port, int timeout_ms, char *why)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", (unsigned)port);
    int rc = getaddrinfo(host && *host ? host : "127.0.0.1", ps, &hints, &res);
    if (rc) return nfail(why, VCUDA_NET_IO, "%s: %s", host, gai_strerror(rc)), -1;
    int64_t dl = deadline_of(timeout_ms);
    int fd = -1;
    for (ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        /* non-blocking connect + poll: a blackholed host costs timeout_ms, not ~2 min */
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        int err = 0;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            err = errno;
            if (err == EINPROGRESS) {
                socklen_t el = sizeof err;
                if (wait_fd(fd, POLLOUT, dl, NULL) != VCUDA_NET_OK) err = ETIMEDOUT;
                else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
            }
        }
        if (!err) {
            fcntl(fd, F_SETFL, fl);
            set_nodelay(fd);
            break;
        }
        nfail(why, VCUDA_NET_IO, "connect %s:%u: %s", host, (unsigned)port, strerror(err));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

int vcuda_listen(const char *addr, uint16_t port, uint16_t *bound_port, char *why)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICHOST},
                    *res;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", (unsigned)port);
    if (!addr || !*addr) addr = "127.0.0.1";
    int rc = getaddrinfo(addr, ps, &hints, &res);
    if (rc) return nfail(why, VCUDA_NET_IO, "listen address %s: %s", addr, gai_strerror(rc)), -1;
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol), one = 1;
    if (fd < 0) {
        nfail(why, VCUDA_NET_IO, "socket: %s", strerror(errno));
        freeaddrinfo(res);
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* restart after a crash */
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        nfail(why, VCUDA_NET_IO, "bind/listen %s:%u: %s", addr, (unsigned)port, strerror(errno));
        close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    if (bound_port) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
    }
    return fd;
}

int vcuda_parse_endpoint(const char *s, int *ucx, char *addr, uint16_t *port)
{
    *ucx = 0;
    if (!strncmp(s, "tcp://", 6)) s += 6;
    else if (!strncmp(s, "ucx://", 6)) s += 6, *ucx = 1;
    return vcuda_parse_hostport(s, addr, port);
}

int vcuda_connect_ep(int ucx, const char *host, uint16_t port, int timeout_ms, char *why)
{
#ifdef VCUDA_HAVE_UCX
    if (ucx) return vcuda_ucx_connect(host, port, timeout_ms, why);
#else
    if (ucx) return nfail(why, VCUDA_NET_IO, "ucx://%s:%u: this vcuda was built without UCX", host, (unsigned)port), -1;
#endif
    return vcuda_connect(host, port, timeout_ms, why);
}

int vcuda_listen_ep(int ucx, const char *addr, uint16_t port, uint16_t *bound_port, char *why)
{
#ifdef VCUDA_HAVE_UCX
    if (ucx) return vcuda_ucx_listen(addr, port, bound_port, why);
#else
    if (ucx) return nfail(why, VCUDA_NET_IO, "ucx:// listen: this vcuda was built without UCX"), -1;
#endif
    return vcuda_listen(addr, port, bound_port, why);
}

static void peer_name(const struct sockaddr_storage *ss, char *out, size_t n)
{
    char a[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &s4->sin_addr, a, sizeof a), port = ntohs(s4->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof a), port = ntohs(s6->sin6_port);
    }
    snprintf(out, n, "%s:%u", a, port);
}

int vcuda_accept(int listen_fd, char *peer, size_t n)
{
#ifdef VCUDA_HAVE_UCX
    if (vcuda_ucx_is(listen_fd)) return vcuda_ucx_accept(listen_fd, peer, n);
#endif
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = accept(listen_fd, (struct sockaddr *)&ss, &sl);
    if (fd < 0) return -1; /* EAGAIN, ECONNABORTED, EMFILE: the caller tries again later */
    set_nodelay(fd);
    peer_name(&ss, peer, n);
    return fd;
}

int vcuda_parse_hostport(const char *s, char *addr, uint16_t *port)
{
    const char *c = strrchr(s, ':'), *ps = c ? c + 1 : s;
    size_t al = c ? (size_t)(c - s) : 0;
    char *end;
    if (al >= 256) return -1;
    /* "[::1]:9000": brackets are URL syntax, getaddrinfo wants the bare address */
    if (al >= 2 && s[0] == '[' && s[al - 1] == ']') memcpy(addr, s + 1, al - 2), addr[al - 2] = 0;
    else memcpy(addr, s, al), addr[al] = 0;
    errno = 0;
    unsigned long p = strtoul(ps, &end, 10);
    if (!*ps || *end || errno || p > 65535) return -1;
    *port = (uint16_t)p;
    return 0;
}

/* ---- the client's side of the handshake (proto.h "authentication") -------------- */

int vcuda_handshake(int fd, const char *tenant, const uint8_t *token, size_t token_len, int heartbeat_ms,
                    int timeout_ms, vcuda_buf *b, int *server_device, char *why)
{
    if (!tenant) tenant = VCUDA_TENANT_DEFAULT;
    if (!vcuda_tenant_name_ok(tenant, strlen(tenant)))
        return vcuda_fail(why, -1, "tenant name \"%.80s\" is not 1 to %d of [A-Za-z0-9._-]", tenant,
                          VCUDA_TENANT_NAME_MAX);
    uint8_t nc[VCUDA_NONCE_SIZE], ns[VCUDA_NONCE_SIZE], proof[VCUDA_PROOF_SIZE];
    vcuda_msg m, r;
    if (vcuda_random(nc, sizeof nc)) return vcuda_fail(why, -1, "no random bytes for a nonce");
    for (int step = 0; step < 2; ++step) {
        memset(&m, 0, sizeof m);
        m.hdr.request_id = (uint64_t)step + 1;
        if (step == 0) {
            m.hdr.opcode = VCUDA_OP_HELLO;
            m.v[0] = VCUDA_PROTO_VERSION, m.nv = 1;
            m.blob = nc, m.blob_len = sizeof nc;
            m.str = (const uint8_t *)tenant, m.str_len = (uint32_t)strlen(tenant);
        } else {
            vcuda_auth_proof(token, token_len, 0, nc, ns, proof);
            m.hdr.opcode = VCUDA_OP_AUTH;
            m.blob = proof, m.blob_len = sizeof proof;
            m.v[0] = (uint64_t)heartbeat_ms, m.nv = 1;
        }
        int st = vcuda_send_frame(fd, &m, b, timeout_ms, why);
        if (!st) st = vcuda_recv_frame(fd, &r, b, timeout_ms, why);
        if (st) return st == VCUDA_NET_CLOSED || st == VCUDA_NET_IO ? -3 : -1; /* -3: may connect again */
        if (!(r.hdr.flags & VCUDA_FLAG_REPLY) || r.hdr.opcode != m.hdr.opcode || r.hdr.request_id != m.hdr.request_id)
            return vcuda_fail(why, -1, "%s: the reply does not match", vcuda_opcode_name(m.hdr.opcode));
        if (r.hdr.flags & VCUDA_FLAG_ERROR)
            return vcuda_fail(why, -2, "%s refused: %.*s", vcuda_opcode_name(m.hdr.opcode), (int)r.str_len,
                              (const char *)r.str);
        if (step == 0) {
            if (r.v[0] != VCUDA_PROTO_VERSION || r.blob_len != VCUDA_NONCE_SIZE)
                return vcuda_fail(why, -1, "HELLO reply: protocol version %llu, nonce of %u bytes",
                                  (unsigned long long)r.v[0], r.blob_len);
            memcpy(ns, r.blob, sizeof ns);
        } else {
            vcuda_auth_proof(token, token_len, 1, nc, ns, proof);
            if (!vcuda_token_equal(r.blob, r.blob_len, proof, sizeof proof))
                return vcuda_fail(why, -1, "the server could not prove that it holds the token (not our server?)");
            if (server_device) *server_device = (int)r.v[0];
        }
    }
    return 0;
}
