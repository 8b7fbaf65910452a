/* vcuda-server --isolation process: each tenant's GPU work in an OS process of its own.
 *
 * Contexts of one process share one address space (a kernel given another context's
 * device pointer reads it) and one sticky-error state, so the isolation between tenants
 * is the process boundary.  A tenant is the one a client authenticated as (tenants.h:
 * --tenants, else every client is "default").  The network-loop process never loads the
 * CUDA driver (a process that has initialised CUDA cannot safely fork): it accepts,
 * authenticates and admits (server_loop.h: every cap, the tenant's MAX_CONNS across all
 * its connections included), and hands each authenticated connection to its tenant's
 * serving process: the socket itself, passed with SCM_RIGHTS over a unix socketpair,
 * with what the worker needs (peer, connection id, heartbeat interval, the tenant's name,
 * and the frame tags' session, whose key the loop derived from the tenant's secret).
 * A serving process holds no secret: its copy of the tenants table keeps its own tenant
 * only (vcuda_tenants_only), and all of that tenant's connections, so the tenant's
 * quota, and the context limits it set until its last connection leaves, are counted and
 * undone there (server_gpu.h).  The serving
 * process opens the GPU and runs the usual workers on those sockets
 * (vcuda_server_adopt, vcuda_server_turn: heartbeats, idle timeout, the watch for a
 * client that left): after the hand-over the client talks to it directly, with no hop
 * through the loop.  The loop process forks a tenant's serving process when the
 * tenant's first connection authenticates (so it starts with no CUDA state to inherit),
 * and at most max_procs of them at once: beyond that a tenant is refused by name at
 * authentication, by the loop's admission (the handoff's room).  The loop process is
 * the one vcuda-server's supervisor replaces if it ends abnormally (server_main.c); its
 * serving processes die with it (vcuda_fork_tied), their sessions with them.
 *
 * Each serving process reports every session's end back on its socketpair (the loop
 * counts a session against its caps until then, or until its process is gone); one left
 * without sessions for linger_s is told to go (the loop closes its end) and exits, so
 * its context's memory goes back to the GPU.  One that ends otherwise (a sticky error:
 * exit status VCUDA_EXIT_CONTEXT_LOST, a signal, ...) is reaped and logged with the
 * reason and the sessions it ended; the loop process serves on, and the tenant's next
 * connection gets a fresh serving process.  A serving process that is stopping after a
 * sticky error returns the connections still queued for it, which the loop hands to a
 * fresh one.  TCP only: a UCX connection's state lives in the process that accepted it. */
#ifndef VCUDA_SERVER_ISOLATE_H
#define VCUDA_SERVER_ISOLATE_H

#include "vcuda/server_loop.h"
#include "vcuda/server_proc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs in a freshly forked serving process (only fds 0-2 and sock are open): opens the
 * GPU and serves the connections received on sock (vcuda_isolate_serve); its return
 * value is the process's exit status. */
typedef int (*vcuda_tenant_main)(void *arg, int sock, const char *tenant);

typedef struct {
    int max_procs;          /* serving processes at once (tenants served at once) */
    int linger_ms;          /* a serving process without sessions this long exits */
    int stop_wait_ms;       /* at the end, how long serving processes get to finish */
    const char *log_prefix; /* e.g. "vcuda-server" */
    vcuda_tenant_main serve;
    void *arg;
} vcuda_isolate_config;

typedef struct vcuda_isolate vcuda_isolate;

/* The loop process's side.  NULL: out of memory. */
vcuda_isolate *vcuda_isolate_new(const vcuda_isolate_config *cfg);
/* For vcuda_server_config.handoff. */
struct vcuda_handoff vcuda_isolate_handoff(vcuda_isolate *iso);
/* Tells every serving process to end its sessions and exit, waits stop_wait_ms for
 * them, kills those left, frees iso. */
void vcuda_isolate_end(vcuda_isolate *iso);

/* The serving process's side: serves the connections received on sock with cfg's
 * handler (reporting each session's end back on sock) until *cfg->stop or the loop
 * process closes sock; then ends every session.  Each connection's tenant is looked up
 * in cfg->tenants (the handler charges it): one the table does not hold is dropped.  0,
 * or -1 (message on stderr). */
int vcuda_isolate_serve(const vcuda_server_config *cfg, int sock);

#ifdef __cplusplus
}
#endif
#endif
