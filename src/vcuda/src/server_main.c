/* vcuda-server --device N --listen ADDR:PORT: serves one GPU to vcuda clients.
 * Exit codes: 2 usage (no token, bad address, a bad tenants file), 77 nothing to serve
 * (no driver, no such GPU, a driver without cuFuncGetParamInfo), 1 the loop failed.
 * Over TCP a supervising process holds the socket and replaces the serving process
 * whenever it ends without being asked to: after a sticky error, a crash or kill (any
 * signal, the OOM killer's included) or a failure of its loop, with a growing pause
 * when it keeps ending. */
#define _POSIX_C_SOURCE 200809L
#include "umstudy/support.h"
#include "vcuda/image.h"
#include "vcuda/server_gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
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

/* A serving process's exit status when a sticky error made the GPU unusable to it. */
#define EXIT_CONTEXT_LOST 3
/* Replacing a serving process that ended abnormally: the first pause, the most, and
 * how long a serving process must have lived for the next pause to be the first again. */
#define RESTART_MIN_MS 100
#define RESTART_MAX_MS 10000
#define RESTART_RESET_MS 60000

static const char *signal_name(int sig)
{
    static char other[32];
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    case SIGQUIT: return "SIGQUIT";
    case SIGSYS: return "SIGSYS";
    case SIGTRAP: return "SIGTRAP";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: snprintf(other, sizeof other, "signal %d", sig); return other;
    }
}

/* One serving process: opens the GPU, serves until stopped or until the context is
 * lost.  UMS_EXIT_UNSUPPORTED: no GPU to serve. */
static int serve(int device, size_t chunk, int ucx, const char *addr, uint16_t port, vcuda_server_config *cfg)
{
    char why[VCUDA_WHY_LEN];
    child = 0;
    vcuda_gpu *gpu = vcuda_gpu_open(device, chunk, &stop_flag, why);
    if (!gpu) {
        fprintf(stderr, "vcuda-server: %s: nothing to serve\n", why);
        return UMS_EXIT_UNSUPPORTED;
    }
    if (cfg->listen_fd < 0 && (cfg->listen_fd = vcuda_listen_ep(ucx, addr, port, &port, why)) < 0) {
        fprintf(stderr, "vcuda-server: %s\n", why);
        vcuda_gpu_close(gpu);
        return UMS_EXIT_FAILED;
    }
    /* the line scripts wait for before starting clients (again after a restart) */
    fprintf(stderr, "vcuda-server: device %d listening on %s%s:%u\n", device, ucx ? "ucx://" : "",
            *addr ? addr : "127.0.0.1", (unsigned)port);
    struct vcuda_handler h = vcuda_gpu_handler(gpu);
    cfg->handler = &h;
    int rc = vcuda_server_run(cfg);
    int lost = vcuda_gpu_context_lost(gpu);
    if (!lost) vcuda_gpu_close(gpu); /* a lost context is left to the process's end */
    else vcuda_gpu_end_output(gpu); /* (its last log lines are still in the pipes) */
    return lost ? EXIT_CONTEXT_LOST : rc ? UMS_EXIT_FAILED : 0;
}

