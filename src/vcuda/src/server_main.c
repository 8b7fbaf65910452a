/* vcuda-server --device N --listen ADDR:PORT: one per GPU.
 *
 * This slice is the shell: token, GPU check, listening socket, the poll loop.  It
 * answers HELLO, PING and GET_DEVICE_COUNT (1: a server exports exactly one GPU) and
 * every other opcode with an error reply naming it, logged too -- never silently. */
#define _POSIX_C_SOURCE 200809L
#include "umstudy/support.h"
#include "vcuda/server_loop.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

/* The driver is resolved at run time, not linked: the binary builds and starts on a
 * machine without CUDA and can say why it will not serve. */
static void require_gpu(int device)
{
    typedef int (*init_fn)(unsigned);
    typedef int (*count_fn)(int *);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "vcuda-server: no CUDA driver (libcuda.so.1: %s): nothing to serve\n", dlerror());
        exit(UMS_EXIT_UNSUPPORTED);
    }
    init_fn cu_init = (init_fn)dlsym(lib, "cuInit");
    count_fn cu_count = (count_fn)dlsym(lib, "cuDeviceGetCount");
    int n = 0, rc = -1;
    if (!cu_init || !cu_count) {
        fprintf(stderr, "vcuda-server: libcuda.so.1 lacks cuInit/cuDeviceGetCount: nothing to serve\n");
        exit(UMS_EXIT_UNSUPPORTED);
    }
    if ((rc = cu_init(0)) != 0 || (rc = cu_count(&n)) != 0 || n == 0) {
        fprintf(stderr, "vcuda-server: no usable GPU (cuInit/cuDeviceGetCount: CUresult %d, %d devices): nothing to serve\n", rc, n);
        exit(UMS_EXIT_UNSUPPORTED);
    }
    if (device >= n) {
        fprintf(stderr, "vcuda-server: --device %d but this machine has %d GPU(s)\n", device, n);
        exit(UMS_EXIT_UNSUPPORTED);
    }
    /* the handle stays open: the real server will launch through this driver */
}

static int handle(void *ctx, vcuda_conn *c, const vcuda_msg *req, vcuda_msg *r, char *why)
{
    static char msg[96];
    (void)ctx, (void)why;
    if (req->hdr.opcode == VCUDA_OP_GET_DEVICE_COUNT) {
        r->v[0] = 1, r->nv = 1;
        return 0;
    }
    snprintf(msg, sizeof msg, "not implemented yet: %s", vcuda_opcode_name(req->hdr.opcode));
    fprintf(stderr, "vcuda-server: peer %s: %s\n", c->peer, msg);
    vcuda_reply_error(r, 801 /* cudaErrorNotSupported */, msg);
    return 0;
}

static void disconnect(void *ctx, vcuda_conn *c) { (void)ctx, (void)c; /* no state yet */ }

int main(int argc, char **argv)
{
    long long device = 0, timeout = 5000;
    const char *listen_at = "127.0.0.1:7470";
    const ums_arg args[] = {
        {"device", UMS_ARG_INT, &device, "GPU ordinal this server exports", 0, VCUDA_MAX_DEVICES - 1, NULL},
        {"listen", UMS_ARG_STRING, &listen_at, "ADDR:PORT (ADDR defaults to 127.0.0.1)", 1, 0, NULL},
        {"timeout-ms", UMS_ARG_INT, &timeout, "bound on a stalled frame or reply", 10, 600000, NULL},
    };
    ums_args_parse(argc, argv, "vcuda-server: serves one GPU to vcuda clients (token: VCUDA_TOKEN or VCUDA_TOKEN_FILE)",
                   args, sizeof args / sizeof args[0]);
    char addr[256], why[VCUDA_WHY_LEN];
    uint16_t port;
    if (vcuda_parse_hostport(listen_at, addr, &port) != 0) {
        fprintf(stderr, "vcuda-server: error: --listen %s: expected ADDR:PORT or PORT\n", listen_at);
        return UMS_EXIT_USAGE;
    }
    /* usage problems first, so they are reported the same with or without a GPU */
    uint8_t token[VCUDA_MAX_TOKEN];
    size_t token_len = 0;
    if (vcuda_token_load(token, &token_len, why) != VCUDA_OK) {
        fprintf(stderr, "vcuda-server: error: no usable token: %s; refusing to serve without one\n", why);
        return UMS_EXIT_USAGE;
    }
    require_gpu((int)device);
    int lfd = vcuda_listen(addr, port, &port, why);
    if (lfd < 0) {
        fprintf(stderr, "vcuda-server: %s\n", why);
        return UMS_EXIT_FAILED;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    fprintf(stderr, "vcuda-server: device %lld listening on %s:%u\n", device, *addr ? addr : "127.0.0.1",
            (unsigned)port);
    struct vcuda_handler h = {NULL, handle, disconnect};
    vcuda_server_config cfg = {.listen_fd = lfd, .token = token, .token_len = token_len,
                               .device = (int)device, .frame_timeout_ms = (int)timeout,
                               .max_conns = 256, .handler = &h, .stop = &stop_flag,
                               .log_prefix = "vcuda-server"};
    return vcuda_server_run(&cfg) ? UMS_EXIT_FAILED : 0;
}
