/* vcuda server shell (see server_loop.h). */
#define _GNU_SOURCE /* MSG_NOSIGNAL, POLLRDHUP, ppoll */
#include "vcuda/server_loop.h"

#include "vcuda/tenants.h"

#include "ucx.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Largest handshake payload: HELLO "u t s" with a token-sized field and the longest
 * tenant name (AUTH "t u" is smaller). */
#define HANDSHAKE_MAX (4u + 4u + VCUDA_MAX_TOKEN + 4u + VCUDA_TENANT_NAME_MAX)
#define ACCEPTS_PER_TURN 64 /* then the handshakes in progress get their turn */
#define NONCE_MEMORY 4096   /* client nonces remembered against replayed HELLOs */
#define IDLE_SHRINK_MS 1000 /* an idle client's buffers above SHRINK_ABOVE are freed */
#define SHRINK_ABOVE (256u << 10)
#define WORK_PER_TURN 64    /* requests a worker serves back to back before yielding */
#define PREAUTH_GRACE_MS 250 /* a handshake takes an RTT: longer, and it counts as stalled */
#define SOURCE_BUCKETS 1024

enum { PRE_HELLO, PRE_AUTH, AUTHED };

typedef struct vcuda_server server;

/* A peer address (the port left out) and its connections, counted by the network loop
 * (the only thread that adds or removes connections). */
typedef struct source {
    struct source *next;
    int npre, nauthed;
    char name[64];
} source;

typedef struct conn {
    vcuda_conn pub; /* first: handlers' vcuda_conn* converts back to conn* */
    const vcuda_server_config *cfg;
    server *srv;
    int state;
    source *src;      /* its peer address's counts */
    int64_t born;     /* accepted then */
    int64_t deadline; /* handshake deadline (pre-auth only) */
    uint8_t hdr[VCUDA_HEADER_SIZE + VCUDA_TAG_SIZE], pay[HANDSHAKE_MAX]; /* (see worker_main) */
    size_t got;
    vcuda_header h;
    uint8_t nc[VCUDA_NONCE_SIZE], ns[VCUDA_NONCE_SIZE];
    vcuda_tenant *claimed;  /* the tenant HELLO named, NULL if none such */
    char claimed_name[VCUDA_TENANT_NAME_MAX + 1]; /* (for the log; "" if not a valid name) */
    int joined; /* counted among pub.tenant's connections by admit() here (tenant_out) */
    /* authenticated: the worker's */
    pthread_t thread;
    pthread_mutex_t wlock; /* one writer at a time: the worker, or a PROGRESS frame */
    uint8_t pend[64];      /* unsent tail of a PROGRESS frame, sent before anything else */
    size_t npend;
    /* frame tags (mac.h): the worker alone receives; sending, and with it the send
     * count, is under wlock, so tags follow the order frames take on the wire */
    vcuda_session ses;
    int heartbeat_ms, ucx;
    vcuda_buf in, out;
    vcuda_msg req, rep; /* per connection: workers run concurrently */
    atomic_int busy, done;
    atomic_int gone; /* the client closed its side: what it sent is not started */
    int wfd;         /* its socket as the worker got it (pub.fd is the worker's to close) */
    int after_keepalive; /* the last request was a TOUCH or PING (vcuda_server_config.nap_us) */
    /* the nap as it is now, and the window its CPU share is measured over (nap_adapt) */
    int nap_us;
    int64_t nap_wall0, nap_cpu0;
    atomic_uint_fast64_t busy_id;
    atomic_int_fast64_t busy_since, last_sent;
    char why[VCUDA_WHY_LEN]; /* the worker's closing reason */
    struct conn *next;
} conn;

struct vcuda_server {
    const vcuda_server_config *cfg;
    const vcuda_tenants *tenants;
    pthread_mutex_t mu; /* the authenticated list */
    conn *authed;
    int nauthed;
    struct handed *handed; /* sessions handed to other processes (cfg->handoff), still open */
    int nhanded;
    uint64_t nonces[NONCE_MEMORY];
    unsigned nonce_at;
    source *sources[SOURCE_BUCKETS];
    struct pollfd *pf; /* vcuda_server_turn's: the caller's fds, then the watched sockets */
    conn **watch;
    size_t cap;
};

/* A session handed over: counted against the caps (in all, per source and among its
 * tenant's connections) until the handoff reports it ended.  The network loop's only. */
typedef struct handed {
    struct handed *next;
    uint64_t id;
    source *src;
    vcuda_tenant *tenant;
} handed;

/* ---- rate-limited logging ---------------------------------------------------------- */

#define LOG_LINES_PER_SEC 20
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t log_window;
static int log_lines;
static unsigned long log_suppressed;
static char log_prefix_seen[64];

static void log_flush_locked(int64_t now, int force)
{
    if (now - log_window < 1000 && !force) return;
    if (log_suppressed)
        fprintf(stderr, "%s: %lu more connection log line(s) suppressed in the last %.1f s\n", log_prefix_seen,
                log_suppressed, (double)(now - log_window) / 1000.0);
    log_window = now, log_lines = 0, log_suppressed = 0;
}

void vcuda_log_limited(const char *prefix, const char *fmt, ...)
{
    int64_t now = vcuda_now_ms();
    pthread_mutex_lock(&log_mu);
    snprintf(log_prefix_seen, sizeof log_prefix_seen, "%s", prefix);
    log_flush_locked(now, 0);
    if (log_lines < LOG_LINES_PER_SEC) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s: ", prefix);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        ++log_lines;
    } else {
        ++log_suppressed;
    }
    pthread_mutex_unlock(&log_mu);
}

/* The summary, once a second (force: now, e.g. before the process ends). */
static void log_tick(int force)
{
    pthread_mutex_lock(&log_mu);
    log_flush_locked(vcuda_now_ms(), force);
    pthread_mutex_unlock(&log_mu);
}

void vcuda_reply_error(vcuda_msg *r, int code, const char *msg)
{
    r->hdr.flags |= VCUDA_FLAG_ERROR;
    r->v[0] = (uint64_t)(int64_t)code;
    r->nv = 1;
    r->str = (const uint8_t *)msg;
    r->str_len = (uint32_t)strlen(msg);
    r->blob = NULL, r->blob_len = 0, r->nsizes = 0;
}

/* ---- sources: connections per peer address ------------------------------------------ */

static source **source_slot(server *s, const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = name; *p; ++p) h = (h ^ (uint8_t)*p) * 16777619u;
    source **pp = &s->sources[h % SOURCE_BUCKETS];
    while (*pp && strcmp((*pp)->name, name)) pp = &(*pp)->next;
    return pp;
}

