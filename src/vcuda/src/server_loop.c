/* vcuda server shell (see server_loop.h). */
#define _POSIX_C_SOURCE 200809L
#include "vcuda/server_loop.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* HELLO is "u t": the largest payload accepted before authentication. */
#define HELLO_MAX (4u + 4u + VCUDA_MAX_TOKEN)

typedef struct {
    vcuda_conn pub; /* first: handlers' vcuda_conn* converts back to conn* */
    const vcuda_server_config *cfg;
    int authed;
    uint8_t hdr[VCUDA_HEADER_SIZE];
    size_t got;           /* bytes of the current frame so far (header + payload) */
    vcuda_header h;       /* valid once got >= VCUDA_HEADER_SIZE */
    int64_t deadline;     /* -1: idle and authenticated, may wait forever */
    int64_t spin_until;   /* ns: keep reading without poll() until then */
    vcuda_buf in, out;
    vcuda_msg req, rep; /* per connection, not static: loops in several threads are fine */
} conn;

void vcuda_reply_error(vcuda_msg *r, int code, const char *msg)
{
    r->hdr.flags |= VCUDA_FLAG_ERROR;
    r->v[0] = (uint64_t)(int64_t)code;
    r->nv = 1;
    r->str = (const uint8_t *)msg;
    r->str_len = (uint32_t)strlen(msg);
    r->blob = NULL, r->blob_len = 0, r->nsizes = 0;
}

static void drop(const vcuda_server_config *cfg, conn *c, const char *reason)
{
    fprintf(stderr, "%s: peer %s: closed: %s\n", cfg->log_prefix, c->pub.peer, reason);
    if (c->authed && cfg->handler->disconnect) cfg->handler->disconnect(cfg->handler->ctx, &c->pub);
    vcuda_close(c->pub.fd);
    vcuda_buf_free(&c->in);
    vcuda_buf_free(&c->out);
    free(c);
}

/* Sends a reply to req built in *r; a client that does not read its replies costs at
 * most frame_timeout_ms.  0 or -1 (why set). */
static int send_reply(const vcuda_server_config *cfg, conn *c, const vcuda_msg *req, vcuda_msg *r,
                      char *why)
{
    r->hdr.opcode = req->hdr.opcode;
    r->hdr.request_id = req->hdr.request_id;
    r->hdr.flags |= VCUDA_FLAG_REPLY;
    vcuda_net_status s = vcuda_send_frame(c->pub.fd, r, &c->out, cfg->frame_timeout_ms, why);
    if (s == VCUDA_NET_PROTO) {
        /* the handler built an invalid reply: a server bug, reported to the client loudly */
        fprintf(stderr, "%s: peer %s: invalid %s reply: %s\n", cfg->log_prefix, c->pub.peer,
                vcuda_opcode_name(req->hdr.opcode), why);
        memset(r, 0, sizeof *r);
        vcuda_reply_error(r, 999 /* cudaErrorUnknown */, "vcuda-server built an invalid reply");
        return send_reply(cfg, c, req, r, why);
    }
    return s ? -1 : 0;
}

int vcuda_send_more(vcuda_conn *pub, const vcuda_msg *req, vcuda_msg *r, char *why)
{
    conn *c = (conn *)pub;
    r->hdr.flags |= VCUDA_FLAG_MORE;
    return send_reply(c->cfg, c, req, r, why);
}

