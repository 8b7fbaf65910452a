/* vcuda-server --isolation process (see server_isolate.h). */
#define _GNU_SOURCE /* MSG_CMSG_CLOEXEC, SOCK_CLOEXEC, MSG_NOSIGNAL */
#include "vcuda/server_isolate.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the socketpair between the loop process and a serving process ------------------
 * SOCK_SEQPACKET: one message per send, never merged or split.  Loop to serving
 * process: HANDOFF with the connection's socket and its frame tags' session (made by
 * the loop at AUTH, nothing tagged yet; the serving process never holds the token).
 * Back: CLOSED when a session ended, RETURNED with a socket the process, stopping, will
 * not serve (and its session as it came). */
enum { W_HANDOFF = 1, W_CLOSED = 2, W_RETURNED = 3 };

typedef struct {
    uint32_t kind;
    int32_t heartbeat_ms;
    uint64_t id;
    char peer[64];
    char tenant[VCUDA_TENANT_NAME_MAX + 1]; /* its name: each process resolves it in its own table */
    vcuda_session ses; /* (the same program at both ends: a fork) */
} wire;

static wire wire_of(uint32_t kind, const vcuda_conn *c, int heartbeat_ms, const vcuda_session *ses)
{
    wire w;
    memset(&w, 0, sizeof w); /* no stray bytes on the socket */
    w.kind = kind, w.heartbeat_ms = heartbeat_ms, w.id = c->id;
    if (ses) w.ses = *ses;
    snprintf(w.peer, sizeof w.peer, "%s", c->peer);
    snprintf(w.tenant, sizeof w.tenant, "%s", c->tenant ? c->tenant->name : "");
    return w;
}

/* 0, or the errno of the failed send.  fd >= 0 goes with the message (SCM_RIGHTS). */
static int send_wire(int sock, const wire *w, int fd, int flags)
{
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } cb;
    struct iovec iov = {.iov_base = (void *)w, .iov_len = sizeof *w};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&cb, 0, sizeof cb);
        mh.msg_control = cb.b, mh.msg_controllen = sizeof cb.b;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET, cm->cmsg_type = SCM_RIGHTS, cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    for (;;) {
        ssize_t n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
        if (n == (ssize_t)sizeof *w) return 0;
        if (n < 0 && errno == EINTR) continue;
        return n < 0 ? errno : EIO;
    }
}

/* One message: 1 (*fd set for the kinds that carry a socket, else -1), 0 the other end
 * closed, -1 no message (errno), -2 a malformed one (dropped, with any fds it carried). */
