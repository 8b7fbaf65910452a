/* vcuda server shell: a network loop that never touches the GPU, and one worker thread
 * per authenticated client.
 *
 * The network loop (the caller's thread) accepts connections and authenticates them
 * as one of the server's tenants (HELLO/AUTH challenge-response, see proto.h, with the
 * secret of the tenant HELLO names, tenants.h) reading each incrementally, so a peer
 * that stalls delays nobody.  Before authentication nothing larger than a HELLO/AUTH
 * payload is read or allocated, the whole handshake must be done within
 * frame_timeout_ms of the connect, and unauthenticated connections are bounded, so
 * that sockets that stall -- idle, or after a HELLO, or mid-frame -- cannot lock out a
 * client that speaks the protocol (which is through in an RTT):
 *   - per source (peer address): one holding more than a quarter of max_preauth has
 *     its own oldest stalled connection (one older than a handshake needs, 250 ms,
 *     whatever it sent: idle, after a HELLO, mid-frame) dropped for each new one;
 *   - max_preauth in all: at the cap, a new connection displaces one of a source over
 *     its quarter (stalled, else idle, else its oldest), else the oldest stalled one,
 *     else the oldest that sent nothing yet, else the oldest of the source holding most.
 * Authenticated sessions are bounded too: max_conns in all, max_per_source from one
 * address and the tenant's MAX_CONNS of one tenant (tenants.h) at once (refused by name:
 * "server full", "too many connections from ADDR", "tenant NAME: connection limit N
 * reached"; all decided in one place, admit() in server_loop.c, with a handoff's own
 * cap), and a session with no request for idle_timeout_ms is closed (any request
 * counts, the clients' keep-alive included).  Connection lines (authenticated, closed
 * and why, resources released, and the serving processes connections start and end) are
 * logged one line each up to 20 per second, then summarized once a second: a flood of
 * connections cannot flood the log.
 *
 * An admitted connection gets its own worker thread: it reads that client's requests,
 * runs the handler (which may block in the driver for as long as the GPU work takes)
 * and writes the replies, so one client's synchronize, slow reading or
 * flood never delays another's PING.  While a worker is busy with a request longer
 * than the client's heartbeat interval, the network loop sends that client PROGRESS
 * frames (its liveness), never waiting for the socket.  Every frame after AUTH carries
 * a tag (proto.h, "authentication"): the worker checks each request's before decoding
 * it, and the worker's replies and the loop's PROGRESS frames get theirs under the
 * connection's write lock, in the order they go out.  Any failed check closes that
 * connection with one stderr line naming the peer and the reason; the others keep
 * being served.  A client that closes its side (EOF, reset) gets nothing more started:
 * requests it pipelined that are still unread or not yet begun are dropped with the
 * session.  PING (keep-alive) and SINK (transport benchmark) are answered without
 * the handler.  Requests flagged VCUDA_FLAG_MORE (chunked copies only) get no reply.
 *
 * With a handoff (--isolation process, server_isolate.h) this process only accepts,
 * authenticates and admits (admit() counts the sessions it handed over, per source and
 * per tenant too, until their serving process reports them ended, and asks the handoff
 * whether the tenant can be served): each admitted connection goes to its tenant's serving
 * process, whose workers (vcuda_server_adopt) read the client's socket themselves; the
 * heartbeats, the idle timeout and the watch for a client that left are done there, by
 * the same code (vcuda_server_turn). */
#ifndef VCUDA_SERVER_LOOP_H
#define VCUDA_SERVER_LOOP_H

#include "vcuda/net.h"
#include "vcuda/tenants.h"

#include <poll.h>
#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a handler sees of a connection; `user` is the handler's per-client state. */
typedef struct vcuda_conn {
    int fd;
    char peer[64]; /* "addr:port", for log lines */
    uint64_t id;   /* unique per server run */
    void *user;
    int end_session; /* a handler sets it to close the connection after this reply */
    /* the tenant it authenticated as (tenants.h), an entry of the serving process's
     * table: its quota is counted there; process isolation (server_isolate.h) keeps one
     * serving process per tenant */
    vcuda_tenant *tenant;
} vcuda_conn;

