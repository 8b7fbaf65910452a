/* vcuda client core: virtual devices and failure handling (see client.h). */
#define _POSIX_C_SOURCE 200809L
#include "vcuda/client.h"

#include "vcuda/net.h"
#include "vcuda/tenants.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define fail(why, ...) vcuda_fail(why, -1, __VA_ARGS__)

typedef struct {
    char host[256];
    uint16_t port;
    int ucx;        /* "ucx://host:port" */
    char name[280]; /* as given */
} endpoint;

typedef struct {
    endpoint ep;
    int fd;
    int lost;
    pthread_mutex_t mu; /* one request/reply at a time per connection */
    vcuda_buf buf;      /* calls' frames; reply pointers live here */
    vcuda_buf ka_buf;   /* keep-alive's own, so it never clobbers a caller's reply */
    vcuda_buf pb;       /* PROGRESS frames read while a send waits (the frame's head is in buf) */
    uint64_t sending_id; /* request being sent: PROGRESS up to this id is accepted */
    vcuda_session ses;   /* frame tags (mac.h); under mu like everything on fd */
    uint64_t next_id;
    int64_t last_use;
    vcuda_client_stats stats; /* under mu */
} device;

static device devs[VCUDA_MAX_DEVICES];
static int ndev, timeout_ms = VCUDA_DEFAULT_TIMEOUT_MS, keepalive_ms, chunk_kib = 1024;
/* A session idle this long gets a PING: a server closes sessions idle past its
 * --idle-timeout-s (default 600 s), and a program computing on its CPU for longer must not
 * lose its GPU state for it. */
static int idle_ping_ms = 120000;
static uint8_t token[VCUDA_MAX_TOKEN];
static size_t token_len;
static char tenant[VCUDA_TENANT_NAME_MAX + 1]; /* VCUDA_TENANT */
static pthread_t ka_thread;
static int ka_running;
static atomic_int ka_stop;
static int stats_wanted, stats_printed; /* VCUDA_STATS */


const char *vcuda_client_status_name(vcuda_client_status s)
{
    static const char *const n[] = {"ok", "bad device", "bad request", "remote error",
                                    "device unavailable"};
    return (unsigned)s < 5 ? n[s] : "unknown";
}

int vcuda_client_cuda_error(vcuda_client_status s)
{
    switch (s) {
    case VCUDA_CLIENT_OK: return 0;
    case VCUDA_CLIENT_BAD_DEVICE: return 101;  /* cudaErrorInvalidDevice */
    case VCUDA_CLIENT_BAD_REQUEST: return 1;   /* cudaErrorInvalidValue */
    case VCUDA_CLIENT_UNAVAILABLE: return 46;  /* cudaErrorDevicesUnavailable */
    default: return 999;                       /* cudaErrorUnknown */
    }
}

/* Integer env var in [lo, hi]; def if unset or empty.  0 or -1 (why set). */
static int env_int(const char *name, int def, int lo, int hi, int *out, char *why)
{
    const char *s = getenv(name);
    char *end;
    *out = def;
    if (!s || !*s) return 0;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < lo || v > hi)
        return fail(why, "%s='%s' is not an integer in [%d, %d]", name, s, lo, hi);
    *out = (int)v;
    return 0;
}

/* "host:port,host:port,..." -> eps; count or -1 (why names the bad entry). */
static int parse_list(const char *var, const char *s, endpoint *eps, int max, char *why)
{
    int n = 0;
    while (s) {
        const char *c = strchr(s, ',');
        size_t len = c ? (size_t)(c - s) : strlen(s);
        char entry[280];
        if (n == max) return fail(why, "%s has more than %d entries", var, max);
        if (len == 0) return fail(why, "%s entry %d is empty", var, n + 1);
        if (len >= sizeof entry)
            return fail(why, "%s entry %d '%.40s...' is too long", var, n + 1, s);
        memcpy(entry, s, len), entry[len] = 0;
        endpoint *e = &eps[n];
        if (vcuda_parse_endpoint(entry, &e->ucx, e->host, &e->port) || !e->host[0] || e->port == 0)
            return fail(why, "%s entry %d '%s' is not [tcp://|ucx://]host:port (port 1-65535)", var, n + 1, entry);
        if (e->ucx && !vcuda_have_ucx())
            return fail(why, "%s entry %d '%s': this vcuda was built without UCX", var, n + 1, entry);
        memcpy(e->name, entry, len + 1);
        ++n;
        s = c ? c + 1 : NULL;
    }
    return n;
}