static int recv_wire(int sock, wire *w, int *fd, int flags)
{
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(4 * sizeof(int))];
    } cb;
    struct iovec iov = {.iov_base = w, .iov_len = sizeof *w};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof cb.b};
    int fds[4], nfd = 0;
    *fd = -1;
    ssize_t n;
    while ((n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {}
    if (n <= 0) return (int)n;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && nfd < 4; ++i) memcpy(&fds[nfd++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
    }
    int with_fd = n == (ssize_t)sizeof *w && (w->kind == W_HANDOFF || w->kind == W_RETURNED);
    int ok = n == (ssize_t)sizeof *w && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
             (w->kind == W_CLOSED ? nfd == 0 : with_fd && nfd == 1 && w->heartbeat_ms >= 5 && w->heartbeat_ms <= 60000);
    if (!ok) {
        for (int i = 0; i < nfd; ++i) close(fds[i]);
        return -2;
    }
    w->peer[sizeof w->peer - 1] = w->tenant[sizeof w->tenant - 1] = 0;
    *fd = nfd ? fds[0] : -1;
    return 1;
}

/* The connection a message names, its tenant looked up in `tenants` (c.tenant NULL
 * when the table, or NULL, has no such tenant). */
static vcuda_conn conn_of(const wire *w, int fd, const vcuda_tenants *tenants)
{
    vcuda_conn c;
    memset(&c, 0, sizeof c);
    c.fd = fd, c.id = w->id;
    memcpy(c.peer, w->peer, sizeof c.peer);
    if (tenants) c.tenant = vcuda_tenant_find(tenants, (const uint8_t *)w->tenant, strlen(w->tenant));
    return c;
}

/* ---- the loop process's side ---------------------------------------------------------- */

typedef struct {
    char tenant[VCUDA_TENANT_NAME_MAX + 1];
    pid_t pid;     /* 0: a free slot */
    int sock;      /* our end; -1 once closed */
    int going;     /* takes no more connections (told to go, or stopping by itself) */
    int lingered;  /* told to go for having had no sessions for linger_ms */
    uint64_t *ids; /* its sessions (connection ids): handed over, not yet reported ended */
    int conns, cap;
    uint64_t served;
    int64_t started, idle_since;
} proc;

struct vcuda_isolate {
    vcuda_isolate_config cfg;
    proc *p; /* cfg.max_procs slots */
    /* the network loop's count of sessions, told of each end (NULL: at the end) */
    void (*on_end)(void *arg, uint64_t id);
    void *on_end_arg;
};

/* Room in p's list for one more session.  0, or -1 out of memory. */
static int ids_reserve(proc *p)
{
    if (p->conns < p->cap) return 0;
    int cap = p->cap ? 2 * p->cap : 16;
    uint64_t *ids = realloc(p->ids, (size_t)cap * sizeof *ids);
    if (!ids) return -1;
    p->ids = ids, p->cap = cap;
    return 0;
}

/* Session `id` of p is over (reported, or its socket came back): 1, or 0 if p did not
 * hold it (a report is believed only for a session handed to that process). */
static int session_gone(proc *p, uint64_t id, int64_t now)
{
    for (int i = 0; i < p->conns; ++i)
        if (p->ids[i] == id) {
            p->ids[i] = p->ids[--p->conns];
            if (p->conns == 0) p->idle_since = now;
            return 1;
        }
    return 0;
}

static void tell_ended(vcuda_isolate *iso, uint64_t id)
{
    if (iso->on_end) iso->on_end(iso->on_end_arg, id);
}

vcuda_isolate *vcuda_isolate_new(const vcuda_isolate_config *cfg)
{
    vcuda_isolate *iso = calloc(1, sizeof *iso);
    if (!iso) return NULL;
    iso->cfg = *cfg;
    if (iso->cfg.max_procs < 1) iso->cfg.max_procs = 1;
    if (!(iso->p = calloc((size_t)iso->cfg.max_procs, sizeof *iso->p))) {
        free(iso);
        return NULL;
    }
    return iso;
}

/* In the child: everything the loop process had open goes (the listening socket, the
 * connections not yet authenticated, other tenants' socketpairs), except stdio and sock. */
static void close_fds_except(int keep)
{
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        int own = dirfd(d);
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] >= '0' && e->d_name[0] <= '9') {
                int fd = atoi(e->d_name);
                if (fd > 2 && fd != keep && fd != own) close(fd);
            }
        closedir(d);
        return;
    }
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (max > 0 ? max : 65536); ++fd)
        if (fd != keep) close(fd);
}

static proc *find_live(vcuda_isolate *iso, const char *tenant)
{
    for (int i = 0; i < iso->cfg.max_procs; ++i) {
        proc *p = &iso->p[i];
        if (p->pid && !p->going && p->sock >= 0 && !strcmp(p->tenant, tenant)) return p;
    }
    return NULL;
}

/* A free slot for a serving process, or NULL (with the refusal in why).  Processes
 * still exiting count: their contexts still hold memory. */
static proc *free_slot(vcuda_isolate *iso, char *why)
{
    for (int i = 0; i < iso->cfg.max_procs; ++i)
        if (!iso->p[i].pid) return &iso->p[i];
    snprintf(why, VCUDA_WHY_LEN,
             "vcuda: server full: the limit of %d tenant serving processes (--max-tenant-procs) is reached",
             iso->cfg.max_procs);
    return NULL;
}

/* The handoff's part of the admission: a session of `tenant` can be taken now. */
static int room(void *ctx, const char *tenant, char *msg)
{
    vcuda_isolate *iso = ctx;
    return find_live(iso, tenant) || free_slot(iso, msg) ? 0 : -1;
}