/* A complete, validated frame.  0 to keep the connection, -1 to close it (why set). */
static int dispatch(const vcuda_server_config *cfg, conn *c, const vcuda_msg *m, char *why)
{
    vcuda_msg *r = &c->rep;
    memset(r, 0, sizeof *r);
    if (m->hdr.flags & VCUDA_FLAG_REPLY) {
        snprintf(why, VCUDA_WHY_LEN, "client sent a reply frame (%s)", vcuda_opcode_name(m->hdr.opcode));
        return -1;
    }
    if (!c->authed) {
        if (m->v[0] != VCUDA_PROTO_VERSION) {
            snprintf(why, VCUDA_WHY_LEN, "HELLO with protocol version %llu", (unsigned long long)m->v[0]);
            return -1;
        }
        if (!vcuda_token_equal(m->blob, m->blob_len, cfg->token, cfg->token_len)) {
            /* tell the client why (it would otherwise see only EOF), then close */
            char ignore[VCUDA_WHY_LEN];
            vcuda_reply_error(r, 800 /* cudaErrorNotPermitted */, "vcuda: authentication failed");
            send_reply(cfg, c, m, r, ignore);
            snprintf(why, VCUDA_WHY_LEN, "authentication failed (wrong token)");
            return -1;
        }
        c->authed = 1;
        r->v[0] = VCUDA_PROTO_VERSION, r->v[1] = (uint64_t)cfg->device, r->nv = 2;
        fprintf(stderr, "%s: peer %s: authenticated (connection %llu)\n", cfg->log_prefix,
                c->pub.peer, (unsigned long long)c->pub.id);
        return send_reply(cfg, c, m, r, why);
    }
    if (m->hdr.opcode == VCUDA_OP_HELLO) {
        snprintf(why, VCUDA_WHY_LEN, "second HELLO on an authenticated connection");
        return -1;
    }
    int more = (m->hdr.flags & VCUDA_FLAG_MORE) != 0, noreply = (m->hdr.flags & VCUDA_FLAG_NOREPLY) != 0;
    if (more && !VCUDA_CHUNKED_REQUEST(m->hdr.opcode)) {
        snprintf(why, VCUDA_WHY_LEN, "MORE flag on %s, which is not a chunked request",
                 vcuda_opcode_name(m->hdr.opcode));
        return -1;
    }
    if (noreply && !VCUDA_NOREPLY_REQUEST(m->hdr.opcode)) {
        snprintf(why, VCUDA_WHY_LEN, "NOREPLY flag on %s, which must be answered",
                 vcuda_opcode_name(m->hdr.opcode));
        return -1;
    }
    if ((m->hdr.opcode == VCUDA_OP_PING || m->hdr.opcode == VCUDA_OP_TOUCH) && cfg->pings) ++*cfg->pings;
    /* PING and SINK need no GPU: answered here, so the transport can be measured and
     * tested on its own */
    if (m->hdr.opcode != VCUDA_OP_PING && m->hdr.opcode != VCUDA_OP_SINK &&
        cfg->handler->handle(cfg->handler->ctx, &c->pub, m, r, why) != 0)
        return -1;
    /* chunks before the last get no reply: the client streams them back to back, and
     * the handler reports any chunk's failure in the reply to the last one */
    return more || noreply ? 0 : send_reply(cfg, c, m, r, why);
}

/* Reads what is available without blocking.  0 to keep, -1 to close (why set). */
static int on_readable(const vcuda_server_config *cfg, conn *c, char *why)
{
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (c->got < VCUDA_HEADER_SIZE) {
            dst = c->hdr + c->got, want = VCUDA_HEADER_SIZE - c->got;
        } else {
            dst = c->in.data + (c->got - VCUDA_HEADER_SIZE);
            want = VCUDA_HEADER_SIZE + c->h.payload_len - c->got;
        }
        ssize_t n = want ? vcuda_recv_some(c->pub.fd, dst, want) : 0;
        if (want && n == 0) {
            if (c->got) snprintf(why, VCUDA_WHY_LEN, "truncated frame: EOF after %zu bytes", c->got);
            else snprintf(why, VCUDA_WHY_LEN, "client disconnected");
            return -1;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            /* a client that just got a reply usually sends its next request within
             * microseconds: wait for it here rather than through poll() */
            if ((errno == EAGAIN || errno == EWOULDBLOCK) && vcuda_now_ns() < c->spin_until) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            snprintf(why, VCUDA_WHY_LEN, "recv: %s", strerror(errno));
            return -1;
        }
        if (c->got == 0 && n > 0) c->deadline = vcuda_now_ms() + cfg->frame_timeout_ms;
        c->got += (size_t)n;
        if (c->got == VCUDA_HEADER_SIZE && n > 0) {
            /* header first: nothing is allocated or read on a length not yet checked */
            if (vcuda_decode_header(c->hdr, VCUDA_HEADER_SIZE, &c->h, why)) return -1;
            if (!c->authed && c->h.opcode != VCUDA_OP_HELLO) {
                snprintf(why, VCUDA_WHY_LEN, "first frame is %s, not HELLO", vcuda_opcode_name(c->h.opcode));
                return -1;
            }
            if (!c->authed && c->h.payload_len > HELLO_MAX) {
                snprintf(why, VCUDA_WHY_LEN, "HELLO payload of %u bytes > %u", c->h.payload_len, HELLO_MAX);
                return -1;
            }
            if (vcuda_buf_reserve(&c->in, c->h.payload_len ? c->h.payload_len : 1)) {
                snprintf(why, VCUDA_WHY_LEN, "no memory for a %u-byte payload", c->h.payload_len);
                return -1;
            }
        }
        if (c->got == VCUDA_HEADER_SIZE + (size_t)c->h.payload_len && c->got >= VCUDA_HEADER_SIZE) {
            if (vcuda_decode_payload(&c->h, c->in.data, c->h.payload_len, &c->req, why)) return -1;
            c->got = 0;
            if (dispatch(cfg, c, &c->req, why)) return -1;
            c->spin_until = vcuda_now_ns() + (int64_t)cfg->spin_us * 1000;
            c->deadline = -1; /* authenticated and idle: keep-alive is the client's choice */
        }
    }
}