/* The record of the address of peer ("addr:port"), made if new; NULL if out of memory. */
static source *source_of(server *s, const char *peer)
{
    char name[64];
    const char *colon = strrchr(peer, ':');
    size_t len = colon ? (size_t)(colon - peer) : strlen(peer);
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, peer, len), name[len] = 0;
    source **pp = source_slot(s, name);
    if (!*pp && (*pp = calloc(1, sizeof **pp))) memcpy((*pp)->name, name, len + 1);
    return *pp;
}

/* One connection fewer counted against an address (a session, or one not yet
 * authenticated); the address is forgotten once it has none. */
static void source_put(server *s, source *src, int session)
{
    if (session) --src->nauthed;
    else --src->npre;
    if (src->npre || src->nauthed) return;
    source **pp = source_slot(s, src->name);
    *pp = src->next;
    free(src);
}

static void source_leave(server *s, conn *c)
{
    if (c->src) source_put(s, c->src, c->state == AUTHED);
    c->src = NULL;
}

/* The connection no longer counted among its tenant's (if admit() counted it). */
static void tenant_out(conn *c)
{
    if (c->joined) vcuda_tenant_leave(c->pub.tenant);
    c->joined = 0;
}

/* c, about to be handed over, counted as a session (of its address too, and of its
 * tenant: the count admit() took moves here) until handed_end.  0, or -1 out of memory. */