static proc *start_proc(vcuda_isolate *iso, const char *tenant, char *why)
{
    proc *slot = free_slot(iso, why);
    if (!slot) return NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
        snprintf(why, VCUDA_WHY_LEN, "vcuda: no serving process for tenant %s: socketpair: %s", tenant, strerror(errno));
        return NULL;
    }
    pid_t pid = vcuda_fork_tied(); /* the loop process killed: so are its tenants' */
    if (pid < 0) {
        snprintf(why, VCUDA_WHY_LEN, "vcuda: no serving process for tenant %s: fork: %s", tenant, strerror(errno));
        close(sv[0]), close(sv[1]);
        return NULL;
    }
    if (pid == 0) {
        close_fds_except(sv[1]);
        /* SIGTERM and SIGINT (a stop) reach only vcuda_isolate_serve's wait for
         * connections, so that a stop is seen before another connection is taken */
        sigset_t stops;
        sigemptyset(&stops);
        sigaddset(&stops, SIGTERM), sigaddset(&stops, SIGINT);
        sigprocmask(SIG_BLOCK, &stops, NULL);
        int rc = iso->cfg.serve(iso->cfg.arg, sv[1], tenant);
        fflush(NULL);
        _exit(rc);
    }
    close(sv[1]);
    memset(slot, 0, sizeof *slot);
    snprintf(slot->tenant, sizeof slot->tenant, "%s", tenant);
    slot->pid = pid, slot->sock = sv[0];
    slot->started = slot->idle_since = vcuda_now_ms();
    vcuda_log_limited(iso->cfg.log_prefix, "tenant %s: serving process %d started", tenant, (int)pid);
    return slot;
}

/* Hands the connection w names (its socket fd) over to its tenant's serving process,
 * started if there is none. */
static int hand_wire(vcuda_isolate *iso, const wire *w, int fd, char *why)
{
    const char *tenant = w->tenant;
    for (int attempt = 0; attempt < 2; ++attempt) {
        proc *p = find_live(iso, tenant);
        if (!p && !(p = start_proc(iso, tenant, why))) return -1;
        if (ids_reserve(p))
            return snprintf(why, VCUDA_WHY_LEN, "vcuda: server: out of memory"), -1;
        /* never waits: a serving process takes connections as fast as the loop accepts them */
        int e = send_wire(p->sock, w, fd, MSG_DONTWAIT);
        if (!e) {
            p->ids[p->conns++] = w->id, ++p->served;
            return 0;
        }
        if (e == EAGAIN || e == EWOULDBLOCK)
            return snprintf(why, VCUDA_WHY_LEN, "vcuda: tenant %s's serving process is not taking connections", tenant), -1;
        /* it is stopping (a sticky error) or gone: its queued connections come back as
         * RETURNED, and this one goes to a fresh process */
        vcuda_log_limited(iso->cfg.log_prefix, "tenant %s: serving process %d takes no more connections (%s)",
                          tenant, (int)p->pid, strerror(e));
        p->going = 1;
    }
    return snprintf(why, VCUDA_WHY_LEN, "vcuda: tenant %s: no serving process took the connection", tenant), -1;
}

/* The handoff's hand: connection c to the serving process of the tenant it
 * authenticated as. */
static int hand(void *ctx, const vcuda_conn *c, int heartbeat_ms, const vcuda_session *ses, char *why)
{
    if (!c->tenant) return snprintf(why, VCUDA_WHY_LEN, "vcuda: server: a connection without a tenant"), -1;
    wire w = wire_of(W_HANDOFF, c, heartbeat_ms, ses);
    return hand_wire(ctx, &w, c->fd, why);
}

/* p has ended (wait status st): its sessions with it. */
static void ended(vcuda_isolate *iso, proc *p, int st)
{
    char what[96];
    vcuda_proc_ending(st, what, sizeof what);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && p->lingered)
        snprintf(what, sizeof what, "exited (no sessions for %d s)", iso->cfg.linger_ms / 1000);
    vcuda_log_limited(iso->cfg.log_prefix, "tenant %s: serving process %d %s; it ran %.1f s, served %llu session(s), "
                      "%d open at its end", p->tenant, (int)p->pid, what,
                      (double)(vcuda_now_ms() - p->started) / 1000.0, (unsigned long long)p->served, p->conns);
    for (int i = 0; i < p->conns; ++i) tell_ended(iso, p->ids[i]);
    if (p->sock >= 0) close(p->sock);
    free(p->ids);
    memset(p, 0, sizeof *p);
    p->sock = -1;
}