/* A server busy on the GPU tells us it is alive with PROGRESS frames for a request we
 * sent (its id is at most the newest we sent). */
static int is_progress(const device *d, const vcuda_msg *m, uint64_t newest)
{
    (void)d;
    return m->hdr.opcode == VCUDA_OP_PROGRESS && (m->hdr.flags & VCUDA_FLAG_REPLY) &&
           !(m->hdr.flags & ~(uint32_t)VCUDA_FLAG_REPLY) && m->hdr.request_id <= newest;
}

/* Input while a send waits for room: only PROGRESS may come then. */
static int progress_while_sending(void *arg, char *why)
{
    device *d = arg;
    vcuda_msg m;
    if (vcuda_recv_frame(d->fd, &d->ses, &m, &d->pb, timeout_ms, why)) return -1;
    if (!is_progress(d, &m, d->sending_id))
        return fail(why, "%s frame from the server while it was being sent a request", vcuda_opcode_name(m.hdr.opcode));
    return 1;
}

/* Sends req as request `id` with `flags` (mutex held).  OK, BAD_REQUEST (did not encode:
 * nothing was sent) or UNAVAILABLE.  The deadline restarts with each PROGRESS frame a
 * busy server sends meanwhile. */
static vcuda_client_status send_req(device *d, const vcuda_msg *req, uint64_t id, uint32_t flags,
                                    vcuda_buf *b, int tmo, char *why)
{
    vcuda_msg m = *req;
    m.hdr.flags = flags;
    m.hdr.request_id = id;
    d->sending_id = id;
    vcuda_net_status s = vcuda_send_frame_live(d->fd, &d->ses, &m, b, tmo, progress_while_sending, d, why);
    d->last_use = vcuda_now_ms();
    return s == VCUDA_NET_PROTO ? VCUDA_CLIENT_BAD_REQUEST : s ? VCUDA_CLIENT_UNAVAILABLE : VCUDA_CLIENT_OK;
}

/* Receives the reply to request `id` of opcode `op`; *more says whether another chunk
 * follows (only D2H replies may say so).  OK, REMOTE_ERROR or UNAVAILABLE. */
static vcuda_client_status recv_reply(device *d, uint64_t id, unsigned op, vcuda_msg *rep,
                                      int *more, vcuda_buf *b, uint8_t *dst, size_t cap, int tmo, char *why)
{
    vcuda_net_status s;
    /* liveness is separate from the call's duration: each PROGRESS restarts the wait,
     * so a synchronize on long GPU work succeeds while a dead or stopped server is
     * still detected within tmo */
    while (!(s = vcuda_recv_frame_to(d->fd, &d->ses, rep, b, dst, cap, tmo, why)) && is_progress(d, rep, id)) {}
    d->last_use = vcuda_now_ms();
    if (s) return VCUDA_CLIENT_UNAVAILABLE;
    *more = (rep->hdr.flags & VCUDA_FLAG_MORE) != 0;
    if (!(rep->hdr.flags & VCUDA_FLAG_REPLY) || rep->hdr.request_id != id || rep->hdr.opcode != op ||
        (*more && (!VCUDA_CHUNKED_REPLY(op) || (rep->hdr.flags & VCUDA_FLAG_ERROR)))) {
        fail(why, "reply does not match request %llu (%s)", (unsigned long long)id, vcuda_opcode_name(op));
        return VCUDA_CLIENT_UNAVAILABLE;
    }
    return rep->hdr.flags & VCUDA_FLAG_ERROR ? VCUDA_CLIENT_REMOTE_ERROR : VCUDA_CLIENT_OK;
}

/* One request/reply on d (mutex held).  OK, REMOTE_ERROR, BAD_REQUEST or UNAVAILABLE
 * (the connection is then unusable; the caller marks the device lost). */