struct vcuda_handler {
    void *ctx;
    /* req is a validated request.  Fill reply's fields (opcode, request id and the
     * REPLY flag are set by the loop); for a CUDA error set VCUDA_FLAG_ERROR with
     * v[0] = error code and str = message (vcuda_reply_error does).  Pointers in reply
     * must stay valid until the next call for this connection.  Return 0 to send the
     * reply, -1 to close the connection (reason in why, VCUDA_WHY_LEN bytes).  Runs on
     * the connection's worker thread. */
    int (*handle)(void *ctx, vcuda_conn *c, const vcuda_msg *req, vcuda_msg *reply, char *why);
    /* Called exactly once per authenticated connection when it goes away, for any
     * reason, on its worker thread: free everything the client owned. */
    void (*disconnect)(void *ctx, vcuda_conn *c);
    /* Optional: called on the worker thread before its first request (e.g. to make the
     * GPU context current there).  0, or -1 to refuse the client (reason in why). */
    int (*attach)(void *ctx, vcuda_conn *c, char *why);
};

/* Authenticated connections served by another process (process isolation): set in
 * vcuda_server_config, the network loop hands each one over instead of starting a
 * worker for it. */
struct vcuda_handoff {
    void *ctx;
    /* Part of the admission (admit() in server_loop.c, after the client limit, the
     * per-source cap and the tenant's connection limit): 0 if a session of `tenant` (its
     * name) can be handed over now, -1 with the
     * refusal (sent to the client, and logged) in msg, VCUDA_WHY_LEN bytes. */
    int (*room)(void *ctx, const char *tenant, char *msg);
    /* After admission, before the AUTH reply: 0 when c (its fd duplicated, with
     * everything the worker needs: its frame tags' session ses, no frame tagged yet)
     * now belongs to a serving process, which reads the client's first request only
     * after the loop has sent the reply (the loop then closes its own copy); -1 refuses
     * the client with the reason in why, which the client is sent.  From 0 on, the
     * session counts against the caps until the handoff reports it ended. */
    int (*hand)(void *ctx, const vcuda_conn *c, int heartbeat_ms, const vcuda_session *ses, char *why);
    /* Once per loop turn (at least 5x a second): housekeeping, calling ended(arg, id)
     * once for each handed connection whose session is over (its end reported, or its
     * serving process gone). */
    void (*turn)(void *ctx, void (*ended)(void *arg, uint64_t id), void *arg);
};

typedef struct {
    int listen_fd;
    /* who may connect: the tenants table (tenants.h), or, if NULL, the one tenant
     * "default" whose secret is token (no quota, no connection limit of its own); a
     * connection's proofs and its frame tags' session key use its tenant's secret */
    const vcuda_tenants *tenants;
    const uint8_t *token;
    size_t token_len;
    int device;           /* reported in the AUTH reply */
    int frame_timeout_ms; /* a started frame, the handshake after connect, and each reply send */
    int max_conns;        /* authenticated clients (default 256); more are refused by name */
    int max_preauth;      /* connections not yet authenticated (default 128) */
    int max_per_source;   /* authenticated clients from one peer address (0: no cap) */
    int idle_timeout_ms;  /* a session without a request this long is closed (0: never) */
    int frame_tags_off;   /* --frame-tags off: sessions without frame tags (proto.h, VCUDA_AUTH_TAGS) */
    uint32_t max_frame;   /* largest request payload a client may send (default VCUDA_MAX_PAYLOAD) */
    const struct vcuda_handler *handler;
    volatile sig_atomic_t *stop; /* loop returns (after disconnecting all) when set */
    const char *log_prefix;      /* e.g. "vcuda-server" */
    volatile uint64_t *pings;    /* optional (may be NULL): incremented per PING or TOUCH (keep-alive) */
    int spin_us;                 /* after a request, wait this long for the next without poll() */
    /* After a keep-alive (TOUCH or PING: the client asks the server to stay ready, and no
     * burst of requests follows one) no spin: the next frame is waited for in ppoll()
     * slices of nap_us for up to nap_ms, then in poll() as after a spin.  A thread woken
     * every nap_us stays in a shallow idle state, so a request arriving between two
     * keep-alives is read without a deep wake-up.  Each worker measures its own CPU time
     * while it naps and lengthens the naps where wake-ups cost more than 4% of a core
     * (so an idle, kept-alive server stays under 5% on any machine), shortening them
     * again to nap_us when they cost less than 1.5% (0: off, spin and poll as after any
     * request). */
    int nap_us, nap_ms;
    const struct vcuda_handoff *handoff; /* optional: see above (the loop then starts no worker) */
} vcuda_server_config;

