/* vcuda TCP transport (see net.h). */
#define _GNU_SOURCE /* MSG_NOSIGNAL, getaddrinfo's helpers on older glibc, ppoll */
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
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define nfail(why, s, ...) ((vcuda_net_status)vcuda_fail(why, s, __VA_ARGS__))
#define FRAME_MAX ((size_t)VCUDA_HEADER_SIZE + VCUDA_MAX_PAYLOAD + VCUDA_TAG_SIZE)


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

static int spin_us, nap_us, nap_ms;
void vcuda_net_set_spin_us(int us) { spin_us = us < 0 ? 0 : us; }
void vcuda_net_set_nap(int us, int ms)
{
    nap_us = us < 0 ? 0 : us > 999999 ? 999999 : us;
    nap_ms = ms < 0 ? 0 : ms;
}

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

/* Drops n bytes, sent or received, from the front of an iovec list (and empty entries). */
static void iov_advance(struct iovec **iov, int *cnt, size_t n)
{
    while (*cnt && n >= (*iov)->iov_len) n -= (*iov)->iov_len, ++*iov, --*cnt;
    if (*cnt) (*iov)->iov_base = (uint8_t *)(*iov)->iov_base + n, (*iov)->iov_len -= n;
}

/* Writes the pieces in order, as one stream (one sendmsg while the socket has room).
 * fn (may be NULL): while the peer does not take our bytes, frames it sends are handed
 * to fn (see vcuda_send_frame_live); each one it accepts restarts the deadline. */