static vcuda_client_status exchange(device *d, const vcuda_msg *req, vcuda_msg *rep,
                                    vcuda_buf *b, int tmo, char *why)
{
    uint64_t id = ++d->next_id;
    int64_t dl = vcuda_now_ms() + tmo;
    int more;
    vcuda_client_status s = send_req(d, req, id, 0, b, tmo, why);
    if (s) return s;
    int left = (int)(dl - vcuda_now_ms());
    s = recv_reply(d, id, req->hdr.opcode, rep, &more, b, NULL, 0, left > 0 ? left : 0, why);
    if (s == VCUDA_CLIENT_OK && more) {
        fail(why, "multi-frame reply to %s", vcuda_opcode_name(req->hdr.opcode));
        return VCUDA_CLIENT_UNAVAILABLE;
    }
    return s;
}

static void mark_lost(device *d, int ordinal, const char *why)
{
    if (d->lost) return;
    d->lost = 1;
    vcuda_close(d->fd);
    d->fd = -1;
    fprintf(stderr, "vcuda: server %s (device %d) lost: %s; its calls now fail with "
            "cudaErrorDevicesUnavailable\n", d->ep.name, ordinal, why);
}

/* The interval at which a busy server reports progress: a few per timeout, so one
 * late frame is not yet a lost server. */
static int heartbeat_ms(void) { return timeout_ms / 4 < 5 ? 5 : timeout_ms / 4; }

/* Connect + handshake + PING within the timeout; 0 with d->fd open, or -1 (why set).
 * A connection dropped before the handshake completed is tried again until the
 * timeout: a server replacing its serving process after a sticky error drops what it
 * had accepted but not yet authenticated, and its successor takes new connections. */
static int health_check(device *d, char *why)
{
    vcuda_msg m, r;
    const int64_t give_up = vcuda_now_ms() + timeout_ms;
    int hs;
    for (;;) {
        d->fd = vcuda_connect_ep(d->ep.ucx, d->ep.host, d->ep.port, timeout_ms, why);
        if (d->fd < 0) return -1;
        snprintf(d->ses.peer, sizeof d->ses.peer, "%s", d->ep.name); /* for a refused frame's message */
        hs = vcuda_handshake(d->fd, tenant, token, token_len, heartbeat_ms(), timeout_ms, &d->buf, NULL, &d->ses, why);
        if (hs != -3 || vcuda_now_ms() + 50 >= give_up) break;
        vcuda_close(d->fd);
        struct timespec pause = {0, 50 * 1000000L};
        nanosleep(&pause, NULL);
    }
    vcuda_client_status s = VCUDA_CLIENT_UNAVAILABLE;
    if (hs == 0) {
        d->next_id = 2; /* the handshake's ids */
        memset(&m, 0, sizeof m);
        m.hdr.opcode = VCUDA_OP_PING;
        s = exchange(d, &m, &r, &d->buf, timeout_ms, why);
    }
    if (!s) return 0;
    vcuda_close(d->fd);
    d->fd = -1;
    return -1;
}