static int handed_add(server *s, conn *c)
{
    handed *h = malloc(sizeof *h);
    if (!h) return -1;
    h->id = c->pub.id, h->src = c->src, ++c->src->nauthed;
    h->tenant = c->joined ? c->pub.tenant : NULL, c->joined = 0;
    h->next = s->handed, s->handed = h;
    pthread_mutex_lock(&s->mu); /* (admit reads the count with nauthed) */
    ++s->nhanded;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* The handoff's report: the session of connection `id` is over. */
static void handed_end(void *arg, uint64_t id)
{
    server *s = arg;
    for (handed **pp = &s->handed; *pp; pp = &(*pp)->next) {
        handed *h = *pp;
        if (h->id != id) continue;
        *pp = h->next;
        pthread_mutex_lock(&s->mu);
        --s->nhanded;
        pthread_mutex_unlock(&s->mu);
        source_put(s, h->src, 1);
        if (h->tenant) vcuda_tenant_leave(h->tenant);
        free(h);
        return;
    }
}

static void free_conn(conn *c)
{
    source_leave(c->srv, c);
    tenant_out(c); /* (admitted, then never served: a failed reply or start) */
    if (c->pub.fd >= 0) vcuda_close(c->pub.fd);
    vcuda_buf_free(&c->in);
    vcuda_buf_free(&c->out);
    if (c->state == AUTHED) pthread_mutex_destroy(&c->wlock);
    free(c);
}

/* ---- replies ----------------------------------------------------------------------- */

static void fill_reply(const vcuda_msg *req, vcuda_msg *r)
{
    r->hdr.opcode = req->hdr.opcode;
    r->hdr.request_id = req->hdr.request_id;
    r->hdr.flags |= VCUDA_FLAG_REPLY;
}

/* Worker side: sends a reply to req built in *r; a client that does not read its
 * replies costs its own worker at most frame_timeout_ms.  0 or -1 (why set). */
static int send_reply(conn *c, const vcuda_msg *req, vcuda_msg *r, char *why)
{
    const vcuda_server_config *cfg = c->cfg;
    fill_reply(req, r);
    pthread_mutex_lock(&c->wlock);
    vcuda_net_status s = VCUDA_NET_OK;
    if (c->npend) { /* finish a PROGRESS frame first: frames never interleave */
        s = vcuda_write_all(c->pub.fd, c->pend, c->npend, cfg->frame_timeout_ms, why);
        c->npend = 0;
    }
    if (!s) s = vcuda_send_frame(c->pub.fd, &c->ses, r, &c->out, cfg->frame_timeout_ms, why);
    atomic_store(&c->last_sent, vcuda_now_ms());
    pthread_mutex_unlock(&c->wlock);
    if (s == VCUDA_NET_PROTO) {
        /* the handler built an invalid reply: a server bug, reported to the client loudly */
        vcuda_log_limited(cfg->log_prefix, "peer %s: invalid %s reply: %s", c->pub.peer,
                          vcuda_opcode_name(req->hdr.opcode), why);
        memset(r, 0, sizeof *r);
        vcuda_reply_error(r, 999 /* cudaErrorUnknown */, "vcuda-server built an invalid reply");
        return send_reply(c, req, r, why);
    }
    if (s == VCUDA_NET_TIMEOUT) snprintf(why, VCUDA_WHY_LEN, "not reading its replies: send timed out after %d ms",
                                         cfg->frame_timeout_ms);
    return s ? -1 : 0;
}

int vcuda_send_more(vcuda_conn *pub, const vcuda_msg *req, vcuda_msg *r, char *why)
{
    conn *c = (conn *)pub;
    r->hdr.flags |= VCUDA_FLAG_MORE;
    return send_reply(c, req, r, why);
}

/* Network loop side: a PROGRESS frame for a connection whose worker has been busy for
 * a heartbeat interval.  Never waits: what the socket does not take now stays in pend,
 * sent by the next heartbeat or before the worker's next frame (a tagged frame is never
 * dropped: its sequence number is spent), and no new PROGRESS is made while one waits. */
static void heartbeat(conn *c, int64_t now)
{
    if (pthread_mutex_trylock(&c->wlock)) return; /* the worker is writing: data flows */
    if (c->pub.fd >= 0 && c->npend == 0) {
        vcuda_msg m;
        memset(&m, 0, sizeof m);
        m.hdr.opcode = VCUDA_OP_PROGRESS;
        m.hdr.flags = VCUDA_FLAG_REPLY;
        m.hdr.request_id = (uint64_t)atomic_load(&c->busy_id);
        m.v[0] = (uint64_t)(now - atomic_load(&c->busy_since)), m.nv = 1;
        if (vcuda_encode_sealed(&c->ses, &m, c->pend, sizeof c->pend, &c->npend, NULL) != VCUDA_OK) c->npend = 0;
    }
    if (c->pub.fd >= 0 && c->npend) {
        ssize_t w = send(c->pub.fd, c->pend, c->npend, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            memmove(c->pend, c->pend + w, c->npend - (size_t)w), c->npend -= (size_t)w;
            atomic_store(&c->last_sent, now);
        }
    }
    pthread_mutex_unlock(&c->wlock);
}

/* ---- the worker: one authenticated client ----------------------------------------- */

/* Reads at least n and at most cap bytes into p (cap > n only where the frame is known
 * to be that long); *got counts the frame's bytes so far (for messages, and what was
 * read).  dl < 0: waiting for the next request, no deadline but the idle timeout (if
 * any); the stop flag is checked 5x a second.  0, or -1 (why set). */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Keeps a napping worker within its CPU budget whatever a wake-up costs on this machine:
 * over windows of NAP_WINDOW_MS of naps (and the keep-alives handled between them), a
 * share above NAP_CPU_HIGH doubles the nap, one below NAP_CPU_LOW halves it again, never
 * below the configured nap nor above NAP_MAX_US. */
#define NAP_WINDOW_MS 50
#define NAP_CPU_HIGH 0.04
#define NAP_CPU_LOW 0.015
#define NAP_MAX_US 20000
static void nap_adapt(conn *c, int configured)
{
    const int64_t wall = vcuda_now_ns(), cpu = thread_cpu_ns();
    if (c->nap_us < configured) c->nap_us = configured;
    if (!c->nap_wall0 || wall - c->nap_wall0 > 20LL * NAP_WINDOW_MS * 1000000) { /* a new run of naps */
        c->nap_wall0 = wall, c->nap_cpu0 = cpu;
        return;
    }
    if (wall - c->nap_wall0 < (int64_t)NAP_WINDOW_MS * 1000000) return;
    const double share = (double)(cpu - c->nap_cpu0) / (double)(wall - c->nap_wall0);
    if (share > NAP_CPU_HIGH && c->nap_us < NAP_MAX_US) c->nap_us = c->nap_us * 2 > NAP_MAX_US ? NAP_MAX_US : c->nap_us * 2;
    else if (share < NAP_CPU_LOW && c->nap_us > configured) c->nap_us = c->nap_us / 2 < configured ? configured : c->nap_us / 2;
    c->nap_wall0 = wall, c->nap_cpu0 = cpu;
}

static int read_exact(conn *c, uint8_t *p, size_t n, size_t cap, size_t *got, int64_t dl, char *why)
{
    const vcuda_server_config *cfg = c->cfg;
    const int nap = dl < 0 && c->after_keepalive && cfg->nap_us > 0; /* see server_loop.h */
    int64_t spin_until = vcuda_now_ns() + (nap ? 0 : (int64_t)cfg->spin_us * 1000), idle_since = vcuda_now_ms();
    const int64_t nap_end = idle_since + (nap ? cfg->nap_ms : 0);
    int64_t idle_end = dl < 0 && cfg->idle_timeout_ms > 0 ? idle_since + cfg->idle_timeout_ms : -1;
    for (size_t have = 0; have < n;) {
        ssize_t r = vcuda_recv_some(c->pub.fd, p + have, cap - have);
        if (r > 0) {
            have += (size_t)r, *got += (size_t)r;
            continue;
        }
        if (r == 0) {
            if (*got) snprintf(why, VCUDA_WHY_LEN, "truncated frame: EOF after %zu bytes", *got);
            else snprintf(why, VCUDA_WHY_LEN, "client disconnected");
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            snprintf(why, VCUDA_WHY_LEN, "recv: %s", strerror(errno));
            return -1;
        }
        /* a client that just got a reply usually sends its next request within
         * microseconds: wait for it here rather than through poll() */
        if (vcuda_now_ns() < spin_until) continue;
        int64_t now = vcuda_now_ms();
        if (*cfg->stop) return snprintf(why, VCUDA_WHY_LEN, "server shutting down"), -1;
        if (dl >= 0 && now >= dl) {
            snprintf(why, VCUDA_WHY_LEN, "stalled mid-frame after %zu bytes: timed out after %d ms", *got,
                     cfg->frame_timeout_ms);
            return -1;
        }
        if (idle_end >= 0 && now >= idle_end) {
            snprintf(why, VCUDA_WHY_LEN, "idle: no request for %g s (the server's idle timeout)",
                     cfg->idle_timeout_ms / 1000.0);
            return -1;
        }
        if (dl < 0 && now - idle_since >= IDLE_SHRINK_MS) {
            /* idle: give back what a large transfer grew (a frame is read anew) */
            if (c->in.cap > SHRINK_ABOVE) vcuda_buf_free(&c->in);
            pthread_mutex_lock(&c->wlock);
            if (c->out.cap > SHRINK_ABOVE) vcuda_buf_free(&c->out);
            pthread_mutex_unlock(&c->wlock);
            idle_since = now + 3600 * 1000LL; /* once per idle period */
        }
        int ms = 200;
        if (dl >= 0 && dl - now < ms) ms = (int)(dl - now);
        if (idle_end >= 0 && idle_end - now < ms) ms = (int)(idle_end - now);
        if (vcuda_fd_pending(c->pub.fd)) continue;
        struct pollfd pf = {.fd = c->pub.fd, .events = POLLIN};
        if (nap && now < nap_end) {
            nap_adapt(c, cfg->nap_us);
            struct timespec slice = {c->nap_us / 1000000, (long)(c->nap_us % 1000000) * 1000};
            ppoll(&pf, 1, &slice, NULL);
        } else {
            poll(&pf, 1, ms);
        }
    }
    return 0;
}

/* One validated request.  0 to keep the connection, -1 to close it (why set). */
static int dispatch(conn *c, const vcuda_msg *m, char *why)
{
    const vcuda_server_config *cfg = c->cfg;
    vcuda_msg *r = &c->rep;
    memset(r, 0, sizeof *r);
    unsigned op = m->hdr.opcode;
    if (m->hdr.flags & VCUDA_FLAG_REPLY)
        return snprintf(why, VCUDA_WHY_LEN, "client sent a reply frame (%s)", vcuda_opcode_name(op)), -1;
    if (op == VCUDA_OP_HELLO || op == VCUDA_OP_AUTH)
        return snprintf(why, VCUDA_WHY_LEN, "second %s on an authenticated connection", vcuda_opcode_name(op)), -1;
    if (op == VCUDA_OP_PROGRESS)
        return snprintf(why, VCUDA_WHY_LEN, "client sent PROGRESS, a server-to-client frame"), -1;
    int more = (m->hdr.flags & VCUDA_FLAG_MORE) != 0, noreply = (m->hdr.flags & VCUDA_FLAG_NOREPLY) != 0;
    if (more && !VCUDA_CHUNKED_REQUEST(op))
        return snprintf(why, VCUDA_WHY_LEN, "MORE flag on %s, which is not a chunked request", vcuda_opcode_name(op)), -1;
    if (noreply && !VCUDA_NOREPLY_REQUEST(op))
        return snprintf(why, VCUDA_WHY_LEN, "NOREPLY flag on %s, which must be answered", vcuda_opcode_name(op)), -1;
    if ((m->hdr.flags & VCUDA_FLAG_SYNC) && (!VCUDA_SYNC_REQUEST(op) || more))
        return snprintf(why, VCUDA_WHY_LEN, "SYNC flag on %s%s", more ? "a chunk before the last of " : "",
                        vcuda_opcode_name(op)), -1;
    c->after_keepalive = op == VCUDA_OP_PING || op == VCUDA_OP_TOUCH;
    if (c->after_keepalive && cfg->pings) ++*cfg->pings;
    /* PING and SINK need no GPU: answered here, so the transport can be measured and
     * tested on its own */
    if (op != VCUDA_OP_PING && op != VCUDA_OP_SINK) {
        atomic_store(&c->busy_id, m->hdr.request_id);
        atomic_store(&c->busy_since, vcuda_now_ms());
        atomic_store(&c->busy, 1); /* from here the network loop may send PROGRESS */
        int rc = cfg->handler->handle(cfg->handler->ctx, &c->pub, m, r, why);
        if (rc) {
            atomic_store(&c->busy, 0);
            return -1;
        }
    }
    /* chunks before the last get no reply: the client streams them back to back, and
     * the handler reports any chunk's failure in the reply to the last one */
    int rc = more || noreply ? 0 : send_reply(c, m, r, why);
    atomic_store(&c->busy, 0);
    if (!rc && c->pub.end_session) {
        snprintf(why, VCUDA_WHY_LEN, "session ended after %s failed: %.*s", vcuda_opcode_name(op),
                 (r->hdr.flags & VCUDA_FLAG_ERROR) ? (int)r->str_len : 2,
                 (r->hdr.flags & VCUDA_FLAG_ERROR) ? (const char *)r->str : "ok");
        return -1;
    }
    return rc;
}

static void *worker_main(void *arg)
{
    conn *c = arg;
    const vcuda_server_config *cfg = c->cfg;
    const struct vcuda_handler *h = cfg->handler;
    char *why = c->why;
    if (h->attach && h->attach(h->ctx, &c->pub, why)) goto out;
    for (int served = 0;; ++served) {
        size_t got = 0;
        if (served >= WORK_PER_TURN) { /* bounded work per turn: others get the CPU */
            sched_yield();
            served = 0;
        }
        /* the header, and up to a tag's size more: every frame now has at least that many
         * bytes after its header, so they are the frame's own even before the header is
         * checked, and a whole small request comes in one recv */
        const size_t tl = c->ses.untagged ? 0 : VCUDA_TAG_SIZE, hmax = VCUDA_HEADER_SIZE + tl;
        if (read_exact(c, c->hdr, 1, hmax, &got, -1, why)) break;
        int64_t dl = vcuda_now_ms() + cfg->frame_timeout_ms;
        if (got < VCUDA_HEADER_SIZE && read_exact(c, c->hdr + got, VCUDA_HEADER_SIZE - got, hmax - got, &got, dl, why))
            break;
        if (vcuda_decode_header(c->hdr, VCUDA_HEADER_SIZE, &c->h, why)) break;
        /* nothing is allocated or read on a length not yet checked */
        uint32_t max = cfg->max_frame ? cfg->max_frame : VCUDA_MAX_PAYLOAD;
        if (c->h.payload_len > max) {
            snprintf(why, VCUDA_WHY_LEN, "%s payload of %u bytes > this server's limit of %u",
                     vcuda_opcode_name(c->h.opcode), c->h.payload_len, max);
            break;
        }
        /* the payload and its tag after it, in one read */
        if (vcuda_buf_reserve(&c->in, (size_t)c->h.payload_len + tl + 1)) {
            snprintf(why, VCUDA_WHY_LEN, "no memory for a %u-byte payload", c->h.payload_len);
            break;
        }
        /* what came with the header first, then the rest; the payload goes to the tag a
         * portion at a time as it arrives (mac.h), the last portion with the tag */
        size_t n = c->h.payload_len, have = got - VCUDA_HEADER_SIZE, total = n + tl;
        size_t fed = have < n ? have : n;
        vcuda_aead mac;
        memcpy(c->in.data, c->hdr + VCUDA_HEADER_SIZE, have);
        if (tl) {
            vcuda_session_begin(&c->ses, 0, &mac);
            vcuda_aead_aad(&mac, c->hdr, VCUDA_HEADER_SIZE);
            vcuda_aead_aad(&mac, c->in.data, fed);
        }
        int failed = 0;
        while (have < total && !failed) {
            size_t k = n - fed > VCUDA_MAC_PORTION ? VCUDA_MAC_PORTION : total - have;
            failed = read_exact(c, c->in.data + have, k, k, &got, dl, why);
            have += k;
            size_t upto = have < n ? have : n;
            if (tl) vcuda_aead_aad(&mac, c->in.data + fed, upto - fed);
            fed = upto;
        }
        if (failed) break;
        /* injected, replayed, reordered, dropped or altered: refused before it is decoded */
        if (tl && !vcuda_session_open_end(&c->ses, &mac, c->in.data + n, why)) break;
        if (vcuda_decode_payload(&c->h, c->in.data, c->h.payload_len, &c->req, why)) break;
        /* a client that has closed its side does not see the effects of what it queued:
         * a pipelined batch still in the socket after it left is not run */
        if (atomic_load(&c->gone)) {
            snprintf(why, VCUDA_WHY_LEN, "client disconnected; its %s and anything after it not started",
                     vcuda_opcode_name(c->h.opcode));
            break;
        }
        if (dispatch(c, &c->req, why)) break;
    }
out:
    if (h->disconnect) h->disconnect(h->ctx, &c->pub);
    tenant_out(c); /* (its memory went with the handler's disconnect) */
    vcuda_log_limited(cfg->log_prefix, "peer %s: closed: %s", c->pub.peer, why);
    pthread_mutex_lock(&c->wlock);
    vcuda_close(c->pub.fd);
    c->pub.fd = -1;
    pthread_mutex_unlock(&c->wlock);
    atomic_store(&c->done, 1);
    return NULL;
}

/* ---- the network loop: accept, authenticate, hand over ----------------------------- */

static void drop_pre(server *s, conn *c, const char *reason)
{
    vcuda_log_limited(s->cfg->log_prefix, "peer %s: closed: %s", c->pub.peer, reason);
    free_conn(c);
}

static int nonce_seen(server *s, const uint8_t *nc)
{
    uint64_t f;
    memcpy(&f, nc, sizeof f);
    for (unsigned i = 0; i < NONCE_MEMORY; ++i)
        if (s->nonces[i] == f) return 1;
    s->nonces[s->nonce_at++ % NONCE_MEMORY] = f;
    return 0;
}

/* Small handshake replies from the loop: a fresh socket always has room for them, so
 * the wait is bounded by a short deadline, never by the peer. */
static int send_small(conn *c, const vcuda_msg *req, vcuda_msg *r, char *why)
{
    fill_reply(req, r);
    return vcuda_send_frame(c->pub.fd, NULL, r, &c->out, 100, why) ? -1 : 0; /* untagged */
}

static int start_worker(server *s, conn *c, char *why);

/* Whether a client that proved its tenant's secret gets a session now: the one place
 * that decides, whichever process will serve it (the sessions handed to other processes
 * count, in all, per source and per tenant), in this order: the server's limit on
 * clients (max_conns), its cap per source address (max_per_source), the tenant's limit
 * on its connections at once (its MAX_CONNS), and whether the handoff can take the
 * tenant (a serving process for it: the tenant processes' cap).  0 with the connection
 * counted among its tenant's (c->pub.tenant set, c->joined: tenant_out counts it out),
 * or -1 with the message for the client in msg (VCUDA_WHY_LEN bytes), its CUDA error
 * code in *code and the log reason in why. */
static int admit(server *s, conn *c, char *msg, int *code, char *why)
{
    const vcuda_server_config *cfg = s->cfg;
    vcuda_tenant *t = c->claimed;
    int max = cfg->max_conns > 0 ? cfg->max_conns : 256;
    pthread_mutex_lock(&s->mu);
    int n = s->nauthed + s->nhanded;
    pthread_mutex_unlock(&s->mu);
    *code = 2; /* cudaErrorMemoryAllocation: out of a resource */
    if (n >= max) {
        snprintf(msg, VCUDA_WHY_LEN, "vcuda: server full: client limit reached");
        return snprintf(why, VCUDA_WHY_LEN, "client limit %d reached", max), -1;
    }
    if (cfg->max_per_source > 0 && c->src->nauthed >= cfg->max_per_source) {
        snprintf(msg, VCUDA_WHY_LEN, "vcuda: server: too many connections from %s", c->src->name);
        return snprintf(why, VCUDA_WHY_LEN, "%s already has %d sessions (the per-source cap)", c->src->name,
                        c->src->nauthed), -1;
    }
    if (vcuda_tenant_join(t)) {
        snprintf(msg, VCUDA_WHY_LEN, "vcuda: tenant %s: connection limit %u reached", t->name, t->max_conns);
        return snprintf(why, VCUDA_WHY_LEN, "tenant %s: connection limit %u reached", t->name, t->max_conns), -1;
    }
    if (cfg->handoff && cfg->handoff->room(cfg->handoff->ctx, t->name, msg)) {
        vcuda_tenant_leave(t);
        return snprintf(why, VCUDA_WHY_LEN, "refused: %.*s", VCUDA_WHY_LEN - 10, msg), -1;
    }
    c->pub.tenant = t, c->joined = 1;
    return 0;
}

/* A complete handshake frame.  0 to keep the connection, 1 if it moved to a worker,
 * -1 to close it (why set). */
static int handshake(server *s, conn *c, const vcuda_msg *m, char *why)
{
    const vcuda_server_config *cfg = s->cfg;
    vcuda_msg r;
    memset(&r, 0, sizeof r);
    if (m->hdr.flags & (VCUDA_FLAG_REPLY | VCUDA_FLAG_MORE | VCUDA_FLAG_NOREPLY))
        return snprintf(why, VCUDA_WHY_LEN, "%s with flags 0x%x", vcuda_opcode_name(m->hdr.opcode), m->hdr.flags), -1;
    if (c->state == PRE_HELLO) {
        if (m->v[0] != VCUDA_PROTO_VERSION)
            return snprintf(why, VCUDA_WHY_LEN, "HELLO with protocol version %llu", (unsigned long long)m->v[0]), -1;
        if (m->blob_len != VCUDA_NONCE_SIZE)
            return snprintf(why, VCUDA_WHY_LEN, "HELLO nonce of %u bytes, not %d", m->blob_len, VCUDA_NONCE_SIZE), -1;
        if (nonce_seen(s, m->blob))
            return snprintf(why, VCUDA_WHY_LEN, "replayed HELLO (client nonce seen before)"), -1;
        /* a tenant nobody knows is answered as any other (see proto.h, "authentication") */
        c->claimed = vcuda_tenant_find(s->tenants, m->str, m->str_len);
        if (vcuda_tenant_name_ok((const char *)m->str, m->str_len))
            memcpy(c->claimed_name, m->str, m->str_len), c->claimed_name[m->str_len] = 0;
        memcpy(c->nc, m->blob, VCUDA_NONCE_SIZE);
        if (vcuda_random(c->ns, VCUDA_NONCE_SIZE))
            return snprintf(why, VCUDA_WHY_LEN, "no random bytes for a server nonce"), -1;
        r.v[0] = VCUDA_PROTO_VERSION, r.nv = 1;
        r.blob = c->ns, r.blob_len = VCUDA_NONCE_SIZE;
        if (send_small(c, m, &r, why)) return -1;
        c->state = PRE_AUTH;
        return 0;
    }
    uint8_t want[VCUDA_PROOF_SIZE], mine[VCUDA_PROOF_SIZE];
    const vcuda_tenant *t = c->claimed;
    uint32_t theirs = (uint32_t)m->v[1], ours = cfg->frame_tags_off ? 0 : VCUDA_AUTH_TAGS;
    vcuda_auth_proof(t ? t->secret : s->tenants->nobody, t ? t->secret_len : sizeof s->tenants->nobody, 0, c->nc,
                     c->ns, theirs, want);
    int proven = vcuda_token_equal(m->blob, m->blob_len, want, sizeof want);
    if (!proven || !t) {
        /* tell the client why (it would otherwise see only EOF), then close; the same
         * answer whether the tenant or the proof was wrong, the log says which */
        char ignore[VCUDA_WHY_LEN];
        vcuda_reply_error(&r, 800 /* cudaErrorNotPermitted */, "vcuda: authentication failed");
        send_small(c, m, &r, ignore);
        if (!t)
            return snprintf(why, VCUDA_WHY_LEN, "authentication failed (unknown tenant \"%s\")",
                            *c->claimed_name ? c->claimed_name : "(not a tenant name)"), -1;
        return snprintf(why, VCUDA_WHY_LEN, "authentication failed (tenant %s: wrong proof: wrong secret or "
                        "replayed AUTH)", t->name), -1;
    }
    char refusal[VCUDA_WHY_LEN], ignore[VCUDA_WHY_LEN];
    int code;
    if (theirs != ours) { /* proven, so the client's own wish, not a relay's */
        vcuda_reply_error(&r, 800 /* cudaErrorNotPermitted */,
                          ours ? "vcuda: frame tags: this server requires them (unset VCUDA_FRAME_TAGS=off)"
                               : "vcuda: frame tags: this server runs without them (--frame-tags off): set "
                                 "VCUDA_FRAME_TAGS=off to use it");
        send_small(c, m, &r, ignore);
        return snprintf(why, VCUDA_WHY_LEN, "refused: frame tags %s, the client asked %s", ours ? "on" : "off",
                        theirs & VCUDA_AUTH_TAGS ? "on" : "off"), -1;
    }
    if (admit(s, c, refusal, &code, why)) {
        vcuda_reply_error(&r, code, refusal);
        send_small(c, m, &r, ignore);
        return -1;
    }
    uint64_t hb = m->v[0];
    /* every later frame either way is tagged, under the values both AUTH frames carried
     * and the secret the proofs were made with, the tenant's (the reply below is not:
     * the session's first frame is the client's next request) */
    vcuda_session_start(&c->ses, 1, t->secret, t->secret_len, c->nc, c->ns, (uint32_t)hb, (uint32_t)cfg->device,
                        c->pub.peer);
    c->ses.untagged = !ours;
    c->heartbeat_ms = hb == 0 ? 1000 : hb < 5 ? 5 : hb > 60000 ? 60000 : (int)hb;
    if (cfg->handoff) { /* to the tenant's serving process, before the reply (see server_loop.h) */
        int rc = handed_add(s, c);
        if (rc) snprintf(refusal, sizeof refusal, "vcuda: server: out of memory");
        else if ((rc = cfg->handoff->hand(cfg->handoff->ctx, &c->pub, c->heartbeat_ms, &c->ses, refusal)))
            handed_end(s, c->pub.id);
        if (rc) {
            vcuda_reply_error(&r, 2 /* cudaErrorMemoryAllocation */, refusal);
            send_small(c, m, &r, ignore);
            return snprintf(why, VCUDA_WHY_LEN, "refused: %.*s", VCUDA_WHY_LEN - 10, refusal), -1;
        }
    }
    vcuda_auth_proof(t->secret, t->secret_len, 1, c->nc, c->ns, ours, mine);
    r.blob = mine, r.blob_len = sizeof mine;
    r.v[0] = (uint64_t)cfg->device, r.v[1] = ours, r.nv = 2;
    if (send_small(c, m, &r, why)) {
        if (!cfg->handoff) return -1; /* (dropped: free_conn counts it out of its tenant) */
        /* its serving process finds the connection broken and ends the session */
        vcuda_log_limited(cfg->log_prefix, "peer %s: AUTH reply failed: %s", c->pub.peer, why);
        free_conn(c);
        return 1;
    }
    vcuda_log_limited(cfg->log_prefix, "peer %s: authenticated (connection %llu, tenant %s)", c->pub.peer,
                      (unsigned long long)c->pub.id, t->name);
    if (cfg->handoff) { /* the loop's copy of the socket goes; the serving process has its own */
        free_conn(c);
        return 1;
    }
    return start_worker(s, c, why) ? -1 : 1;
}

static int start_worker(server *s, conn *c, char *why)
{
    pthread_attr_t a;
    --c->src->npre, ++c->src->nauthed; /* (the network loop's thread: see source) */
    c->state = AUTHED;
    c->wfd = c->pub.fd;
    pthread_mutex_init(&c->wlock, NULL);
    vcuda_buf_free(&c->out);
    atomic_store(&c->last_sent, vcuda_now_ms());
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 1u << 20);
    int rc = pthread_create(&c->thread, &a, worker_main, c);
    pthread_attr_destroy(&a);
    if (rc) {
        pthread_mutex_destroy(&c->wlock);
        c->state = PRE_AUTH;
        ++c->src->npre, --c->src->nauthed;
        return snprintf(why, VCUDA_WHY_LEN, "no worker thread: %s", strerror(rc)), -1;
    }
    pthread_mutex_lock(&s->mu);
    c->next = s->authed, s->authed = c, ++s->nauthed;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Reads what a pre-auth connection has without blocking.  0 to keep, 1 handed to a
 * worker, -1 to close (why set). */
static int on_readable(server *s, conn *c, char *why)
{
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (c->got < VCUDA_HEADER_SIZE) dst = c->hdr + c->got, want = VCUDA_HEADER_SIZE - c->got;
        else dst = c->pay + (c->got - VCUDA_HEADER_SIZE), want = VCUDA_HEADER_SIZE + c->h.payload_len - c->got;
        ssize_t n = want ? vcuda_recv_some(c->pub.fd, dst, want) : 0;
        if (want && n == 0) {
            if (c->got) snprintf(why, VCUDA_WHY_LEN, "truncated frame: EOF after %zu bytes", c->got);
            else snprintf(why, VCUDA_WHY_LEN, "client disconnected before authenticating");
            return -1;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            return snprintf(why, VCUDA_WHY_LEN, "recv: %s", strerror(errno)), -1;
        }
        c->got += (size_t)n;
        if (c->got == VCUDA_HEADER_SIZE && n > 0) {
            unsigned want_op = c->state == PRE_HELLO ? VCUDA_OP_HELLO : VCUDA_OP_AUTH;
            /* header first: nothing is read on a length not yet checked */
            if (vcuda_decode_header(c->hdr, VCUDA_HEADER_SIZE, &c->h, why)) return -1;
            if (c->h.opcode != want_op)
                return snprintf(why, VCUDA_WHY_LEN, "%s frame is %s, not %s", c->state == PRE_HELLO ? "first" : "second",
                                vcuda_opcode_name(c->h.opcode), vcuda_opcode_name(want_op)), -1;
            if (c->h.payload_len > HANDSHAKE_MAX)
                return snprintf(why, VCUDA_WHY_LEN, "%s payload of %u bytes > %u", vcuda_opcode_name(want_op),
                                c->h.payload_len, HANDSHAKE_MAX), -1;
        }
        if (c->got >= VCUDA_HEADER_SIZE && c->got == VCUDA_HEADER_SIZE + (size_t)c->h.payload_len) {
            vcuda_msg m;
            if (vcuda_decode_payload(&c->h, c->pay, c->h.payload_len, &m, why)) return -1;
            c->got = 0;
            int rc = handshake(s, c, &m, why);
            if (rc) return rc;
        }
    }
}

