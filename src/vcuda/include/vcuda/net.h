/* vcuda TCP transport: blocking frame I/O with a deadline, connect, listen.
 *
 * Every call takes a timeout so that a peer that stalls (or a server that died without
 * a FIN reaching us) turns into an error within a bound, never a hang: the client
 * library maps that to cudaErrorDevicesUnavailable.  Sockets stay in blocking mode;
 * each read/write is preceded by poll() and issued with MSG_DONTWAIT, so a partial
 * transfer never blocks past the deadline.  MSG_NOSIGNAL: a dead peer is an error
 * return, not SIGPIPE. */
#ifndef VCUDA_NET_H
#define VCUDA_NET_H

#include "vcuda/mac.h"
#include "vcuda/proto.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    VCUDA_NET_OK = 0,
    VCUDA_NET_CLOSED,  /* orderly EOF before the first byte of a frame */
    VCUDA_NET_TIMEOUT, /* deadline passed (peer stalled or unreachable) */
    VCUDA_NET_IO,      /* socket error, EOF inside a frame, allocation failure */
    VCUDA_NET_PROTO    /* frame failed validation (header or payload) */
} vcuda_net_status;

const char *vcuda_net_status_name(vcuda_net_status s);

/* Frame buffer grown on demand, never beyond VCUDA_HEADER_SIZE + VCUDA_MAX_PAYLOAD +
 * VCUDA_TAG_SIZE (the header is validated before the payload length sizes anything).
 * Zero-init. */
typedef struct {
    uint8_t *data;
    size_t cap;
} vcuda_buf;
int vcuda_buf_reserve(vcuda_buf *b, size_t n); /* 0 or -1 (n over the bound / ENOMEM) */
void vcuda_buf_free(vcuda_buf *b);

/* Whole-buffer transfers against one deadline (timeout_ms < 0: none). */
vcuda_net_status vcuda_write_all(int fd, const void *p, size_t n, int timeout_ms, char *why);
vcuda_net_status vcuda_read_all(int fd, void *p, size_t n, int timeout_ms, char *why);

/* Frame I/O takes the connection's session (mac.h): NULL for the handshake's frames,
 * which carry no tag; with one, every frame sent gets its tag after the payload and every
 * frame received has its tag checked before its payload is decoded: a frame that fails
 * is a VCUDA_NET_PROTO error whose why names it ("frame N from PEER: bad authentication
 * tag ..."), after which the connection is of no further use.  A failed send likewise
 * leaves the connection unusable (the frame's sequence number was spent). */

/* Encodes m into b and sends it: the head from b, bulk bytes at the end of the frame
 * from where they lie (m->blob), and the tag, in one sendmsg where the socket takes it. */
vcuda_net_status vcuda_send_frame(int fd, vcuda_session *ses, const vcuda_msg *m, vcuda_buf *b, int timeout_ms,
                                  char *why);
/* The same, for a peer that may send frames while it is not reading ours (a server
 * busy on the GPU sends PROGRESS): while the send waits for room, fn(arg, why) is
 * called when input is waiting; it reads one frame and returns 1 (the peer is alive:
 * the deadline restarts), 0, or -1 (error, why set). */
typedef int (*vcuda_input_fn)(void *arg, char *why);
vcuda_net_status vcuda_send_frame_live(int fd, vcuda_session *ses, const vcuda_msg *m, vcuda_buf *b,
                                       int timeout_ms, vcuda_input_fn fn, void *arg, char *why);
/* Reads 24 header bytes, validates them, only then reads exactly the declared payload
 * (and the tag) into b, checks the tag and validates the payload.  m's str/blob point
 * into b (valid until b is reused). */
vcuda_net_status vcuda_recv_frame(int fd, vcuda_session *ses, vcuda_msg *m, vcuda_buf *b, int timeout_ms,
                                  char *why);

/* vcuda_recv_frame, except that a frame whose payload is a single bytes field (a D2H
 * reply chunk) has those bytes read straight into dst (no more than cap, else a
 * protocol error); m->blob then points at dst.  The tag is checked after the bytes
 * landed: on a failure dst holds whatever came. */
vcuda_net_status vcuda_recv_frame_to(int fd, vcuda_session *ses, vcuda_msg *m, vcuda_buf *b, uint8_t *dst,
                                     size_t cap, int timeout_ms, char *why);

