/* UCX connections behind net.c's fd-based interface (internal; see ucx.c).  Built only
 * where UCX was found (VCUDA_HAVE_UCX); otherwise no fd is ever a UCX one. */
#ifndef VCUDA_UCX_H
#define VCUDA_UCX_H

#include "vcuda/net.h"

#include <sys/types.h>

#ifdef VCUDA_HAVE_UCX
int vcuda_ucx_is(int fd);
int vcuda_ucx_connect(const char *host, uint16_t port, int timeout_ms, char *why);
int vcuda_ucx_listen(const char *addr, uint16_t port, uint16_t *bound_port, char *why);
int vcuda_ucx_accept(int listen_fd, char *peer, size_t n); /* -1: none waiting */
int vcuda_ucx_pending(int fd); /* 1: progress made or data waiting: do not sleep in poll() */
vcuda_net_status vcuda_ucx_send(int fd, const void *p, size_t n, int64_t deadline_ms, char *why);
ssize_t vcuda_ucx_recv(int fd, void *p, size_t n); /* like recv(MSG_DONTWAIT) */
void vcuda_ucx_close(int fd);
#else
static inline int vcuda_ucx_is(int fd) { (void)fd; return 0; }
#endif
#endif
