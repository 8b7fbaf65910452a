/* vcuda-server --device N --listen ADDR:PORT: serves one GPU to vcuda clients.
 * Exit codes: 2 usage (no token, bad address, a bad tenants file), 77 nothing to serve
 * (no driver, no such GPU, a driver without cuFuncGetParamInfo), 1 the loop failed.
 * Over TCP a supervising process holds the socket and replaces the process under it
 * whenever that ends without being asked to: after a sticky error, a crash or kill (any
 * signal, the OOM killer's included) or a failure of its loop, with a growing pause
 * when it keeps ending.  That process is the serving process, or with --isolation
 * process the network loop, which never opens the GPU: each tenant has a serving
 * process of its own under it (server_isolate.h). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* wait4 */
#include "umstudy/support.h"
#include "vcuda/image.h"
#include "vcuda/server_gpu.h"
#include "vcuda/server_isolate.h"
#include "vcuda/sha256.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop_flag;
static volatile pid_t child; /* the serving process, while the supervisor waits for it */
static void on_signal(int sig)
{
    stop_flag = 1;
    if (child > 0) kill(child, sig);
}

/* Replacing the supervised process when it ended abnormally: the first pause, the most,
 * and how long it must have lived for the next pause to be the first again. */
#define RESTART_MIN_MS 100
#define RESTART_MAX_MS 10000
#define RESTART_RESET_MS 60000

/* One serving process: opens the GPU, serves until stopped or until the context is
 * lost: the connections it accepts itself, or (sock >= 0, --isolation process) those
 * the network-loop process hands it on sock.  UMS_EXIT_UNSUPPORTED: no GPU to serve. */
static int serve(int device, size_t chunk, int ucx, const char *addr, uint16_t port, vcuda_server_config *cfg,
                 int sock)
{
    char why[VCUDA_WHY_LEN];
    child = 0;
    vcuda_gpu *gpu = vcuda_gpu_open(device, chunk, &stop_flag, why);
    if (!gpu) {
        fprintf(stderr, "%s: %s: nothing to serve\n", cfg->log_prefix, why);
        return UMS_EXIT_UNSUPPORTED;
    }
    if (sock < 0) {
        if (cfg->listen_fd < 0 && (cfg->listen_fd = vcuda_listen_ep(ucx, addr, port, &port, why)) < 0) {
            fprintf(stderr, "vcuda-server: %s\n", why);
            vcuda_gpu_close(gpu);
            return UMS_EXIT_FAILED;
        }
        /* the line scripts wait for before starting clients (again after a restart) */
        fprintf(stderr, "vcuda-server: device %d listening on %s%s:%u\n", device, ucx ? "ucx://" : "",
                *addr ? addr : "127.0.0.1", (unsigned)port);
    }
    struct vcuda_handler h = vcuda_gpu_handler(gpu);
    cfg->handler = &h;
    int rc = sock < 0 ? vcuda_server_run(cfg) : vcuda_isolate_serve(cfg, sock);
    int lost = vcuda_gpu_context_lost(gpu);
    if (!lost) vcuda_gpu_close(gpu); /* a lost context is left to the process's end */
    else vcuda_gpu_end_output(gpu); /* (its last log lines are still in the pipes) */
    return lost ? VCUDA_EXIT_CONTEXT_LOST : rc ? UMS_EXIT_FAILED : 0;
}

/* --isolation process: what a tenant's serving process needs of main's settings. */
typedef struct {
    int device;
    size_t chunk;
    vcuda_server_config *cfg;
    vcuda_tenants *tenants; /* cfg's: a serving process keeps its own tenant only, without secrets */
} tenant_args;

static int serve_tenant(void *arg, int sock, const char *tenant)
{
    tenant_args *a = arg;
    char prefix[128];
    /* only the loop process checks proofs: no secret stays here, and the quota counted
     * here is the tenant's alone (all its connections come to this process) */
    if (vcuda_tenants_only(a->tenants, tenant)) {
        fprintf(stderr, "vcuda-server: a serving process for tenant %s, which the table does not hold\n", tenant);
        return UMS_EXIT_FAILED;
    }
    a->cfg->token = NULL, a->cfg->token_len = 0;
    snprintf(prefix, sizeof prefix, "vcuda-server: tenant %s (pid %d)", tenant, (int)getpid());
    a->cfg->log_prefix = prefix;
    a->cfg->listen_fd = -1;
    a->cfg->handoff = NULL;
    return serve(a->device, a->chunk, 0, "", 0, a->cfg, sock);
}