/* Which pre-auth connection to drop for a new one (pre[] is oldest first).  Stalled:
 * older than a handshake needs, whatever it sent; idle: nothing sent yet.  First an
 * address holding more than its share pays (its oldest stalled, idle, then any one),
 * then the oldest stalled one from anywhere, the oldest idle one, and last the oldest
 * of the address holding most.  A client that speaks the protocol is through in an
 * RTT: it goes only when its own address floods, or when no stalled or idle socket of
 * anyone else is left. */
static int victim(conn **pre, int n, int share, int64_t now)
{
    int stale_over = -1, idle_over = -1, stale = -1, idle = -1, heavy_first = 0;
    const source *heavy = pre[0]->src;
    for (int i = 0; i < n; ++i) {
        const source *src = pre[i]->src;
        int old = now - pre[i]->born >= PREAUTH_GRACE_MS, quiet = pre[i]->state == PRE_HELLO && !pre[i]->got;
        int over = src->npre > share;
        if (old && stale < 0) stale = i;
        if (quiet && idle < 0) idle = i;
        if (over && old && stale_over < 0) stale_over = i;
        if (over && quiet && idle_over < 0) idle_over = i;
        if (src->npre > heavy->npre) heavy = src, heavy_first = i; /* (i: its first) */
    }
    if (stale_over >= 0) return stale_over;
    if (idle_over >= 0) return idle_over;
    if (heavy->npre > share) return heavy_first;
    if (stale >= 0) return stale;
    if (idle >= 0) return idle;
    return heavy_first;
}