/* Runs until *stop; 0, or -1 if the loop itself failed (message on stderr). */
int vcuda_server_run(const vcuda_server_config *cfg);

/* The workers without the network loop, for a process fed connections that another
 * process accepted and authenticated (server_isolate.c): the same worker threads,
 * PROGRESS heartbeats, idle timeout, watch for clients that left and reaping as
 * vcuda_server_run (which runs on them too).  listen_fd, tenants, token, max_conns,
 * max_per_source and max_preauth of cfg are not used (each connection comes with its
 * tenant, and was admitted by the process that authenticated it). */
typedef struct vcuda_server vcuda_server;
vcuda_server *vcuda_server_new(const vcuda_server_config *cfg); /* NULL: out of memory */
/* A worker for the authenticated connection `c` (fd, peer, id, tenant -- an entry of
 * this process's table -- and the frame tags' session ses are copied; the fd belongs to
 * the server from here, closed by it on failure too).  The tenant's connection limit
 * was the admitting process's to decide: nothing is counted here.  0, or -1 (why). */
int vcuda_server_adopt(vcuda_server *s, const vcuda_conn *c, int heartbeat_ms, const vcuda_session *ses,
                       char *why);
/* One turn of the sessions' upkeep around the caller's wait: PROGRESS frames for busy
 * workers; a wait (ppoll, with sigmask; NULL: the thread's mask) of at most cap_ms, less
 * when a heartbeat is due, for the caller's pf[0..n) and with them the sessions'
 * sockets, watched for their clients leaving (nothing more is started for one that
 * left); then finished workers joined, so their slots are free for what the caller
 * admits next.  Call it again at once: the heartbeats are due then at the latest.
 * Returns how many of pf[0..n) have revents (0 on timeout), or -1 (errno: ppoll's). */
int vcuda_server_turn(vcuda_server *s, struct pollfd *pf, int n, int cap_ms, const sigset_t *sigmask);
/* Ends every session (their workers told to stop and joined), frees s. */
void vcuda_server_end(vcuda_server *s);

/* For a handler answering with several frames (the chunks of a D2H copy): sends r now
 * with VCUDA_FLAG_MORE; the handler's own reply is the last frame.  0 or -1 (why set;
 * the handler then returns -1). */
int vcuda_send_more(vcuda_conn *c, const vcuda_msg *req, vcuda_msg *r, char *why);

/* Helper for handlers: turns reply into an error reply carrying `code` and `msg`
 * (msg must outlive the send: a static string or the conn's own storage). */
void vcuda_reply_error(vcuda_msg *reply, int code, const char *msg);

/* Rate-limited log line (every line about one connection, or that connections can
 * cause as often as they come): printed while fewer than 20 lines went out this second
 * in this process, else counted and summarized once a second.  Thread-safe. */
void vcuda_log_limited(const char *prefix, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