/* What p sent: session ends, and connections it returned (handed to a fresh process,
 * unless the server is stopping). */
static void read_reports(vcuda_isolate *iso, proc *p, int64_t now, int rehand)
{
    char why[VCUDA_WHY_LEN];
    while (p->sock >= 0) {
        wire w;
        int fd, r = recv_wire(p->sock, &w, &fd, MSG_DONTWAIT);
        if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (r == 0 || r == -1) { /* it has exited, or is exiting */
            close(p->sock);
            p->sock = -1, p->going = 1;
            return;
        }
        if (r == -2 || !session_gone(p, w.id, now)) {
            vcuda_log_limited(iso->cfg.log_prefix, "tenant %s: serving process %d sent %s (dropped)", p->tenant,
                              (int)p->pid, r == -2 ? "a malformed message" : "a report on a session it does not hold");
            if (fd >= 0) close(fd);
            continue;
        }
        if (w.kind == W_RETURNED) { /* it is stopping: this connection goes to a fresh one */
            p->going = 1;
            if (p->served) --p->served;
            w.kind = W_HANDOFF;
            if (!rehand) snprintf(why, sizeof why, "server shutting down");
            if (!rehand || hand_wire(iso, &w, fd, why)) {
                vcuda_log_limited(iso->cfg.log_prefix, "peer %s: closed: %s", w.peer, why);
                tell_ended(iso, w.id);
            }
            close(fd); /* (the serving process that took it has its own copy) */
        } else {
            tell_ended(iso, w.id);
        }
    }
}

static void turn(void *ctx, void (*on_end)(void *arg, uint64_t id), void *arg)
{
    vcuda_isolate *iso = ctx;
    int64_t now = vcuda_now_ms();
    iso->on_end = on_end, iso->on_end_arg = arg;
    for (int i = 0; i < iso->cfg.max_procs; ++i) {
        proc *p = &iso->p[i];
        if (!p->pid) continue;
        read_reports(iso, p, now, 1);
        if (p->sock >= 0 && !p->going && p->conns == 0 && now - p->idle_since >= iso->cfg.linger_ms) {
            close(p->sock); /* its cue to exit: nothing is queued for it (no session is open) */
            p->sock = -1, p->going = 1, p->lingered = 1;
        }
        int st;
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
            read_reports(iso, p, now, 1); /* what it sent before it exited, returned connections included */
            ended(iso, p, st);
        }
    }
}

struct vcuda_handoff vcuda_isolate_handoff(vcuda_isolate *iso)
{
    struct vcuda_handoff h = {iso, room, hand, turn};
    return h;
}

void vcuda_isolate_end(vcuda_isolate *iso)
{
    if (!iso) return;
    iso->on_end = NULL; /* (the loop's count is gone) */
    int left = 0;
    for (int i = 0; i < iso->cfg.max_procs; ++i) {
        proc *p = &iso->p[i];
        if (!p->pid) continue;
        read_reports(iso, p, vcuda_now_ms(), 0); /* (for the sessions it ends below) */
        if (p->sock >= 0) close(p->sock); /* each ends its sessions and exits */
        p->sock = -1, p->going = 1;
        ++left;
    }
    for (int64_t end = vcuda_now_ms() + iso->cfg.stop_wait_ms; left;) {
        int late = vcuda_now_ms() >= end;
        for (int i = 0; i < iso->cfg.max_procs; ++i) {
            proc *p = &iso->p[i];
            int st;
            if (!p->pid) continue;
            if (late) {
                fprintf(stderr, "%s: tenant %s: serving process %d still running %d ms after the stop: killing it\n",
                        iso->cfg.log_prefix, p->tenant, (int)p->pid, iso->cfg.stop_wait_ms);
                kill(p->pid, SIGKILL);
                while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {}
            } else if (waitpid(p->pid, &st, WNOHANG) != p->pid) {
                continue;
            }
            ended(iso, p, st);
            --left;
        }
        if (left) usleep(10000);
    }
    free(iso->p);
    free(iso);
}

/* ---- the serving process's side ------------------------------------------------------ */

/* The handler, with each session's end reported to the loop process. */
typedef struct {
    struct vcuda_handler inner;
    int sock;
} tenant_handler;