/* TCP connect (host name or address) with a timeout; TCP_NODELAY.  fd or -1. */
int vcuda_connect(const char *host, uint16_t port, int timeout_ms, char *why);
/* Listening socket on addr (NULL or "": 127.0.0.1 -- exposing the server is an
 * explicit choice), port 0 = ephemeral; *bound_port (may be NULL) gets the port.
 * fd or -1. */
int vcuda_listen(const char *addr, uint16_t port, uint16_t *bound_port, char *why);
/* "ADDR:PORT", ":PORT" or "PORT" (ADDR then NULL); 0 or -1.  addr holds 256 bytes. */
int vcuda_parse_hostport(const char *s, char *addr, uint16_t *port);

/* ---- transports ------------------------------------------------------------------
 * An endpoint is "[tcp://]ADDR:PORT" or "ucx://ADDR:PORT".  A UCX connection is an fd
 * too (its worker's event fd), so everything above works on either; only these calls
 * differ, and the frame I/O above routes by fd.  UCX chooses RDMA where the network has
 * it: the path to P003's InfiniBand numbers on a real cluster. */
int vcuda_parse_endpoint(const char *s, int *ucx, char *addr, uint16_t *port);
int vcuda_have_ucx(void); /* 1 if built with UCX */
int vcuda_connect_ep(int ucx, const char *host, uint16_t port, int timeout_ms, char *why);
int vcuda_listen_ep(int ucx, const char *addr, uint16_t port, uint16_t *bound_port, char *why);
/* A new connection on a listening fd, or -1 (none waiting); peer gets "addr:port". */
int vcuda_accept(int listen_fd, char *peer, size_t n);
/* recv(MSG_DONTWAIT) on either transport. */
ssize_t vcuda_recv_some(int fd, void *p, size_t n);
/* 1 if fd has work that poll() would not announce (UCX progress): poll with timeout 0. */
int vcuda_fd_pending(int fd);
void vcuda_close(int fd);
/* The client's side of the handshake (proto.h "authentication"): HELLO naming the
 * tenant (NULL: "default"; tenants.h), AUTH with the client's proof made with the
 * token (the tenant's secret) and its heartbeat interval, and the check of the
 * server's proof, each step within timeout_ms; then *ses (may be NULL: nothing more is
 * sent) holds the session every later frame is tagged under (its key derived from the
 * token), its peer name as the caller set it.
 * 0 (*server_device set), -2 if the server refused (its reason in why), -3 if the
 * connection closed or broke before the handshake was done (a server being replaced
 * after a sticky error drops the connections it had not yet authenticated: connecting
 * again may succeed), -1 otherwise (why set; also when the server cannot prove it holds
 * the token). */
int vcuda_handshake(int fd, const char *tenant, const uint8_t *token, size_t token_len, int heartbeat_ms,
                    int timeout_ms, vcuda_buf *b, int *server_device, vcuda_session *ses, char *why);
/* Milliseconds / nanoseconds on the monotonic clock. */
int64_t vcuda_now_ms(void);
int64_t vcuda_now_ns(void);
/* Reads first retry for up to `us` microseconds before sleeping in poll() (default 0).
 * A reply on loopback or a fast network arrives within tens of microseconds, and a
 * thread woken from poll() pays the scheduler's and the idle CPU's wake-up latency on
 * top: spinning trades a core for the latency P003 identifies as what limits scaling. */
void vcuda_net_set_spin_us(int us);
/* After the spin, reads wait in ppoll() naps of `us` microseconds for up to `ms`
 * milliseconds before sleeping in poll() (default 0: off).  A thread woken every few
 * hundred microseconds stays in a shallow idle state, so a reply that takes longer than
 * the spin (a copy waiting for a kernel, a server waking up) is read without the deep
 * wake-up a long poll() costs, for a few per cent of a core while it waits. */
void vcuda_net_set_nap(int us, int ms);
/* The nap of a server after a keep-alive (vcuda-server --nap-us; the server lengthens it
 * where it would cost more than 4% of a core, server_loop.h) and of a client with a
 * keep-alive (VCUDA_NAP_US). */
#define VCUDA_NAP_US_DEFAULT 100

#ifdef __cplusplus
}
#endif
#endif
