/* vcuda over UCX streams (see net.h: endpoints written "ucx://ADDR:PORT").
 *
 * Each UCX connection has a worker of its own, so that the worker's event fd stands
 * for the connection everywhere the TCP code holds a socket: in poll() sets, in the
 * client's device table and the server's connection list.  net.c routes an fd that is
 * registered here to these functions; nothing else in vcuda knows about UCX.  UCX
 * picks the fastest transport it has between the two sides (RDMA verbs on a cluster,
 * shared memory or TCP on one node); the connection itself is set up over sockaddr.
 *
 * Reads are non-blocking and may be partial, like recv(MSG_DONTWAIT): each received
 * fragment is moved into the link's buffer (see pull) and read out from there. */
#define _POSIX_C_SOURCE 200809L
#include "ucx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

#define MAX_FDS 4096

#define fail(why, ...) vcuda_fail(why, -1, __VA_ARGS__)

typedef struct {
    ucp_worker_h worker;
    ucp_ep_h ep;             /* NULL for a listener */
    ucp_listener_h listener; /* listeners only */
    int efd;
    volatile int failed;     /* the endpoint's error handler ran: peer gone */
    ucs_status_t why;
    uint8_t *left;           /* unread tail of the last fragment */
    size_t left_at, left_len, left_cap;
    ucp_conn_request_h pending[64]; /* listeners: connection requests not accepted yet */
    int npending;
    char peer[64];
} link_t;

static ucp_context_h ctx;
static link_t *links[MAX_FDS];


static int init(char *why)
{
    if (ctx) return 0;
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                      .features = UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP};
    ucs_status_t s = ucp_init(&p, NULL, &ctx);
    return s == UCS_OK ? 0 : fail(why, "UCX: ucp_init: %s", ucs_status_string(s));
}

static link_t *get(int fd) { return fd >= 0 && fd < MAX_FDS ? links[fd] : NULL; }
int vcuda_ucx_is(int fd) { return get(fd) != NULL; }

static link_t *new_link(char *why)
{
    link_t *l = calloc(1, sizeof *l);
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucs_status_t s;
    if (!l) return fail(why, "UCX: out of memory"), NULL;
    if ((s = ucp_worker_create(ctx, &wp, &l->worker)) != UCS_OK ||
        (s = ucp_worker_get_efd(l->worker, &l->efd)) != UCS_OK) {
        if (l->worker) ucp_worker_destroy(l->worker);
        free(l);
        return fail(why, "UCX: worker: %s", ucs_status_string(s)), NULL;
    }
    if (l->efd >= MAX_FDS) {
        fail(why, "UCX: event fd %d beyond the table", l->efd);
        ucp_worker_destroy(l->worker);
        free(l);
        return NULL;
    }
    links[l->efd] = l;
    return l;
}

static void on_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    link_t *l = arg;
    (void)ep;
    l->failed = 1;
    l->why = status;
}

static int make_ep(link_t *l, ucp_ep_params_t *ep, char *why)
{
    ep->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep->err_mode = UCP_ERR_HANDLING_MODE_PEER; /* a dead peer is an error, not a hang */
    ep->err_handler.cb = on_error;
    ep->err_handler.arg = l;
    ucs_status_t s = ucp_ep_create(l->worker, ep, &l->ep);
    return s == UCS_OK ? 0 : fail(why, "UCX: endpoint: %s", ucs_status_string(s));
}

static int resolve(const char *host, uint16_t port, int passive, struct sockaddr_storage *ss,
                   socklen_t *len, char *why)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
                             .ai_flags = passive ? AI_PASSIVE | AI_NUMERICHOST : 0}, *res;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", (unsigned)port);
    int rc = getaddrinfo(host && *host ? host : "127.0.0.1", ps, &hints, &res);
    if (rc) return fail(why, "%s: %s", host, gai_strerror(rc));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