int main(int argc, char **argv)
{
    long long device = 0, timeout = 5000, chunk_kib = 1024, spin_us = 200, max_clients = 256, max_preauth = 128,
              max_frame_kib = VCUDA_MAX_PAYLOAD / 1024 + 1, client_mem_mib = 0, max_handles = 16384, max_modules = 256,
              cache_mib = 256, max_per_source = 64, idle_timeout_s = 600, max_entry_mib = 64, max_image_mib = 256,
              inflate_budget_mib = 512;
    const char *listen_at = "127.0.0.1:7470", *isolation = "shared", *tenants_file = "";
    const ums_arg args[] = {
        {"device", UMS_ARG_INT, &device, "GPU ordinal this server exports", 0, VCUDA_MAX_DEVICES - 1, NULL},
        {"listen", UMS_ARG_STRING, &listen_at, "[tcp://|ucx://]ADDR:PORT (ADDR defaults to 127.0.0.1)", 1, 0, NULL},
        {"timeout-ms", UMS_ARG_INT, &timeout, "bound on a stalled frame or reply", 10, 600000, NULL},
        {"chunk-kib", UMS_ARG_INT, &chunk_kib, "D2H reply chunk (pipelined)", 4, VCUDA_MAX_CHUNK / 1024, NULL},
        {"spin-us", UMS_ARG_INT, &spin_us, "busy-wait this long for a client's next request (0: always poll)", 0, 100000, NULL},
        {"max-clients", UMS_ARG_INT, &max_clients, "authenticated clients at once (default 256)", 1, 4096, NULL},
        {"max-per-source", UMS_ARG_INT, &max_per_source,
         "authenticated clients from one address (default 64; 0: no cap); more are refused: \"too many connections from ADDR\"",
         0, 4096, NULL},
        {"idle-timeout-s", UMS_ARG_INT, &idle_timeout_s,
         "a session with no request this long is closed (default 600; 0: never; PING/keep-alive counts, see VCUDA_KEEPALIVE_MS)",
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
        {"isolation", UMS_ARG_STRING, &isolation, "shared (one context, per-client modules and streams) or context (one per client)", 0, 0, NULL},
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
        memset(token, 0, sizeof token);
    }
    if (strcmp(isolation, "shared") && strcmp(isolation, "context")) {
        fprintf(stderr, "vcuda-server: error: --isolation %s: expected shared or context\n", isolation);
        return UMS_EXIT_USAGE;
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
                               .max_per_source = (int)max_per_source, .idle_timeout_ms = (int)idle_timeout_s * 1000,
                               .max_frame = (uint32_t)(max_frame_kib * 1024 > VCUDA_MAX_PAYLOAD ? VCUDA_MAX_PAYLOAD : max_frame_kib * 1024),
                               .stop = &stop_flag, .log_prefix = "vcuda-server", .spin_us = (int)spin_us};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (ucx) { /* a UCX listener does not survive fork(): served in this process */
        cfg.listen_fd = -1;
        return serve((int)device, (size_t)chunk_kib * 1024, ucx, addr, port, &cfg);
    }
    /* TCP: this process only holds the socket and supervises; each serving process uses
     * the GPU until a sticky error leaves it unusable (the driver keeps such an error for
     * the life of the process) or it dies, then a fresh one takes over the same socket:
     * clients that connect meanwhile wait in its backlog.  No driver at all: said at once. */
    void *probe = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!probe) {
        fprintf(stderr, "vcuda-server: no CUDA driver (libcuda.so.1: %s): nothing to serve\n", dlerror());
        return UMS_EXIT_UNSUPPORTED;
    }
    dlclose(probe);
    cfg.listen_fd = vcuda_listen_ep(0, addr, port, &port, why);
    if (cfg.listen_fd < 0) {
        fprintf(stderr, "vcuda-server: %s\n", why);
        return UMS_EXIT_FAILED;
    }
    /* A serving process that ends any other way than asked to (a signal: a crash in
     * the driver, the OOM killer; a failure of its loop) is replaced too, after a
     * pause that doubles with each replacement in a row (a crash loop costs at most one
     * start per RESTART_MAX_MS) and starts again from RESTART_MIN_MS once a serving
     * process has lived RESTART_RESET_MS.  Final: a stop asked of this process, a
     * serving process that stopped cleanly (0), or found nothing to serve (77). */
    int pause_ms = RESTART_MIN_MS;
    for (;;) {
        fflush(NULL);
        pid_t supervisor = getpid(), pid = fork();
        if (pid < 0) {
            fprintf(stderr, "vcuda-server: fork: %s\n", strerror(errno));
            return UMS_EXIT_FAILED;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* the supervisor killed: so is its server */
            if (getppid() != supervisor) _exit(0); /* it died before that took effect */
            _exit(serve((int)device, (size_t)chunk_kib * 1024, 0, addr, port, &cfg));
        }
        child = pid;
        int64_t born = vcuda_now_ms();
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        child = 0;
        int64_t lived = vcuda_now_ms() - born;
        if (stop_flag) return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (code == 0 || code == UMS_EXIT_UNSUPPORTED || code == UMS_EXIT_USAGE) return code;
        if (lived >= RESTART_RESET_MS) pause_ms = RESTART_MIN_MS;
        char reason[96];
        if (code == EXIT_CONTEXT_LOST) snprintf(reason, sizeof reason, "ended after a sticky error");
        else if (code > 0) snprintf(reason, sizeof reason, "failed (exit status %d)", code);
        else snprintf(reason, sizeof reason, "was killed by %s%s", signal_name(WTERMSIG(st)),
                      WTERMSIG(st) == SIGKILL ? " (the OOM killer, or kill -9)" : "");
        fprintf(stderr, "vcuda-server: device %lld: serving process %d %s (it ran %.1f s); starting a fresh serving "
                "process in %.1f s\n", device, (int)pid, reason, (double)lived / 1000.0, pause_ms / 1000.0);
        for (int64_t until = vcuda_now_ms() + pause_ms; !stop_flag && vcuda_now_ms() < until;) {
            struct timespec ts = {0, 20 * 1000000L}; /* a stop signal cuts it short */
            nanosleep(&ts, NULL);
        }
        if (stop_flag) return 0;
        pause_ms = pause_ms * 2 > RESTART_MAX_MS ? RESTART_MAX_MS : pause_ms * 2;
    }
}