/* --isolation process: the GPU is checked, once at the start, by a child (neither the
 * supervisor nor the network loop it forks may load the driver: the loop forks the
 * serving processes).  0, or its exit status. */
static int probe_gpu(int device, size_t chunk)
{
    pid_t pid = vcuda_fork_tied();
    if (pid < 0) {
        fprintf(stderr, "vcuda-server: fork: %s\n", strerror(errno));
        return UMS_EXIT_FAILED;
    }
    if (pid == 0) {
        char why[VCUDA_WHY_LEN];
        if (!vcuda_gpu_open(device, chunk, &stop_flag, why)) {
            fprintf(stderr, "vcuda-server: %s: nothing to serve\n", why);
            _exit(UMS_EXIT_UNSUPPORTED);
        }
        _exit(0); /* (the driver's state goes with the process) */
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(st) ? WEXITSTATUS(st) : UMS_EXIT_FAILED;
}

/* --isolation process: the network-loop process, on the supervisor's socket: accepts,
 * authenticates and admits, and hands each client to its tenant's serving process. */
static int serve_isolated(int device, size_t chunk, const char *addr, uint16_t port, vcuda_server_config *cfg,
                          vcuda_tenants *tenants, int max_procs, int linger_s)
{
    child = 0;
    tenant_args ta = {device, chunk, cfg, tenants};
    vcuda_isolate_config ic = {.max_procs = max_procs, .linger_ms = linger_s * 1000,
                               .stop_wait_ms = cfg->frame_timeout_ms + 5000, .log_prefix = cfg->log_prefix,
                               .serve = serve_tenant, .arg = &ta};
    vcuda_isolate *iso = vcuda_isolate_new(&ic);
    if (!iso) {
        fprintf(stderr, "vcuda-server: out of memory\n");
        return UMS_EXIT_FAILED;
    }
    struct vcuda_handoff ho = vcuda_isolate_handoff(iso);
    cfg->handoff = &ho;
    fprintf(stderr, "vcuda-server: device %d, a serving process per tenant, listening on %s:%u\n", device,
            *addr ? addr : "127.0.0.1", (unsigned)port);
    int rc = vcuda_server_run(cfg);
    vcuda_isolate_end(iso);
    return rc ? UMS_EXIT_FAILED : 0;
}

int main(int argc, char **argv)
{
    long long device = 0, timeout = 5000, chunk_kib = 1024, spin_us = 200, nap_us = VCUDA_NAP_US_DEFAULT, nap_ms = 100,
              max_clients = 256, max_preauth = 128,
              max_frame_kib = VCUDA_MAX_PAYLOAD / 1024 + 1, client_mem_mib = 0, max_handles = 16384, max_modules = 256,
              cache_mib = 256, max_per_source = 64, idle_timeout_s = 600, max_entry_mib = 64, max_image_mib = 256,
              inflate_budget_mib = 512, max_tenant_procs = 64, tenant_linger_s = 30;
    const char *listen_at = "127.0.0.1:7470", *isolation = "shared", *tenants_file = "", *frame_tags = "on";
    const ums_arg args[] = {
        {"device", UMS_ARG_INT, &device, "GPU ordinal this server exports", 0, VCUDA_MAX_DEVICES - 1, NULL},
        {"listen", UMS_ARG_STRING, &listen_at, "[tcp://|ucx://]ADDR:PORT (ADDR defaults to 127.0.0.1)", 1, 0, NULL},
        {"timeout-ms", UMS_ARG_INT, &timeout, "bound on a stalled frame or reply", 10, 600000, NULL},
        {"chunk-kib", UMS_ARG_INT, &chunk_kib, "D2H reply chunk (pipelined)", 4, VCUDA_MAX_CHUNK / 1024, NULL},
        {"spin-us", UMS_ARG_INT, &spin_us, "busy-wait this long for a client's next request (0: always poll)", 0, 100000, NULL},
        {"nap-us", UMS_ARG_INT, &nap_us,
         "after a keep-alive (TOUCH, PING), wait for the next request in ppoll() naps this long instead of spinning "
         "and then blocking: a request between keep-alives finds the thread in a shallow idle state; doubled "
         "while the naps cost more than 4% of a core (0: off)",
         0, 100000, NULL},
        {"nap-ms", UMS_ARG_INT, &nap_ms, "how long after a keep-alive the naps go on before blocking", 0, 60000, NULL},
        {"max-clients", UMS_ARG_INT, &max_clients, "authenticated clients at once (default 256)", 1, 4096, NULL},
        {"max-per-source", UMS_ARG_INT, &max_per_source,
         "authenticated clients from one address (default 64; 0: no cap); more are refused: \"too many connections from ADDR\"",
         0, 4096, NULL},
        {"idle-timeout-s", UMS_ARG_INT, &idle_timeout_s,
         "a session with no request this long is closed (default 600; 0: never; any request counts: the client PINGs after VCUDA_IDLE_PING_MS idle, 2 min by default)",
         0, 2000000, NULL},
        {"max-preauth", UMS_ARG_INT, &max_preauth,
         "connections not yet authenticated (default 128); at the cap, and beyond a quarter of it from one address, "
         "one that stalled past 250 ms is dropped first", 4, 65536, NULL},
        {"max-frame-kib", UMS_ARG_INT, &max_frame_kib, "largest request a client may send (its receive buffer)", 4, VCUDA_MAX_PAYLOAD / 1024 + 1, NULL},
        {"tenants", UMS_ARG_STRING, &tenants_file,
         "FILE of tenants, one per line: NAME MEM_MIB MAX_CONNS SECRET (blank-separated; '#' starts a comment line; "
         "NAME 1-64 of [A-Za-z0-9._-]; MEM_MIB: device memory all its connections hold together, 0 no quota; "
         "MAX_CONNS: its connections at once, 0 no own limit; SECRET: its clients' token). Mode 0600, owned by the "
         "server's user. Clients name theirs with VCUDA_TENANT. Without it: one tenant, \"default\", whose secret "
         "is the token", 0, 0, NULL},
        {"client-mem-mib", UMS_ARG_INT, &client_mem_mib,
         "device memory the \"default\" tenant (all clients of the token together) may hold, without --tenants "
         "(0: no quota)", 0, 1 << 30, NULL},
        {"max-handles", UMS_ARG_INT, &max_handles, "streams+events+modules+functions of one client", 16, 1 << 20, NULL},
        {"max-modules", UMS_ARG_INT, &max_modules, "modules one client may have loaded", 1, 65536, NULL},
        {"isolation", UMS_ARG_CHOICE, &isolation,
         "what separates clients (default shared):\n"
         "      shared:  one CUDA context for all clients; each has its own modules (__device__ state),\n"
         "               streams and handle table, but a kernel can read and write any memory of the\n"
         "               context, other clients' included, and a sticky error ends every session\n"
         "      context: a context per client in one process: separate modules, handles and context\n"
         "               settings, but NOT separate memory (one address space: a kernel given another\n"
         "               client's device pointer reads it), and a sticky error ends every session\n"
         "      process: a serving process (address space and context) per tenant (the one its client\n"
         "               authenticated as: --tenants; without it every client is the tenant \"default\"),\n"
         "               forked after authentication, with the tenant's quota counted there:\n"
         "               a kernel of one tenant cannot reach another tenant's memory\n"
         "               (such a pointer faults, or names the tenant's own memory) and a sticky error\n"
         "               ends only that tenant's sessions.  Still shared: the GPU's\n"
         "               compute and memory bandwidth and its total memory (no MIG/MPS partition);\n"
         "               clients of the same tenant share one process, as in shared.  TCP only\n"
         "     ",
         0, 0, "shared|context|process"},
        {"frame-tags", UMS_ARG_CHOICE, &frame_tags,
         "on (default): every frame after the handshake carries an AES-256-GCM tag, so a frame injected, "
         "replayed or altered on the path is refused; off: none, for a network the site trusts (large copies "
         "run at the transport's speed); clients must say the same (VCUDA_FRAME_TAGS=off), else they are "
         "refused by name, and the choice is covered by the handshake's proofs", 0, 0, "on|off"},
        {"max-tenant-procs", UMS_ARG_INT, &max_tenant_procs, "--isolation process: serving processes at once (more tenants are refused at authentication)", 1, 4096, NULL},
        {"tenant-linger-s", UMS_ARG_INT, &tenant_linger_s, "--isolation process: a serving process without sessions this long exits (its GPU memory goes back)", 0, 86400, NULL},
        {"cache-mib", UMS_ARG_INT, &cache_mib, "validated module images kept for later clients", 0, 1 << 20, NULL},
        {"max-entry-mib", UMS_ARG_INT, &max_entry_mib,
         "decompressed size one compressed fatbin entry may declare (default 64); larger: refused, nothing decompressed",
         1, 1 << 20, NULL},
        {"max-image-mib", UMS_ARG_INT, &max_image_mib,
         "decompressed size all compressed entries of one module image may declare together (default 256)", 1, 1 << 20, NULL},
        {"inflate-budget-mib", UMS_ARG_INT, &inflate_budget_mib,
         "bytes the whole server decompresses at one time (default 512); a load beyond it waits up to 2 s, then is refused as busy",
         1, 1 << 20, NULL},
    };
    ums_args_parse(argc, argv,
                   "vcuda-server: serves one GPU to vcuda clients (token: VCUDA_TOKEN or VCUDA_TOKEN_FILE, or the "
                   "secrets of --tenants). A tenant's quota counts what all its connections make the GPU hold: "
                   "allocations (plain, pitched, arrays, graph allocation nodes), the __device__/__constant__ data and "
                   "code of the modules they load, and the memory their context limits reserve (cudaLimitStackSize: "
                   "size x resident threads; heap, printf FIFO: the size); a tenant's limits go back to the context's "
                   "previous values when its last connection leaves",
                   args, sizeof args / sizeof args[0]);
    char addr[256], why[VCUDA_WHY_LEN];
    uint16_t port;
    int ucx;
    if (vcuda_parse_endpoint(listen_at, &ucx, addr, &port) != 0) {
        fprintf(stderr, "vcuda-server: error: --listen %s: expected [tcp://|ucx://]ADDR:PORT or PORT\n", listen_at);
        return UMS_EXIT_USAGE;
    }
    int process = !strcmp(isolation, "process");
    if (ucx && process) { /* a UCX connection cannot be handed to another process */
        fprintf(stderr, "vcuda-server: error: --isolation process serves TCP only, not --listen %s\n", listen_at);
        return UMS_EXIT_USAGE;
    }
    if (ucx && !vcuda_have_ucx()) {
        fprintf(stderr, "vcuda-server: error: --listen %s: this vcuda-server was built without UCX\n", listen_at);
        return UMS_EXIT_USAGE;
    }
    /* usage problems first, so they are reported the same with or without a GPU */
    static vcuda_tenants tenants;
    if (*tenants_file) {
        if (client_mem_mib) {
            fprintf(stderr, "vcuda-server: error: --client-mem-mib is the quota of the single-token tenant; with "
                            "--tenants each tenant's line gives its own (MEM_MIB)\n");
            return UMS_EXIT_USAGE;
        }
        if (vcuda_tenants_load(&tenants, tenants_file, why)) {
            fprintf(stderr, "vcuda-server: error: %s\n", why);
            return UMS_EXIT_USAGE;
        }
        fprintf(stderr, "vcuda-server: %zu tenant(s) from %s\n", tenants.n, tenants_file);
    } else {
        uint8_t token[VCUDA_MAX_TOKEN];
        size_t token_len = 0;
        if (vcuda_token_load(token, &token_len, why) != VCUDA_OK) {
            fprintf(stderr, "vcuda-server: error: no usable token: %s; refusing to serve without one\n", why);
            return UMS_EXIT_USAGE;
        }
        if (vcuda_tenants_single(&tenants, token, token_len, (uint64_t)client_mem_mib << 20, why)) {
            fprintf(stderr, "vcuda-server: error: %s\n", why);
            return UMS_EXIT_FAILED;
        }
        vcuda_wipe(token, sizeof token);
    }
    vcuda_gpu_limits lim = {(uint32_t)max_handles, (uint32_t)max_modules, (size_t)cache_mib << 20,
                            !strcmp(isolation, "context")};
    vcuda_gpu_set_limits(&lim);
    vcuda_image_limits ilim = {(uint64_t)max_entry_mib << 20, (uint64_t)max_image_mib << 20,
                               (uint64_t)inflate_budget_mib << 20, 2000};
    vcuda_image_set_limits(&ilim);
    vcuda_server_config cfg = {.tenants = &tenants,
                               .device = (int)device, .frame_timeout_ms = (int)timeout,
                               .max_conns = (int)max_clients, .max_preauth = (int)max_preauth,
                               .max_per_source = (int)max_per_source, .idle_timeout_ms = (int)idle_timeout_s * 1000, .frame_tags_off = !strcmp(frame_tags, "off"),
                               .max_frame = (uint32_t)(max_frame_kib * 1024 > VCUDA_MAX_PAYLOAD ? VCUDA_MAX_PAYLOAD : max_frame_kib * 1024),
                               .stop = &stop_flag, .log_prefix = "vcuda-server", .spin_us = (int)spin_us,
                               .nap_us = (int)nap_us, .nap_ms = (int)nap_ms};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (ucx) { /* a UCX listener does not survive fork(): served in this process */
        cfg.listen_fd = -1;
        return serve((int)device, (size_t)chunk_kib * 1024, ucx, addr, port, &cfg, -1);
    }
    /* TCP: this process only holds the socket and supervises the process that serves
     * it: a serving process uses the GPU until a sticky error leaves it unusable (the
     * driver keeps such an error for the life of the process) or it dies, then a fresh
     * one takes over the same socket: clients that connect meanwhile wait in its
     * backlog.  No driver, no such GPU: said at once, once; with --isolation process by
     * opening the GPU in a short-lived child, else by a look for the driver (the serving
     * process opens the GPU anyway, and says why it cannot). */
    if (process) {
        int rc = probe_gpu((int)device, (size_t)chunk_kib * 1024);
        if (rc) return rc;
    } else {
        void *probe = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!probe) {
            fprintf(stderr, "vcuda-server: no CUDA driver (libcuda.so.1: %s): nothing to serve\n", dlerror());
            return UMS_EXIT_UNSUPPORTED;
        }
        dlclose(probe);
    }
    cfg.listen_fd = vcuda_listen_ep(0, addr, port, &port, why);
    if (cfg.listen_fd < 0) {
        fprintf(stderr, "vcuda-server: %s\n", why);
        return UMS_EXIT_FAILED;
    }
    /* The supervised process that ends any other way than asked to (a signal: a crash
     * in the driver, the OOM killer; a failure of its loop) is replaced too, after a
     * pause that doubles with each replacement in a row (a crash loop costs at most one
     * start per RESTART_MAX_MS) and starts again from RESTART_MIN_MS once one has lived
     * RESTART_RESET_MS.  Final: a stop asked of this process, a supervised process that
     * stopped cleanly (0), or found nothing to serve (77). */
    const char *what = process ? "network-loop process" : "serving process";
    int pause_ms = RESTART_MIN_MS;
    for (;;) {
        pid_t pid = vcuda_fork_tied(); /* the supervisor killed: so is what it supervises */
        if (pid < 0) {
            fprintf(stderr, "vcuda-server: fork: %s\n", strerror(errno));
            return UMS_EXIT_FAILED;
        }
        if (pid == 0)
            _exit(process ? serve_isolated((int)device, (size_t)chunk_kib * 1024, addr, port, &cfg, &tenants,
                                           (int)max_tenant_procs, (int)tenant_linger_s)
                          : serve((int)device, (size_t)chunk_kib * 1024, 0, addr, port, &cfg, -1));
        child = pid;
        int64_t born = vcuda_now_ms();
        int st = 0;
        struct rusage ru;
        memset(&ru, 0, sizeof ru);
        while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR) {}
        child = 0;
        int64_t lived = vcuda_now_ms() - born;
        /* what serving cost the CPU: a polling or napping server's core time, beside its life */
        const double user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
        const double sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6, wall = (double)lived / 1000.0;
        fprintf(stderr, "vcuda-server: device %lld: %s %d used %.3f s of CPU (user %.3f, system %.3f) in %.3f s: %.1f%%\n",
                device, what, (int)pid, user + sys, user, sys, wall, wall > 0 ? 100.0 * (user + sys) / wall : 0.0);
        if (stop_flag) return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (code == 0 || code == UMS_EXIT_UNSUPPORTED || code == UMS_EXIT_USAGE) return code;
        if (lived >= RESTART_RESET_MS) pause_ms = RESTART_MIN_MS;
        char reason[96];
        vcuda_proc_ending(st, reason, sizeof reason);
        fprintf(stderr, "vcuda-server: device %lld: %s %d %s (it ran %.1f s); starting a fresh %s in %.1f s\n", device,
                what, (int)pid, reason, (double)lived / 1000.0, what, pause_ms / 1000.0);
        for (int64_t until = vcuda_now_ms() + pause_ms; !stop_flag && vcuda_now_ms() < until;) {
            struct timespec ts = {0, 20 * 1000000L}; /* a stop signal cuts it short */
            nanosleep(&ts, NULL);
        }
        if (stop_flag) return 0;
        pause_ms = pause_ms * 2 > RESTART_MAX_MS ? RESTART_MAX_MS : pause_ms * 2;
    }
}