static vcuda_net_status write_until(int fd, struct iovec *iov, int cnt, int64_t dl, int timeout_ms,
                                    vcuda_input_fn fn, void *arg, char *why)
{
#ifdef VCUDA_HAVE_UCX
    if (vcuda_ucx_is(fd)) {
        for (int i = 0; i < cnt; ++i) {
            vcuda_net_status s = iov[i].iov_len ? vcuda_ucx_send(fd, iov[i].iov_base, iov[i].iov_len, dl, why)
                                                : VCUDA_NET_OK;
            if (s) return s;
        }
        return VCUDA_NET_OK;
    }
#endif
    iov_advance(&iov, &cnt, 0);
    while (cnt) {
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            iov_advance(&iov, &cnt, (size_t)w);
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

/* recv(MSG_DONTWAIT) into the pieces (UCX: into the first; the caller comes back). */
static ssize_t recv_some_v(int fd, struct iovec *iov, int cnt)
{
#ifdef VCUDA_HAVE_UCX
    if (vcuda_ucx_is(fd)) return vcuda_ucx_recv(fd, iov->iov_base, iov->iov_len);
#endif
    if (cnt == 1) return recv(fd, iov->iov_base, iov->iov_len, MSG_DONTWAIT);
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
    return recvmsg(fd, &mh, MSG_DONTWAIT);
}

/* Fills the pieces, or, with *more (may be NULL) given, at least `need` bytes of them
 * (a frame's header and whatever of the frame the socket already holds after it, up to
 * the pieces' size: one recv where the frame is there whole); *more gets the count read
 * beyond `need`.  `got` counts bytes already part of the frame, to tell clean EOF from
 * truncation. */
static vcuda_net_status read_until_v(int fd, struct iovec *iov, int cnt, size_t need, size_t *more, int64_t dl,
                                     size_t got, char *why)
{
    int64_t spin_end = spin_us ? vcuda_now_ns() + (int64_t)spin_us * 1000 : 0;
    const int64_t nap_end = nap_us ? vcuda_now_ms() + nap_ms : 0;
    size_t have = 0;
    iov_advance(&iov, &cnt, 0);
    while (cnt && (!more || have < need)) {
        ssize_t r = recv_some_v(fd, iov, cnt);
        if (r > 0) {
            iov_advance(&iov, &cnt, (size_t)r), got += (size_t)r, have += (size_t)r;
            continue;
        }
        if (r == 0)
            return got ? nfail(why, VCUDA_NET_IO, "peer closed mid-frame after %zu bytes", got)
                       : nfail(why, VCUDA_NET_CLOSED, "peer closed the connection");
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return nfail(why, VCUDA_NET_IO, "recv: %s", strerror(errno));
        if (spin_end && vcuda_now_ns() < spin_end) continue; /* see vcuda_net_set_spin_us */
        if (nap_end && vcuda_now_ms() < nap_end && !vcuda_ucx_is(fd)) { /* see vcuda_net_set_nap */
            if (dl >= 0 && vcuda_now_ms() >= dl) return nfail(why, VCUDA_NET_TIMEOUT, "peer stalled: timed out");
            struct pollfd p = {.fd = fd, .events = POLLIN};
            struct timespec slice = {0, (long)nap_us * 1000};
            ppoll(&p, 1, &slice, NULL);
            continue;
        }
        vcuda_net_status s = wait_fd(fd, POLLIN, dl, why);
        if (s == VCUDA_NET_TIMEOUT && got)
            return nfail(why, s, "peer stalled mid-frame after %zu bytes: timed out", got);
        if (s) return s;
    }
    if (more) *more = have - need;
    return VCUDA_NET_OK;
}

static vcuda_net_status read_until(int fd, void *p, size_t n, int64_t dl, size_t got, char *why)
{
    struct iovec iov = {p, n};
    return read_until_v(fd, &iov, 1, n, NULL, dl, got, why);
}

/* Copies n bytes already read into the pieces, advancing them. */
static void iov_fill(struct iovec **iov, int *cnt, const uint8_t *p, size_t n)
{
    for (size_t k; n && *cnt; p += k, n -= k) {
        k = n < (*iov)->iov_len ? n : (*iov)->iov_len;
        memcpy((*iov)->iov_base, p, k);
        iov_advance(iov, cnt, k);
    }
}

/* The rest of a frame: n payload bytes into p and the tag (tl bytes) into tag, the first
 * `pre` bytes of the two already in place.  With x, the payload goes to it a portion at a
 * time as it arrives (still in cache, the socket drained meanwhile); the last portion
 * and the tag come in one read. */
static vcuda_net_status read_rest(int fd, uint8_t *p, size_t n, uint8_t *tag, size_t tl, size_t pre, vcuda_aead *x,
                                  int64_t dl, size_t got, char *why)
{
    size_t at = pre < n ? pre : n, tpre = pre - at; /* payload bytes in place, and tag bytes */
    if (x && at) vcuda_aead_aad(x, p, at);
    do {
        size_t k = n - at > VCUDA_MAC_PORTION ? VCUDA_MAC_PORTION : n - at, t = at + k == n ? tl - tpre : 0;
        struct iovec iov[2] = {{p + at, k}, {tag + tpre, t}};
        vcuda_net_status s = read_until_v(fd, iov, 2, 0, NULL, dl, got, why);
        if (s) return s;
        if (x && k) vcuda_aead_aad(x, p + at, k);
        at += k, got += k + t;
    } while (at < n);
    return VCUDA_NET_OK;
}

vcuda_net_status vcuda_write_all(int fd, const void *p, size_t n, int timeout_ms, char *why)
{
    struct iovec iov = {(void *)p, n};
    return write_until(fd, &iov, 1, deadline_of(timeout_ms), timeout_ms, NULL, NULL, why);
}

vcuda_net_status vcuda_read_all(int fd, void *p, size_t n, int timeout_ms, char *why)
{
    return read_until(fd, p, n, deadline_of(timeout_ms), 0, why);
}

vcuda_net_status vcuda_send_frame(int fd, vcuda_session *ses, const vcuda_msg *m, vcuda_buf *b, int timeout_ms,
                                  char *why)
{
    return vcuda_send_frame_live(fd, ses, m, b, timeout_ms, NULL, NULL, why);
}

vcuda_net_status vcuda_send_frame_live(int fd, vcuda_session *ses, const vcuda_msg *m, vcuda_buf *b,
                                       int timeout_ms, vcuda_input_fn fn, void *arg, char *why)
{
    if (ses && ses->untagged) ses = NULL; /* (proto.h, VCUDA_AUTH_TAGS) */
    size_t len = 0, head = 0;
    /* bulk bytes at the end of a frame go out from the caller's memory, not via b */
    vcuda_status s = vcuda_encode_split(m, b->data, b->cap, &len, &head, why);
    if (s == VCUDA_E_NO_SPACE) {
        if (vcuda_buf_reserve(b, head)) return nfail(why, VCUDA_NET_IO, "no memory for a %zu-byte frame", head);
        s = vcuda_encode_split(m, b->data, b->cap, &len, &head, why);
    }
    if (s) return VCUDA_NET_PROTO; /* why already says which field; nothing sent or sealed */
    uint8_t tag[VCUDA_TAG_SIZE];
    const uint8_t *bulk = m->blob;
    size_t bn = len - head, at = 0;
    int64_t dl = deadline_of(timeout_ms);
    vcuda_aead x;
    vcuda_net_status ns = VCUDA_NET_OK;
    if (ses) vcuda_session_begin(ses, 1, &x), vcuda_aead_aad(&x, b->data, head);
    /* bulk data beyond a portion goes out a portion at a time, each fed to the tag once
     * it is out (the peer reads and checks it meanwhile); the rest, with the head or on
     * its own, and the tag in one sendmsg */
    while (ses && bn - at > VCUDA_MAC_PORTION) {
        struct iovec iov[2] = {{b->data, at ? 0 : head}, {(void *)(bulk + at), VCUDA_MAC_PORTION}};
        if ((ns = write_until(fd, iov, 2, dl, timeout_ms, fn, arg, why))) return ns;
        vcuda_aead_aad(&x, bulk + at, VCUDA_MAC_PORTION);
        at += VCUDA_MAC_PORTION;
    }
    struct iovec iov[3];
    int n = 0;
    if (!at) iov[n++] = (struct iovec){b->data, head};
    if (bn > at) iov[n++] = (struct iovec){(void *)(bulk + at), bn - at};
    if (ses) {
        if (bn > at) vcuda_aead_aad(&x, bulk + at, bn - at);
        vcuda_session_seal_end(ses, &x, tag);
        iov[n++] = (struct iovec){tag, sizeof tag};
    }
    ns = write_until(fd, iov, n, dl, timeout_ms, fn, arg, why);
    if (ses && !ns) vcuda_session_prepare(ses); /* now, while the peer works on it */
    return ns;
}

vcuda_net_status vcuda_recv_frame(int fd, vcuda_session *ses, vcuda_msg *m, vcuda_buf *b, int timeout_ms, char *why)
{
    return vcuda_recv_frame_to(fd, ses, m, b, NULL, 0, timeout_ms, why);
}

vcuda_net_status vcuda_recv_frame_to(int fd, vcuda_session *ses, vcuda_msg *m, vcuda_buf *b, uint8_t *dst,
                                     size_t cap, int timeout_ms, char *why)
{
    if (ses && ses->untagged) ses = NULL; /* (proto.h, VCUDA_AUTH_TAGS) */
    int64_t dl = deadline_of(timeout_ms);
    /* the header, and up to a tag's size more: a tagged frame has at least that many
     * bytes after its header, so they are its own even before the header is checked, and
     * a frame without payload comes in one recv */
    uint8_t hb[VCUDA_HEADER_SIZE + 4 + VCUDA_TAG_SIZE], tag[VCUDA_TAG_SIZE];
    size_t tl = ses ? VCUDA_TAG_SIZE : 0, extra = 0;
    vcuda_header h;
    struct iovec hv = {hb, VCUDA_HEADER_SIZE + tl};
    vcuda_net_status ns = read_until_v(fd, &hv, 1, VCUDA_HEADER_SIZE, &extra, dl, 0, why);
    if (ns) return ns;
    const uint8_t *x = hb + VCUDA_HEADER_SIZE; /* the `extra` bytes read after the header */
    size_t got = VCUDA_HEADER_SIZE + extra;
    /* the declared length is trusted only after the header passed every check */
    if (vcuda_decode_header(hb, VCUDA_HEADER_SIZE, &h, why)) return VCUDA_NET_PROTO;
    if (dst && vcuda_layout_is_bytes_only(vcuda_layout(h.opcode, h.flags)) && h.payload_len >= 4) {
        uint8_t *lb = hb + VCUDA_HEADER_SIZE; /* the bytes field's length, read or to read */
        if (extra < 4) {
            if ((ns = read_until(fd, lb + extra, 4 - extra, dl, got, why))) return ns;
            got = VCUDA_HEADER_SIZE + 4, extra = 4;
        }
        uint32_t n = (uint32_t)lb[0] | (uint32_t)lb[1] << 8 | (uint32_t)lb[2] << 16 | (uint32_t)lb[3] << 24;
        /* the same checks the decoder applies, before a byte lands in dst */
        if (n != h.payload_len - 4 || n > VCUDA_MAX_CHUNK)
            return nfail(why, VCUDA_NET_PROTO, "bytes field of %u in a %u-byte payload", n, h.payload_len);
        if (n > cap) return nfail(why, VCUDA_NET_PROTO, "%u bytes sent, %zu expected at most", n, cap);
        struct iovec iov[2] = {{dst, n}, {tag, tl}}, *v = iov;
        int cnt = 2;
        iov_fill(&v, &cnt, lb + 4, extra - 4);
        vcuda_aead mac;
        if (ses) vcuda_session_begin(ses, 0, &mac), vcuda_aead_aad(&mac, hb, VCUDA_HEADER_SIZE + 4);
        if ((ns = read_rest(fd, dst, n, tag, tl, extra - 4, ses ? &mac : NULL, dl, got, why))) return ns;
        if (ses && !vcuda_session_open_end(ses, &mac, tag, why)) return VCUDA_NET_PROTO;
        memset(m, 0, offsetof(vcuda_msg, sizes));
        m->hdr = h;
        m->blob = dst, m->blob_len = n;
        return VCUDA_NET_OK;
    }
    size_t rest = (size_t)h.payload_len + tl; /* >= extra */
    if (vcuda_buf_reserve(b, rest ? rest : 1))
        return nfail(why, VCUDA_NET_IO, "no memory for a %u-byte payload", h.payload_len);
    if (extra) memcpy(b->data, x, extra);
    vcuda_aead mac;
    if (ses) vcuda_session_begin(ses, 0, &mac), vcuda_aead_aad(&mac, hb, VCUDA_HEADER_SIZE);
    ns = read_rest(fd, b->data, h.payload_len, b->data + h.payload_len, tl, extra, ses ? &mac : NULL, dl, got, why);
    if (ns) return ns;
    /* nothing of the payload is interpreted before the tag says it is the peer's */
    if (ses && !vcuda_session_open_end(ses, &mac, b->data + h.payload_len, why)) return VCUDA_NET_PROTO;
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
                    int timeout_ms, vcuda_buf *b, int *server_device, vcuda_session *ses, char *why)
{
    if (!tenant) tenant = VCUDA_TENANT_DEFAULT;
    if (!vcuda_tenant_name_ok(tenant, strlen(tenant)))
        return vcuda_fail(why, -1, "tenant name \"%.80s\" is not 1 to %d of [A-Za-z0-9._-]", tenant,
                          VCUDA_TENANT_NAME_MAX);
    /* VCUDA_FRAME_TAGS=off: only with a server started with --frame-tags off */
    const char *ft = getenv("VCUDA_FRAME_TAGS");
    int tags = !ft || !*ft || !strcmp(ft, "on");
    if (!tags && strcmp(ft, "off"))
        return vcuda_fail(why, -2, "VCUDA_FRAME_TAGS=%.40s: expected on or off", ft);
    const uint32_t options = tags ? VCUDA_AUTH_TAGS : 0;
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
            vcuda_auth_proof(token, token_len, 0, nc, ns, options, proof);
            m.hdr.opcode = VCUDA_OP_AUTH;
            m.blob = proof, m.blob_len = sizeof proof;
            m.v[0] = (uint64_t)heartbeat_ms, m.v[1] = options, m.nv = 2;
        }
        int st = vcuda_send_frame(fd, NULL, &m, b, timeout_ms, why); /* the handshake is untagged */
        if (!st) st = vcuda_recv_frame(fd, NULL, &r, b, timeout_ms, why);
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
            vcuda_auth_proof(token, token_len, 1, nc, ns, (uint32_t)r.v[1], proof);
            if (!vcuda_token_equal(r.blob, r.blob_len, proof, sizeof proof))
                return vcuda_fail(why, -1, "the server could not prove that it holds the token (not our server?)");
            if (r.v[1] != options) /* (the server refuses first; a server that did not is not ours) */
                return vcuda_fail(why, -2, "frame tags: the server runs %s them, VCUDA_FRAME_TAGS says %s",
                                  r.v[1] & VCUDA_AUTH_TAGS ? "with" : "without", tags ? "on" : "off");
            if (server_device) *server_device = (int)r.v[0];
            /* from here every frame is tagged, under the values both AUTH frames carried */
            if (ses) {
                vcuda_session_start(ses, 0, token, token_len, nc, ns, (uint32_t)heartbeat_ms, (uint32_t)r.v[0], NULL);
                ses->untagged = !tags;
            }
        }
    }
    return 0;
}