/* An address's oldest pre-auth connection that has stalled, or -1. */
static int oldest_stalled_of(conn **pre, int n, const source *src, int64_t now)
{
    for (int i = 0; i < n; ++i)
        if (pre[i]->src == src && now - pre[i]->born >= PREAUTH_GRACE_MS) return i;
    return -1;
}

/* Joins finished workers; with `all`, first tells every worker to stop. */
static void reap(server *s, int all)
{
    pthread_mutex_lock(&s->mu);
    if (all)
        for (conn *c = s->authed; c; c = c->next) {
            pthread_mutex_lock(&c->wlock);
            if (c->pub.fd >= 0 && !c->ucx) shutdown(c->pub.fd, SHUT_RDWR); /* wakes its read */
            pthread_mutex_unlock(&c->wlock);
        }
    conn **pp = &s->authed;
    while (*pp) {
        conn *c = *pp;
        if (all || atomic_load(&c->done)) {
            *pp = c->next, --s->nauthed;
            pthread_mutex_unlock(&s->mu);
            pthread_join(c->thread, NULL);
            free_conn(c);
            pthread_mutex_lock(&s->mu);
        } else {
            pp = &c->next;
        }
    }
    pthread_mutex_unlock(&s->mu);
}

/* PROGRESS for busy workers; returns the ms until the next one is due (<= cap). */
static int heartbeats(server *s, int cap)
{
    int64_t now = vcuda_now_ms();
    int wait = cap;
    pthread_mutex_lock(&s->mu);
    for (conn *c = s->authed; c; c = c->next) {
        if (!atomic_load(&c->busy) || atomic_load(&c->done) || c->ucx) continue;
        int64_t since = atomic_load(&c->busy_since), sent = atomic_load(&c->last_sent);
        int64_t ref = since > sent ? since : sent, due = ref + c->heartbeat_ms - now;
        if (due <= 0) heartbeat(c, now), due = c->heartbeat_ms;
        if (due < wait) wait = (int)due;
    }
    pthread_mutex_unlock(&s->mu);
    return wait < 1 ? 1 : wait;
}

