/* vcuda client core: the virtual-device map and failure handling (no CUDA here; the
 * CUDA API stand-in calls this).
 *
 * vcuda_client_open() reads
 *   VCUDA_SERVERS=host:port,...  device ordinal i = the i-th entry (required)
 *   VCUDA_SPARES=host:port,...   fill in, in order, for servers that fail the start check
 *   VCUDA_TOKEN / VCUDA_TOKEN_FILE (vcuda_token_load): the secret of the tenant
 *   VCUDA_TENANT                 the tenant the client is served as (tenants.h), default
 *                                "default" (a server without --tenants knows that one only)
 *   VCUDA_TIMEOUT_MS             how long a server may stay silent, default 5000, in
 *                                [10, 600000]: a call waiting on long GPU work succeeds
 *                                however long it takes, as the server reports progress
 *                                every quarter of this while it works (TCP; proto.h)
 *   VCUDA_KEEPALIVE_MS           optional, in [1, 60000]: a background thread sends each
 *                                device whose connection was idle that long a TOUCH, a
 *                                4-byte D2H copy (P003's fix: a dummy transfer every 2 ms)
 *   VCUDA_CHUNK_KIB              default 1024, in [4, VCUDA_MAX_CHUNK/1024]: bytes per frame
 *                                of a copy to a server (vcuda_client_chunk)
 *   VCUDA_SPIN_US                default 200, in [0, 100000]: busy-wait for a reply this long
 *                                before sleeping in poll() (vcuda_net_set_spin_us)
 *   VCUDA_NAP_US, VCUDA_NAP_MS   after the spin, wait for a reply in naps of NAP_US (default
 *                                VCUDA_NAP_US_DEFAULT with VCUDA_KEEPALIVE_MS set, else 0: off) for up to
 *                                NAP_MS (default 100) before poll() (vcuda_net_set_nap)
 *   VCUDA_STATS                  1: at close, or at exit, one JSON line per device on stderr
 *                                with its round trips, posted requests, keep-alives and
 *                                bytes each way (vcuda_client_get_stats)
 * and health-checks every server (connect + HELLO + PING within the timeout).  Each one
 * that fails is reported with one stderr line and replaced by the next healthy spare or
 * dropped; the remaining devices are numbered densely in VCUDA_SERVERS order.
 *
 * The handshake proves both sides hold the token without sending it, and every later
 * frame carries a tag (proto.h).  A server that dies, is stopped or becomes unreachable
 * mid-session, or a frame that fails its tag (injected, replayed or altered on the
 * path), makes the call return VCUDA_CLIENT_UNAVAILABLE within the timeout (->
 * cudaErrorDevicesUnavailable); the device is then marked lost and every later call on
 * it fails the same way at once. */
#ifndef VCUDA_CLIENT_H
#define VCUDA_CLIENT_H

#include "vcuda/proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VCUDA_DEFAULT_TIMEOUT_MS 5000

typedef enum {
    VCUDA_CLIENT_OK = 0,
    VCUDA_CLIENT_BAD_DEVICE,   /* ordinal out of range, or not opened */
    VCUDA_CLIENT_BAD_REQUEST,  /* the request does not encode (nothing was sent) */
    VCUDA_CLIENT_REMOTE_ERROR, /* server replied with VCUDA_FLAG_ERROR: reply->v[0], str */
    VCUDA_CLIENT_UNAVAILABLE   /* server died, stalled or broke protocol: device lost */
} vcuda_client_status;

const char *vcuda_client_status_name(vcuda_client_status s);
/* cudaError_t value for a status: 0, 101 (invalid device), 1 (invalid value),
 * 999 (unknown; for REMOTE_ERROR use the reply's code), 46 (devices unavailable). */
int vcuda_client_cuda_error(vcuda_client_status s);

/* 0, or -1 with the reason in why (VCUDA_WHY_LEN bytes) for a configuration error.
 * Zero healthy devices is not an error here (device count 0).  Opening again first
 * closes. */
int vcuda_client_open(char *why);
void vcuda_client_close(void);
int vcuda_client_device_count(void);
/* Chunk size of copies to a server (VCUDA_CHUNK_KIB), as read by the last open. */
size_t vcuda_client_chunk(void);
/* "host:port" of a device (NULL if out of range). */
const char *vcuda_client_device_server(int dev);

/* What a device's connection carried since open: calls answered (vcuda_client_call,
 * send_chunks and recv_chunks each one round trip however many frames), requests posted
 * without a reply, the keep-alive thread's own round trips, payload bytes each way. */
typedef struct {
    uint64_t round_trips, posts, keepalives, bytes_to_server, bytes_from_server;
} vcuda_client_stats;
/* 0, or -1 for a device out of range. */
int vcuda_client_get_stats(int dev, vcuda_client_stats *out);

/* Sends req (opcode and fields are the caller's; request id and flags are set here) and
 * waits for the matching reply, all within timeout_ms (<= 0: VCUDA_TIMEOUT_MS).  The
 * reply's str/blob stay valid until the next call on that device.  Thread-safe: calls
 * on one device are serialized. */
vcuda_client_status vcuda_client_call(int dev, const vcuda_msg *req, vcuda_msg *reply,
                                      int timeout_ms, char *why);

/* Sends req without waiting for a reply (VCUDA_FLAG_NOREPLY; asynchronous kernel
 * launches only).  A failure on the server comes back as the error of the next call. */
vcuda_client_status vcuda_client_post(int dev, const vcuda_msg *req, char *why);

/* A copy to the server: req is sent once per chunk of `data` (at most `chunk` bytes,
 * back to back, VCUDA_FLAG_MORE on all but the last) with v[addr_field] advanced by the
 * chunk's offset; the one reply comes after the last (which carries VCUDA_FLAG_SYNC if
 * req->hdr.flags does: the other flags of req are not sent).  Each frame has its own
 * deadline, so a large copy is bounded per chunk, not as a whole. */
vcuda_client_status vcuda_client_send_chunks(int dev, const vcuda_msg *req, unsigned addr_field,
                                             const uint8_t *data, uint64_t size, size_t chunk,
                                             vcuda_msg *reply, char *why);
/* A copy from the server: one request, replies in chunks until one without MORE; they
 * must add up to exactly `size` bytes, written to out. */
vcuda_client_status vcuda_client_recv_chunks(int dev, const vcuda_msg *req, uint8_t *out,
                                             uint64_t size, vcuda_msg *reply, char *why);

#ifdef __cplusplus
}
#endif
#endif