int vcuda_server_run(const vcuda_server_config *cfg)
{
    int max = cfg->max_conns > 0 ? cfg->max_conns : 256, nc = 0;
    conn **cs = calloc((size_t)max, sizeof *cs);
    struct pollfd *pf = calloc((size_t)max + 1, sizeof *pf);
    char *pending = calloc((size_t)max + 1, 1); /* UCX: ready without poll() saying so */
    uint64_t next_id = 1;
    char why[VCUDA_WHY_LEN];
    if (!cs || !pf || !pending) {
        fprintf(stderr, "%s: out of memory\n", cfg->log_prefix);
        free(cs), free(pf), free(pending);
        return -1;
    }
    while (!*cfg->stop) {
        int64_t now = vcuda_now_ms(), wait = 200; /* re-check *stop at least 5x a second */
        pf[0] = (struct pollfd){.fd = cfg->listen_fd, .events = POLLIN};
        pending[0] = (char)vcuda_fd_pending(cfg->listen_fd);
        for (int i = 0; i < nc; ++i) {
            pf[i + 1] = (struct pollfd){.fd = cs[i]->pub.fd, .events = POLLIN};
            pending[i + 1] = (char)vcuda_fd_pending(cs[i]->pub.fd);
            if (cs[i]->deadline >= 0 && cs[i]->deadline - now < wait)
                wait = cs[i]->deadline - now < 0 ? 0 : cs[i]->deadline - now;
        }
        for (int i = 0; i <= nc; ++i)
            if (pending[i]) wait = 0;
        int r = poll(pf, (nfds_t)nc + 1, (int)wait);
        for (int i = 0; i <= nc; ++i)
            if (pending[i]) pf[i].revents |= POLLIN, r = r > 0 ? r : 1;
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "%s: poll: %s\n", cfg->log_prefix, strerror(errno));
            break;
        }
        now = vcuda_now_ms();
        /* connections first, compacting the array as some close; pf[] is indexed by
         * the position before compaction */
        int kept = 0;
        for (int i = 0; i < nc; ++i) {
            conn *c = cs[i];
            int bad = 0;
            if (r > 0 && (pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                bad = on_readable(cfg, c, why);
            if (!bad && c->deadline >= 0 && now >= c->deadline) {
                if (c->got)
                    snprintf(why, VCUDA_WHY_LEN, "stalled mid-frame after %zu bytes: timed out after %d ms",
                             c->got, cfg->frame_timeout_ms);
                else
                    snprintf(why, VCUDA_WHY_LEN, "no HELLO within %d ms", cfg->frame_timeout_ms);
                bad = 1;
            }
            if (bad) drop(cfg, c, why);
            else cs[kept++] = c;
        }
        nc = kept;
        if (r > 0 && (pf[0].revents & POLLIN)) {
            char peer[64];
            int fd = vcuda_accept(cfg->listen_fd, peer, sizeof peer);
            if (fd < 0) continue; /* nothing to accept after all: try again next round */
            conn *c = nc < max ? calloc(1, sizeof *c) : NULL;
            if (!c) {
                fprintf(stderr, "%s: peer %s: closed: connection limit %d reached\n", cfg->log_prefix, peer, max);
                vcuda_close(fd);
                continue;
            }
            c->pub.fd = fd;
            c->cfg = cfg;
            c->pub.id = next_id++;
            memcpy(c->pub.peer, peer, sizeof peer);
            c->deadline = now + cfg->frame_timeout_ms; /* HELLO must come promptly */
            cs[nc++] = c;
        }
    }
    for (int i = 0; i < nc; ++i) drop(cfg, cs[i], "server shutting down");
    free(cs), free(pf), free(pending);
    return 0;
}