/* Marks the authenticated connections whose clients closed their side (polled for
 * POLLRDHUP only: requests arriving wake nobody here). */
static void mark_gone(conn **watch, const struct pollfd *pf, int n)
{
    for (int i = 0; i < n; ++i)
        if (pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) atomic_store(&watch[i]->gone, 1);
}

/* Drops pre-auth connection v (its reason in why) from pre[], keeping the order. */
static void drop_at(server *s, conn **pre, int *npre, int v, const char *why)
{
    drop_pre(s, pre[v], why);
    memmove(pre + v, pre + v + 1, (size_t)(*npre - v - 1) * sizeof *pre);
    --*npre;
}

vcuda_server *vcuda_server_new(const vcuda_server_config *cfg)
{
    server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = cfg;
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

int vcuda_server_adopt(vcuda_server *s, const vcuda_conn *from, int heartbeat_ms, const vcuda_session *ses,
                       char *why)
{
    conn *c = calloc(1, sizeof *c);
    source *src = c ? source_of(s, from->peer) : NULL;
    if (!src) {
        free(c);
        vcuda_close(from->fd);
        return snprintf(why, VCUDA_WHY_LEN, "no memory for a connection"), -1;
    }
    c->src = src, ++src->npre; /* (start_worker counts it as a session) */
    c->pub.fd = from->fd;
    c->pub.id = from->id;
    memcpy(c->pub.peer, from->peer, sizeof c->pub.peer);
    c->pub.peer[sizeof c->pub.peer - 1] = 0;
    c->pub.tenant = from->tenant; /* (counted by the process that admitted it: not joined here) */
    c->cfg = s->cfg, c->srv = s;
    c->ucx = vcuda_ucx_is(from->fd);
    c->heartbeat_ms = heartbeat_ms;
    c->ses = *ses;
    if (start_worker(s, c, why)) {
        free_conn(c);
        return -1;
    }
    return 0;
}

int vcuda_server_turn(vcuda_server *s, struct pollfd *fds, int n, int cap_ms, const sigset_t *sigmask)
{
    int wait = heartbeats(s, cap_ms);
    if (wait > cap_ms) wait = cap_ms < 0 ? 0 : cap_ms;
    /* one wait for the caller's fds and the sessions' sockets (after them) */
    int nw = 0;
    pthread_mutex_lock(&s->mu);
    size_t need = (size_t)n + (size_t)s->nauthed;
    if (need > s->cap) {
        size_t cap = need < 32 ? 64 : 2 * need;
        struct pollfd *pf = realloc(s->pf, cap * sizeof *pf);
        if (pf) s->pf = pf;
        conn **w = pf ? realloc(s->watch, cap * sizeof *w) : NULL;
        if (w) s->watch = w, s->cap = cap; /* (else fewer are watched this turn) */
    }
    struct pollfd *pf = (size_t)n <= s->cap ? s->pf : fds;
    if (pf != fds) {
        memcpy(pf, fds, (size_t)n * sizeof *fds);
        for (conn *c = s->authed; c && (size_t)(n + nw) < s->cap; c = c->next)
            if (!c->ucx && !atomic_load(&c->done) && !atomic_load(&c->gone)) {
                pf[n + nw] = (struct pollfd){.fd = c->wfd, .events = POLLRDHUP};
                s->watch[nw++] = c;
            }
    }
    pthread_mutex_unlock(&s->mu);
    struct timespec ts = {wait / 1000, (long)(wait % 1000) * 1000000L};
    int r = ppoll(pf, (nfds_t)(n + nw), &ts, sigmask), err = errno, ready = 0;
    for (int i = 0; i < n; ++i) {
        if (pf != fds) fds[i].revents = pf[i].revents;
        ready += r > 0 && fds[i].revents;
    }
    if (r > 0) mark_gone(s->watch, pf + n, nw); /* (only this thread frees connections) */
    reap(s, 0); /* a session that ended frees its slot before the caller admits anyone */
    log_tick(0);
    if (r < 0) return errno = err, -1;
    return ready;
}

void vcuda_server_end(vcuda_server *s)
{
    reap(s, 1);
    while (s->handed) handed_end(s, s->handed->id);
    log_tick(1);
    pthread_mutex_destroy(&s->mu);
    free(s->pf), free(s->watch), free(s);
}

int vcuda_server_run(const vcuda_server_config *cfg)
{
    int maxpre = cfg->max_preauth > 0 ? cfg->max_preauth : 128, npre = 0;
    int share = maxpre / 4 > 2 ? maxpre / 4 : 2; /* of the pre-auth slots, per address */
    server *s = vcuda_server_new(cfg);
    conn **pre = calloc((size_t)maxpre, sizeof *pre);
    struct pollfd *pf = calloc((size_t)maxpre + 1, sizeof *pf);
    char *pending = calloc((size_t)maxpre + 1, 1); /* UCX: ready without poll() saying so */
    uint64_t next_id = 1;
    char why[VCUDA_WHY_LEN];
    if (!s || !pre || !pf || !pending) {
        fprintf(stderr, "%s: out of memory\n", cfg->log_prefix);
        if (s) vcuda_server_end(s);
        free(pre), free(pf), free(pending);
        return -1;
    }
    vcuda_tenants single; /* without a table: the token is the secret of "default" */
    memset(&single, 0, sizeof single);
    if (cfg->tenants) s->tenants = cfg->tenants;
    else if (vcuda_tenants_single(&single, cfg->token, cfg->token_len, 0, why) == 0) s->tenants = &single;
    else {
        fprintf(stderr, "%s: %s\n", cfg->log_prefix, why);
        vcuda_server_end(s);
        free(pre), free(pf), free(pending);
        return -1;
    }
    int listen_ucx = vcuda_ucx_is(cfg->listen_fd);
    /* several accepts per turn: the last one must find the queue empty, not wait */
    if (!listen_ucx) fcntl(cfg->listen_fd, F_SETFL, fcntl(cfg->listen_fd, F_GETFL) | O_NONBLOCK);
    while (!*cfg->stop) {
        int64_t now = vcuda_now_ms();
        int wait = 200; /* re-check *stop at least 5x a second */
        pf[0] = (struct pollfd){.fd = cfg->listen_fd, .events = POLLIN};
        pending[0] = (char)vcuda_fd_pending(cfg->listen_fd);
        for (int i = 0; i < npre; ++i) {
            pf[i + 1] = (struct pollfd){.fd = pre[i]->pub.fd, .events = POLLIN};
            pending[i + 1] = (char)vcuda_fd_pending(pre[i]->pub.fd);
            if (pre[i]->deadline - now < wait) wait = pre[i]->deadline - now < 0 ? 0 : (int)(pre[i]->deadline - now);
        }
        for (int i = 0; i <= npre; ++i)
            if (pending[i]) wait = 0;
        int r = vcuda_server_turn(s, pf, npre + 1, wait, NULL);
        for (int i = 0; i <= npre; ++i)
            if (pending[i]) pf[i].revents |= POLLIN, r = r > 0 ? r : 1;
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "%s: poll: %s\n", cfg->log_prefix, strerror(errno));
            break;
        }
        /* (before any admission, as the sessions served here: those that ended in other
         * processes free their slots now) */
        if (cfg->handoff) cfg->handoff->turn(cfg->handoff->ctx, handed_end, s);
        now = vcuda_now_ms();
        /* handshakes first, compacting the array (oldest first stays first) */
        int kept = 0;
        for (int i = 0; i < npre; ++i) {
            conn *c = pre[i];
            int rc = 0;
            if (r > 0 && (pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) rc = on_readable(s, c, why);
            if (rc == 0 && now >= c->deadline) {
                if (c->got)
                    snprintf(why, VCUDA_WHY_LEN, "stalled mid-frame after %zu bytes: timed out after %d ms", c->got,
                             cfg->frame_timeout_ms);
                else
                    snprintf(why, VCUDA_WHY_LEN, "no %s within %d ms", c->state == PRE_HELLO ? "HELLO" : "AUTH",
                             cfg->frame_timeout_ms);
                rc = -1;
            }
            if (rc < 0) drop_pre(s, c, why);
            else if (rc == 0) pre[kept++] = c;
        }
        npre = kept;
        /* A process that is stopping (a sticky error: a fresh one takes over the socket)
         * leaves new connections queued for its successor instead of dropping them. */
        if (r > 0 && (pf[0].revents & POLLIN) && !*cfg->stop) {
            for (int k = 0; k < ACCEPTS_PER_TURN; ++k) {
                char peer[64];
                int fd = vcuda_accept(cfg->listen_fd, peer, sizeof peer);
                if (fd < 0) break; /* nothing (more) to accept: next round */
                conn *c = calloc(1, sizeof *c);
                source *src = c ? source_of(s, peer) : NULL;
                if (!src) {
                    vcuda_log_limited(cfg->log_prefix, "peer %s: closed: out of memory", peer);
                    vcuda_close(fd);
                    free(c);
                    break;
                }
                c->srv = s;
                c->src = src, ++src->npre; /* (counted from here: src lives while c does) */
                now = vcuda_now_ms();
                /* an address past its share makes room itself, from its stalled ones */
                int v = src->npre > share ? oldest_stalled_of(pre, npre, src, now) : -1;
                if (v >= 0) {
                    snprintf(why, VCUDA_WHY_LEN, "dropped: stalled while %s holds %d of the %d pre-auth slots "
                             "(its share: %d)", src->name, src->npre, maxpre, share);
                    drop_at(s, pre, &npre, v, why);
                }
                if (npre == maxpre) { /* the cap: someone else makes room */
                    v = victim(pre, npre, share, now);
                    snprintf(why, VCUDA_WHY_LEN, "dropped after %lld ms: %d connections not yet authenticated "
                             "(the cap)", (long long)(now - pre[v]->born), maxpre);
                    drop_at(s, pre, &npre, v, why);
                }
                c->pub.fd = fd;
                c->cfg = cfg;
                c->pub.id = next_id++;
                c->ucx = listen_ucx;
                memcpy(c->pub.peer, peer, sizeof peer);
                c->born = now;
                c->deadline = now + cfg->frame_timeout_ms; /* the handshake must come promptly */
                int rc = on_readable(s, c, why); /* a HELLO often arrives with the connection */
                if (rc < 0) drop_pre(s, c, why);
                else if (rc == 0) pre[npre++] = c;
                if (listen_ucx) break; /* one per turn: UCX accepts are driven by progress */
            }
        }
    }
    for (int i = 0; i < npre; ++i) drop_pre(s, pre[i], "server shutting down");
    vcuda_server_end(s);
    vcuda_tenants_free(&single); /* (after the sessions that pointed into it) */
    free(pre), free(pf), free(pending);
    return 0;
}