static void *keepalive_main(void *arg)
{
    (void)arg;
    int every = keepalive_ms > 0 ? keepalive_ms : idle_ping_ms;
    int period = every / 4 > 0 ? (every / 4 < 1000 ? every / 4 : 1000) : 1;
    struct timespec ts = {period / 1000, (long)(period % 1000) * 1000000L};
    while (!atomic_load(&ka_stop)) {
        for (int i = 0; i < ndev; ++i) {
            device *d = &devs[i];
            if (pthread_mutex_trylock(&d->mu)) continue; /* a call is using it: not idle */
            int64_t idle = vcuda_now_ms() - d->last_use;
            int touch = keepalive_ms > 0 && idle >= keepalive_ms;
            if (!d->lost && (touch || (idle_ping_ms > 0 && idle >= idle_ping_ms))) {
                /* P003's dummy transfer: a tiny D2H copy keeps the whole path warm (a
                 * PING would skip the GPU); an error reply still proves the server alive.
                 * Without the keep-alive, a PING now and then keeps the session. */
                vcuda_msg m, r;
                char why[VCUDA_WHY_LEN];
                memset(&m, 0, sizeof m);
                m.hdr.opcode = touch ? VCUDA_OP_TOUCH : VCUDA_OP_PING;
                vcuda_client_status s = exchange(d, &m, &r, &d->ka_buf, timeout_ms, why);
                ++d->stats.keepalives;
                if (s != VCUDA_CLIENT_OK && s != VCUDA_CLIENT_REMOTE_ERROR) mark_lost(d, i, why);
            }
            pthread_mutex_unlock(&d->mu);
        }
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* VCUDA_STATS: one JSON line per device on stderr, once per session (at close, or at
 * exit for a program that never closes, as the libcudart stand-in does not). */
static void print_stats(void)
{
    if (!stats_wanted || stats_printed) return;
    stats_printed = 1;
    for (int i = 0; i < ndev; ++i) {
        const vcuda_client_stats *t = &devs[i].stats;
        fprintf(stderr, "{\"bench\":\"vcuda-client\",\"metric\":\"round_trips\",\"value\":%llu,\"unit\":\"1\","
                        "\"device\":%d,\"server\":\"%s\",\"posts\":%llu,\"keepalives\":%llu,"
                        "\"bytes_to_server\":%llu,\"bytes_from_server\":%llu}\n",
                (unsigned long long)t->round_trips, i, devs[i].ep.name, (unsigned long long)t->posts,
                (unsigned long long)t->keepalives, (unsigned long long)t->bytes_to_server,
                (unsigned long long)t->bytes_from_server);
    }
    fflush(stderr);
}

int vcuda_client_get_stats(int dev, vcuda_client_stats *out)
{
    if (dev < 0 || dev >= ndev) return -1;
    pthread_mutex_lock(&devs[dev].mu);
    *out = devs[dev].stats;
    pthread_mutex_unlock(&devs[dev].mu);
    return 0;
}

void vcuda_client_close(void)
{
    print_stats();
    if (ka_running) {
        atomic_store(&ka_stop, 1);
        pthread_join(ka_thread, NULL);
        ka_running = 0;
    }
    for (int i = 0; i < ndev; ++i) {
        if (devs[i].fd >= 0) vcuda_close(devs[i].fd);
        vcuda_buf_free(&devs[i].buf);
        vcuda_buf_free(&devs[i].ka_buf);
        vcuda_buf_free(&devs[i].pb);
        pthread_mutex_destroy(&devs[i].mu);
    }
    ndev = 0;
}

int vcuda_client_open(char *why)
{
    static endpoint prim[VCUDA_MAX_DEVICES], spare[VCUDA_MAX_DEVICES];
    int spin, nap_us, nap_ms, stats;
    static int exit_hook;
    vcuda_client_close();
    const char *sv = getenv("VCUDA_SERVERS"), *sp = getenv("VCUDA_SPARES");
    if (!sv || !*sv) return fail(why, "VCUDA_SERVERS is not set (host:port,host:port,...)");
    int np = parse_list("VCUDA_SERVERS", sv, prim, VCUDA_MAX_DEVICES, why);
    int ns = sp && *sp ? parse_list("VCUDA_SPARES", sp, spare, VCUDA_MAX_DEVICES, why) : 0;
    if (np < 0 || ns < 0) return -1;
    if (env_int("VCUDA_TIMEOUT_MS", VCUDA_DEFAULT_TIMEOUT_MS, 10, 600000, &timeout_ms, why) ||
        env_int("VCUDA_KEEPALIVE_MS", 0, 0, 60000, &keepalive_ms, why) ||
        env_int("VCUDA_IDLE_PING_MS", 120000, 0, 86400000, &idle_ping_ms, why) ||
        env_int("VCUDA_SPIN_US", 200, 0, 100000, &spin, why) ||
        env_int("VCUDA_CHUNK_KIB", 1024, 4, (int)(VCUDA_MAX_CHUNK / 1024), &chunk_kib, why) ||
        env_int("VCUDA_STATS", 0, 0, 1, &stats, why))
        return -1;
    /* naps while waiting for a reply: by default where the keep-alive asks for low latency */
    if (env_int("VCUDA_NAP_US", keepalive_ms > 0 ? VCUDA_NAP_US_DEFAULT : 0, 0, 100000, &nap_us, why) ||
        env_int("VCUDA_NAP_MS", 100, 0, 60000, &nap_ms, why))
        return -1;
    vcuda_net_set_spin_us(spin);
    vcuda_net_set_nap(nap_us, nap_ms);
    stats_wanted = stats, stats_printed = 0;
    if (stats && !exit_hook) exit_hook = atexit(print_stats) == 0;
    if (vcuda_token_load(token, &token_len, why)) return -1;
    const char *tn = getenv("VCUDA_TENANT");
    if (!tn || !*tn) tn = VCUDA_TENANT_DEFAULT;
    if (!vcuda_tenant_name_ok(tn, strlen(tn)))
        return fail(why, "VCUDA_TENANT=%.80s: a tenant name is 1 to %d of [A-Za-z0-9._-]", tn, VCUDA_TENANT_NAME_MAX);
    snprintf(tenant, sizeof tenant, "%s", tn);

    int next_spare = 0;
    for (int i = 0; i < np; ++i) {
        char err[VCUDA_WHY_LEN], serr[VCUDA_WHY_LEN];
        device *d = &devs[ndev];
        memset(d, 0, sizeof *d);
        d->ep = prim[i];
        if (health_check(d, err) == 0) goto ok;
        while (next_spare < ns) {
            memset(d, 0, sizeof *d);
            d->ep = spare[next_spare++];
            if (health_check(d, serr) == 0) {
                fprintf(stderr, "vcuda: server %s (device %d) unreachable: %s; using spare %s\n",
                        prim[i].name, i, err, d->ep.name);
                goto ok;
            }
            fprintf(stderr, "vcuda: spare %s unreachable: %s\n", d->ep.name, serr);
        }
        fprintf(stderr, "vcuda: server %s (device %d) unreachable: %s; device dropped\n",
                prim[i].name, i, err);
        continue;
    ok:
        pthread_mutex_init(&d->mu, NULL);
        ++ndev;
    }
    if ((keepalive_ms > 0 || idle_ping_ms > 0) && ndev > 0) {
        atomic_store(&ka_stop, 0);
        if (pthread_create(&ka_thread, NULL, keepalive_main, NULL) == 0) ka_running = 1;
        else fprintf(stderr, "vcuda: keep-alive thread not started; continuing without\n");
    }
    return 0;
}

int vcuda_client_device_count(void) { return ndev; }

size_t vcuda_client_chunk(void) { return (size_t)chunk_kib * 1024; }

const char *vcuda_client_device_server(int dev)
{
    return dev >= 0 && dev < ndev ? devs[dev].ep.name : NULL;
}

/* Locks device dev for a call; NULL (status in *st, why set) if it cannot be used. */
static device *acquire(int dev, vcuda_client_status *st, char *why)
{
    if (dev < 0 || dev >= ndev) {
        fail(why, "no vcuda device %d (%d present)", dev, ndev);
        *st = VCUDA_CLIENT_BAD_DEVICE;
        return NULL;
    }
    device *d = &devs[dev];
    pthread_mutex_lock(&d->mu);
    if (d->lost) {
        fail(why, "server %s (device %d) was lost earlier", d->ep.name, dev);
        pthread_mutex_unlock(&d->mu);
        *st = VCUDA_CLIENT_UNAVAILABLE;
        return NULL;
    }
    return d;
}

static vcuda_client_status release(device *d, int dev, vcuda_client_status s, const char *why)
{
    if (s == VCUDA_CLIENT_UNAVAILABLE) mark_lost(d, dev, why);
    pthread_mutex_unlock(&d->mu);
    return s;
}

vcuda_client_status vcuda_client_call(int dev, const vcuda_msg *req, vcuda_msg *reply,
                                      int tmo, char *why)
{
    char local[VCUDA_WHY_LEN];
    vcuda_client_status s;
    if (!why) why = local;
    device *d = acquire(dev, &s, why);
    if (!d) return s;
    s = exchange(d, req, reply, &d->buf, tmo > 0 ? tmo : timeout_ms, why);
    ++d->stats.round_trips;
    d->stats.bytes_to_server += req->blob_len;
    if (s == VCUDA_CLIENT_OK || s == VCUDA_CLIENT_REMOTE_ERROR) d->stats.bytes_from_server += reply->blob_len;
    return release(d, dev, s, why);
}

vcuda_client_status vcuda_client_post(int dev, const vcuda_msg *req, char *why)
{
    char local[VCUDA_WHY_LEN];
    vcuda_client_status s;
    if (!why) why = local;
    if (!VCUDA_NOREPLY_REQUEST(req->hdr.opcode))
        return fail(why, "%s needs a reply", vcuda_opcode_name(req->hdr.opcode)), VCUDA_CLIENT_BAD_REQUEST;
    device *d = acquire(dev, &s, why);
    if (!d) return s;
    s = send_req(d, req, ++d->next_id, VCUDA_FLAG_NOREPLY, &d->buf, timeout_ms, why);
    ++d->stats.posts;
    d->stats.bytes_to_server += req->blob_len;
    return release(d, dev, s, why);
}

vcuda_client_status vcuda_client_send_chunks(int dev, const vcuda_msg *req, unsigned addr_field,
                                             const uint8_t *data, uint64_t size, size_t chunk,
                                             vcuda_msg *reply, char *why)
{
    char local[VCUDA_WHY_LEN];
    vcuda_client_status s;
    if (!why) why = local;
    if (chunk == 0 || chunk > VCUDA_MAX_CHUNK || addr_field >= VCUDA_MAX_SCALARS)
        return fail(why, "chunk of %zu bytes outside [1, %u]", chunk, VCUDA_MAX_CHUNK), VCUDA_CLIENT_BAD_REQUEST;
    device *d = acquire(dev, &s, why);
    if (!d) return s;
    uint64_t id = ++d->next_id, off = 0;
    vcuda_msg m = *req;
    /* every chunk is a complete request at its own address; the server replies once */
    do {
        uint64_t n = size - off < chunk ? size - off : chunk;
        m.v[addr_field] = req->v[addr_field] + off;
        m.blob = data + off, m.blob_len = (uint32_t)n;
        off += n;
        s = send_req(d, &m, id, off < size ? VCUDA_FLAG_MORE : req->hdr.flags & VCUDA_FLAG_SYNC, &d->buf, timeout_ms, why);
    } while (!s && off < size);
    if (!s) {
        int more;
        s = recv_reply(d, id, req->hdr.opcode, reply, &more, &d->buf, NULL, 0, timeout_ms, why);
        if (s == VCUDA_CLIENT_OK && more) s = VCUDA_CLIENT_UNAVAILABLE, fail(why, "chunked reply to a chunked request");
    }
    ++d->stats.round_trips;
    d->stats.bytes_to_server += off;
    return release(d, dev, s, why);
}

vcuda_client_status vcuda_client_recv_chunks(int dev, const vcuda_msg *req, uint8_t *out,
                                             uint64_t size, vcuda_msg *reply, char *why)
{
    char local[VCUDA_WHY_LEN];
    vcuda_client_status s;
    if (!why) why = local;
    device *d = acquire(dev, &s, why);
    if (!d) return s;
    uint64_t id = ++d->next_id, got = 0;
    int more = 1;
    s = send_req(d, req, id, 0, &d->buf, timeout_ms, why);
    /* the server must send exactly `size` bytes: more or fewer is a broken server;
     * chunks land in `out` directly, never past its end */
    while (!s && more) {
        s = recv_reply(d, id, req->hdr.opcode, reply, &more, &d->buf, out + got, size - got, timeout_ms, why);
        if (s == VCUDA_CLIENT_UNAVAILABLE && strstr(why, "expected at most"))
            fail(why, "server sent more than the %llu bytes asked", (unsigned long long)size);
        if (s) break;
        got += reply->blob_len;
    }
    if (!s && got != size)
        s = VCUDA_CLIENT_UNAVAILABLE, fail(why, "server sent %llu of %llu bytes", (unsigned long long)got,
                                           (unsigned long long)size);
    ++d->stats.round_trips;
    d->stats.bytes_from_server += got;
    return release(d, dev, s, why);
}
