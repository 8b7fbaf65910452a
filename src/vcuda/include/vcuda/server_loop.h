/* vcuda server shell: one poll() loop serving many client connections at once.
 *
 * Each connection is read incrementally (header, then the declared payload) so a client
 * that stalls mid-frame delays nobody; it is closed when its frame deadline passes.
 * The first frame must be HELLO with the right token (constant-time compare); before
 * that nothing but a HELLO-sized payload is ever read or allocated.  Any failed check
 * closes that connection with one stderr line naming the peer and the reason; the
 * others keep being served.  PING (keep-alive) and SINK (transport benchmark) are
 * answered here; every other request of an authenticated connection goes to the
 * handler.  Requests flagged VCUDA_FLAG_MORE (chunked copies only) get no reply. */
#ifndef VCUDA_SERVER_LOOP_H
#define VCUDA_SERVER_LOOP_H

#include "vcuda/net.h"

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
} vcuda_conn;

struct vcuda_handler {
    void *ctx;
    /* req is a validated request.  Fill reply's fields (opcode, request id and the
     * REPLY flag are set by the loop); for a CUDA error set VCUDA_FLAG_ERROR with
     * v[0] = error code and str = message (vcuda_reply_error does).  Pointers in reply
     * must stay valid until the next call for this connection.  Return 0 to send the
     * reply, -1 to close the connection (reason in why, VCUDA_WHY_LEN bytes). */
    int (*handle)(void *ctx, vcuda_conn *c, const vcuda_msg *req, vcuda_msg *reply, char *why);
    /* Called exactly once per authenticated connection when it goes away, for any
     * reason: free everything the client owned. */
    void (*disconnect)(void *ctx, vcuda_conn *c);
};

typedef struct {
    int listen_fd;
    const uint8_t *token;
    size_t token_len;
    int device;          /* reported in the HELLO reply */
    int frame_timeout_ms; /* a started frame, HELLO after connect, and each reply send */
    int max_conns;       /* further connections are accepted and closed with a log line */
    const struct vcuda_handler *handler;
    volatile sig_atomic_t *stop; /* loop returns (after disconnecting all) when set */
    const char *log_prefix;      /* e.g. "vcuda-server" */
    volatile uint64_t *pings;    /* optional (may be NULL): incremented per PING or TOUCH (keep-alive) */
    int spin_us;                 /* after a request, wait this long for the next without poll() */
} vcuda_server_config;

/* Runs until *stop; 0, or -1 if the loop itself failed (message on stderr). */
int vcuda_server_run(const vcuda_server_config *cfg);

/* For a handler answering with several frames (the chunks of a D2H copy): sends r now
 * with VCUDA_FLAG_MORE; the handler's own reply is the last frame.  0 or -1 (why set;
 * the handler then returns -1). */
int vcuda_send_more(vcuda_conn *c, const vcuda_msg *req, vcuda_msg *r, char *why);

/* Helper for handlers: turns reply into an error reply carrying `code` and `msg`
 * (msg must outlive the send: a static string or the conn's own storage). */
void vcuda_reply_error(vcuda_msg *reply, int code, const char *msg);

#ifdef __cplusplus
}
#endif
#endif