void vcuda_ucx_close(int fd)
{
    link_t *l = get(fd);
    if (!l) return;
    if (l->ep) {
        /* flush what is queued if the peer is still there; never wait long */
        ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags = l->failed ? UCP_EP_CLOSE_FLAG_FORCE : 0};
        void *r = ucp_ep_close_nbx(l->ep, &p);
        for (int i = 0; UCS_PTR_IS_PTR(r) && i < 100000 && ucp_request_check_status(r) == UCS_INPROGRESS; ++i)
            ucp_worker_progress(l->worker);
        if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
    }
    for (int i = 0; i < l->npending; ++i) ucp_listener_reject(l->listener, l->pending[i]);
    if (l->listener) ucp_listener_destroy(l->listener);
    ucp_worker_destroy(l->worker);
    links[fd] = NULL;
    free(l->left);
    free(l);
}

int vcuda_ucx_connect(const char *host, uint16_t port, int timeout_ms, char *why)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (init(why) || resolve(host, port, 0, &ss, &len, why)) return -1;
    link_t *l = new_link(why);
    if (!l) return -1;
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR,
                          .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
                          .sockaddr = {.addr = (struct sockaddr *)&ss, .addrlen = len}};
    if (make_ep(l, &ep, why)) {
        vcuda_ucx_close(l->efd);
        return -1;
    }
    snprintf(l->peer, sizeof l->peer, "%s:%u", host, (unsigned)port);
    /* UCX connects lazily: the first send (HELLO) proves it, within its deadline */
    (void)timeout_ms;
    return l->efd;
}

static void on_conn_request(ucp_conn_request_h req, void *arg)
{
    link_t *l = arg;
    if (l->npending < (int)(sizeof l->pending / sizeof *l->pending)) l->pending[l->npending++] = req;
    else ucp_listener_reject(l->listener, req);
}

int vcuda_ucx_listen(const char *addr, uint16_t port, uint16_t *bound_port, char *why)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (init(why) || resolve(addr && *addr ? addr : "127.0.0.1", port, 1, &ss, &len, why)) return -1;
    link_t *l = new_link(why);
    if (!l) return -1;
    ucp_listener_params_t lp = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = {.addr = (struct sockaddr *)&ss, .addrlen = len},
        .conn_handler = {on_conn_request, l}};
    ucs_status_t s = ucp_listener_create(l->worker, &lp, &l->listener);
    if (s != UCS_OK) {
        vcuda_ucx_close(l->efd);
        return fail(why, "UCX: listen %s:%u: %s", addr ? addr : "127.0.0.1", (unsigned)port, ucs_status_string(s));
    }
    if (bound_port) {
        ucp_listener_attr_t a = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
        *bound_port = port;
        if (ucp_listener_query(l->listener, &a) == UCS_OK)
            *bound_port = ntohs(((struct sockaddr_in *)&a.sockaddr)->sin_port);
    }
    return l->efd;
}

int vcuda_ucx_accept(int lfd, char *peer, size_t n)
{
    link_t *ls = get(lfd), *l;
    char why[VCUDA_WHY_LEN];
    if (!ls || !ls->listener) return -1;
    ucp_worker_progress(ls->worker);
    if (!ls->npending) return -1;
    ucp_conn_request_h req = ls->pending[0];
    memmove(ls->pending, ls->pending + 1, (size_t)--ls->npending * sizeof *ls->pending);
    ucp_conn_request_attr_t a = {.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR};
    snprintf(peer, n, "ucx:?");
    if (ucp_conn_request_query(req, &a) == UCS_OK && a.client_address.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&a.client_address;
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
        snprintf(peer, n, "ucx:%s:%u", ip, (unsigned)ntohs(s4->sin_port));
    }
    if (!(l = new_link(why))) {
        ucp_listener_reject(ls->listener, req);
        return -1;
    }
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST, .conn_request = req};
    if (make_ep(l, &ep, why)) {
        vcuda_ucx_close(l->efd);
        return -1;
    }
    return l->efd;
}

