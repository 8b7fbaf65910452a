/* The libcudart stand-in's connection to its servers and its per-thread state: the
 * servers are opened once per process on the first call that needs one, every request
 * goes through rt_call/rt_result (a reply's status becomes the cudaError_t, device
 * printf output waiting on the server is fetched first), and the current device and
 * last error are the calling thread's, as in the real runtime.  Kept apart from the API
 * families because every one of them goes through it. */
#define _GNU_SOURCE
#include "cudart_internal.h"

/* A mark that this is vcuda's runtime and not NVIDIA's (the two export the same cuda*
 * names): programs such as vcuda-bench look it up to know whether calls are remote. */
EXPORT const char vcuda_stand_in[] = "vcuda libcudart stand-in";

/* ---- per-thread state, as in the real runtime ------------------------------------- */

_Thread_local int rt_current_device;
_Thread_local cudaError_t rt_last_error;

cudaError_t rt_record(cudaError_t e)
{
    if (e != cudaSuccess) rt_last_error = e;
    return e;
}

/* Room for one more element in a growing array (*cap doubles): 0, or -1 if out of memory. */
int rt_grow(void *arr, size_t *cap, size_t n, size_t elem)
{
    void **p = arr;
    if (n < *cap) return 0;
    size_t c = *cap ? 2 * *cap : 64;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q, *cap = c;
    return 0;
}

/* ---- connection set-up, once per process ----------------------------------------- */

static pthread_once_t open_once = PTHREAD_ONCE_INIT;
static cudaError_t open_error;
int rt_async_launch = 1;
int rt_server_graphs = 1; /* graphs built and run on the server (cudart_graph.c) */

/* An environment switch between two words: *on = (value is `yes`), unchanged if unset;
 * -1 (said on stderr) for any other value. */
static int env_choice(const char *name, const char *yes, const char *no, int *on)
{
    const char *l = getenv(name);
    if (!l || !*l) return 0;
    if (strcmp(l, yes) && strcmp(l, no)) {
        fprintf(stderr, "vcuda: %s='%s' is not %s or %s\n", name, l, yes, no);
        return -1;
    }
    *on = !strcmp(l, yes);
    return 0;
}

static void open_servers(void)
{
    char why[VCUDA_WHY_LEN];
    if (env_choice("VCUDA_LAUNCH", "async", "sync", &rt_async_launch) ||
        env_choice("VCUDA_GRAPHS", "server", "client", &rt_server_graphs)) {
        open_error = cudaErrorInitializationError;
        return;
    }
    if (vcuda_client_open(why)) {
        fprintf(stderr, "vcuda: %s\n", why);
        open_error = cudaErrorInitializationError;
    } else if (vcuda_client_device_count() == 0) {
        fprintf(stderr, "vcuda: no reachable server: no devices\n");
        open_error = cudaErrorNoDevice;
    }
}

/* Every API entry that needs a server starts here. */
cudaError_t rt_ready(void)
{
    pthread_once(&open_once, open_servers);
    return open_error;
}

static void fetch_output(int device);

/* Status of a call -> cudaError_t, with the server's code for its own errors.  A reply
 * that says device printf output waits has it fetched and written to stdout first, so
 * it comes before anything the program prints after the call. */
cudaError_t rt_result(vcuda_client_status s, const vcuda_msg *reply, const char *api, const char *why)
{
    if ((s == VCUDA_CLIENT_OK || s == VCUDA_CLIENT_REMOTE_ERROR) && (reply->hdr.flags & VCUDA_FLAG_OUTPUT)) {
        cudaError_t code = s == VCUDA_CLIENT_OK ? cudaSuccess : (cudaError_t)(int)(int64_t)reply->v[0];
        fetch_output(rt_current_device);
        return code ? rt_record(code) : cudaSuccess;
    }
    if (s == VCUDA_CLIENT_OK) return cudaSuccess;
    if (s == VCUDA_CLIENT_REMOTE_ERROR) return rt_record((cudaError_t)(int)(int64_t)reply->v[0]);
    if (s != VCUDA_CLIENT_UNAVAILABLE) fprintf(stderr, "vcuda: %s: %s\n", api, why);
    return rt_record((cudaError_t)vcuda_client_cuda_error(s));
}

cudaError_t rt_call(unsigned op, const uint64_t *v, unsigned nv, vcuda_msg *reply, const char *api)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m;
    cudaError_t e = rt_ready();
    if (e) return rt_record(e);
    memset(&m, 0, sizeof m);
    m.hdr.opcode = (uint16_t)op;
    for (unsigned i = 0; i < nv; ++i) m.v[i] = v[i];
    m.nv = nv;
    return rt_result(vcuda_client_call(rt_current_device, &m, reply, 0, why), reply, api, why);
}

/* Once per function (said: its own flag), the name on stderr; cudaErrorNotSupported. */
int vcuda_cudart_unsupported(const char *name, int *said)
{
    if (!atomic_exchange((_Atomic int *)said, 1)) fprintf(stderr, "vcuda: %s is not supported remotely\n", name);
    return rt_record(cudaErrorNotSupported);
}

/* ---- device printf ------------------------------------------------------------------ */

/* The server's reply said output waits: fetched (in chunks) and written where the real
 * runtime's driver writes it: device printf to stdout, device assertion messages to
 * stderr (the reply says which). */
static void fetch_output(int device)
{
    char why[VCUDA_WHY_LEN];
    vcuda_msg m, r;
    memset(&m, 0, sizeof m);
    m.hdr.opcode = VCUDA_OP_PRINTF_FETCH;
    for (int more = 1; more;) {
        vcuda_client_status st = vcuda_client_call(device, &m, &r, 0, why);
        if (st != VCUDA_CLIENT_OK) {
            if (st != VCUDA_CLIENT_UNAVAILABLE) fprintf(stderr, "vcuda: device printf output lost: %s\n", why);
            return;
        }
        if (r.blob_len) fwrite(r.blob, 1, r.blob_len, r.v[0] == 2 ? stderr : stdout);
        more = (r.hdr.flags & VCUDA_FLAG_OUTPUT) && r.blob_len;
    }
}