static int t_handle(void *ctx, vcuda_conn *c, const vcuda_msg *q, vcuda_msg *r, char *why)
{
    tenant_handler *t = ctx;
    return t->inner.handle(t->inner.ctx, c, q, r, why);
}

static int t_attach(void *ctx, vcuda_conn *c, char *why)
{
    tenant_handler *t = ctx;
    return t->inner.attach ? t->inner.attach(t->inner.ctx, c, why) : 0;
}

static void report_closed(int sock, const vcuda_conn *c)
{
    wire w = wire_of(W_CLOSED, c, 0, NULL);
    send_wire(sock, &w, -1, 0); /* (the loop process gone: nobody to tell) */
}

static void t_disconnect(void *ctx, vcuda_conn *c)
{
    tenant_handler *t = ctx;
    if (t->inner.disconnect) t->inner.disconnect(t->inner.ctx, c);
    report_closed(t->sock, c);
}

int vcuda_isolate_serve(const vcuda_server_config *cfg, int sock)
{
    tenant_handler t = {*cfg->handler, sock};
    struct vcuda_handler h = {&t, t_handle, t_disconnect, t_attach};
    vcuda_server_config c = *cfg;
    c.handler = &h, c.handoff = NULL;
    vcuda_server *s = vcuda_server_new(&c);
    char why[VCUDA_WHY_LEN];
    if (!s) {
        fprintf(stderr, "%s: out of memory\n", c.log_prefix);
        return -1;
    }
    sigset_t waiting; /* the stops blocked elsewhere (see start_proc) are taken here */
    pthread_sigmask(SIG_SETMASK, NULL, &waiting);
    sigdelset(&waiting, SIGTERM), sigdelset(&waiting, SIGINT);
    int loop_gone = 0;
    while (!*c.stop && !loop_gone) {
        struct pollfd pf = {.fd = sock, .events = POLLIN};
        sigset_t others;
        int pr = vcuda_server_turn(s, &pf, 1, 200, &waiting);
        /* a ppoll that found input leaves a stop that came meanwhile pending: take it */
        pthread_sigmask(SIG_SETMASK, &waiting, &others);
        pthread_sigmask(SIG_SETMASK, &others, NULL);
        if (*c.stop) break;
        if (pr <= 0) continue;
        wire w;
        int fd, r = recv_wire(sock, &w, &fd, MSG_DONTWAIT);
        if (r < 0 && r != -2 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (r == 0 || r == -1) { /* told to go (no sessions for a while), or the loop process ended */
            loop_gone = 1;
            continue;
        }
        if (r == -2 || w.kind != W_HANDOFF) {
            fprintf(stderr, "%s: a malformed hand-over message (dropped)\n", c.log_prefix);
            if (fd >= 0) close(fd);
            continue;
        }
        vcuda_conn conn = conn_of(&w, fd, c.tenants);
        if (!conn.tenant) { /* (the loop hands a process its own tenant's connections only) */
            fprintf(stderr, "%s: a connection of tenant \"%s\", not served here (dropped)\n", c.log_prefix, w.tenant);
            vcuda_close(fd);
            report_closed(sock, &conn);
            continue;
        }
        if (vcuda_server_adopt(s, &conn, w.heartbeat_ms, &w.ses, why)) {
            vcuda_log_limited(c.log_prefix, "peer %s: closed: %s", conn.peer, why);
            report_closed(sock, &conn);
        }
    }
    if (!loop_gone) {
        /* stopping (a sticky error, or a signal): no more connections are sent here, and
         * those already queued go back, to the tenant's next serving process */
        shutdown(sock, SHUT_RD);
        wire w;
        int fd, r, n = 0;
        while ((r = recv_wire(sock, &w, &fd, MSG_DONTWAIT)) > 0 || r == -2) {
            if (r < 0 || w.kind != W_HANDOFF) continue;
            w.kind = W_RETURNED;
            if (!send_wire(sock, &w, fd, 0)) ++n;
            close(fd);
        }
        if (n) fprintf(stderr, "%s: %d queued connection(s) returned for the tenant's next serving process\n",
                       c.log_prefix, n);
    }
    vcuda_server_end(s);
    return 0;
}