/* Moves the next received fragment, if any, into the link's own buffer: from then on,
 * "data waiting" is our state, not an event UCX reports once (its event fd is not
 * signalled again for data it has already queued). */
static int pull(link_t *l)
{
    if (l->left_len || !l->ep) return 0;
    size_t len = 0;
    void *data = ucp_stream_recv_data_nb(l->ep, &len);
    if (UCS_PTR_IS_ERR(data)) {
        l->failed = 1, l->why = UCS_PTR_STATUS(data);
        return -1;
    }
    if (!data) return 0;
    if (len > l->left_cap) {
        uint8_t *q = realloc(l->left, len);
        if (!q) {
            ucp_stream_data_release(l->ep, data);
            l->failed = 1, l->why = UCS_ERR_NO_MEMORY;
            return -1;
        }
        l->left = q, l->left_cap = len;
    }
    memcpy(l->left, data, len);
    ucp_stream_data_release(l->ep, data);
    l->left_at = 0, l->left_len = len;
    return 0;
}

int vcuda_ucx_pending(int fd)
{
    link_t *l = get(fd);
    if (!l) return 0;
    while (ucp_worker_progress(l->worker)) {}
    pull(l);
    if (l->left_len || l->npending || l->failed) return 1;
    /* arming says whether sleeping on the event fd is safe: BUSY means events wait */
    return ucp_worker_arm(l->worker) == UCS_ERR_BUSY;
}

vcuda_net_status vcuda_ucx_send(int fd, const void *p, size_t n, int64_t deadline, char *why)
{
    link_t *l = get(fd);
    if (l->failed) return fail(why, "UCX: peer %s gone: %s", l->peer, ucs_status_string(l->why)), VCUDA_NET_IO;
    ucp_request_param_t rp = {0};
    void *r = ucp_stream_send_nbx(l->ep, p, n, &rp);
    if (UCS_PTR_IS_ERR(r))
        return fail(why, "UCX: send: %s", ucs_status_string(UCS_PTR_STATUS(r))), VCUDA_NET_IO;
    vcuda_net_status st = VCUDA_NET_OK;
    while (r && ucp_request_check_status(r) == UCS_INPROGRESS) {
        if (l->failed) {
            st = VCUDA_NET_IO, fail(why, "UCX: peer %s gone: %s", l->peer, ucs_status_string(l->why));
            break;
        }
        if (deadline >= 0 && vcuda_now_ms() >= deadline) {
            st = VCUDA_NET_TIMEOUT, fail(why, "UCX: peer %s stalled: send timed out", l->peer);
            break;
        }
        if (!ucp_worker_progress(l->worker) && !vcuda_ucx_pending(fd)) {
            struct pollfd pf = {.fd = fd, .events = POLLIN};
            poll(&pf, 1, 1);
        }
    }
    if (r && st) {
        ucp_request_cancel(l->worker, r);
        l->failed = 1, l->why = UCS_ERR_CANCELED; /* the stream is out of step now */
    }
    if (r) {
        if (!st && ucp_request_check_status(r) != UCS_OK)
            st = VCUDA_NET_IO, fail(why, "UCX: send: %s", ucs_status_string(ucp_request_check_status(r)));
        ucp_request_free(r);
    }
    return st;
}

ssize_t vcuda_ucx_recv(int fd, void *p, size_t n)
{
    link_t *l = get(fd);
    ucp_worker_progress(l->worker);
    pull(l);
    if (!l->left_len) {
        if (l->failed) {
            errno = ECONNRESET;
            /* a peer that went away reads as end of stream, like a closed socket */
            return l->why == UCS_ERR_CONNECTION_RESET || l->why == UCS_ERR_ENDPOINT_TIMEOUT ? 0 : -1;
        }
        errno = EAGAIN;
        return -1;
    }
    size_t k = l->left_len < n ? l->left_len : n;
    memcpy(p, l->left + l->left_at, k);
    l->left_at += k, l->left_len -= k;
    return (ssize_t)k;
}
