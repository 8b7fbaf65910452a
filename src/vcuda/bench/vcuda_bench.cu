// vcuda-bench: P003 §4.2's copy and launch model, measured.  (transport: local,
// vcuda-tcp or vcuda-ucx, from the first VCUDA_SERVERS entry.)  An ordinary CUDA program
// (-cudart shared): run as is it measures the local GPUs, run with the vcuda stand-in
// first on LD_LIBRARY_PATH it measures the remote ones through the same calls.
//
//   T(S) = S/B + L      for H2D and D2H, S = 512 B .. 4 MiB, fitted per n = 1..N devices
//   LK                  launch of a trivial kernel (call time; the launch is asynchronous)
//   launch_sync_time    a trivial kernel's launch + cudaDeviceSynchronize (one device)
//   host_fn_time        cudaLaunchHostFunc's round trip on an idle stream, beside
//                       d2h_1k_time (a runtime without it, e.g. an older stand-in: skipped)
//   large copies        --large bytes H2D/D2H, and (remote) the transport alone: the same
//                       bytes in the same chunks to the server's SINK, which drops them
//   intervals           D2H latency vs idle time between calls (P003 figs. 8/9); run with
//                       and without VCUDA_KEEPALIVE_MS to see the paper's effect.  What the
//                       jump is made of, one part at a time: --gap-wait spin keeps this
//                       program's core awake through the gap (the client's wake-up out),
//                       the server's --spin-us / --nap-us its own, and on the local
//                       runtime --local-keepalive-ms copies 4 bytes back every N ms from a
//                       thread of its own (the GPU and driver kept busy, no network)
//
// A sweep over n devices issues each call once per device in turn (the REMD host loop),
// and a call's time is the sweep's time / n: the median over --reps sweeps is reported.
#include "umstudy/support.h"
#include "vcuda/client.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CK(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) ums_fail("%s: %s (%s)", #call, cudaGetErrorString(e_), cudaGetErrorName(e_)); \
    } while (0)

__global__ void trivial_kernel(int *flag, int value)
{
    if (flag && threadIdx.x == 0 && blockIdx.x == 0) *flag = value;
}

struct device_buffers {
    void *dev;
    int *flag;
};

static const char *transport;

static ums_rec begin(ums_rec *r, const char *metric, double v, const char *unit, int n)
{
    ums_rec_begin(r, metric, v, unit);
    ums_rec_str(r, "transport", transport);
    ums_rec_int(r, "servers", n);
    return *r;
}

// Median time per call of op(d) issued to devices 0..n-1 in turn.
template <class Op> static double per_call_us(int n, int reps, Op op)
{
    std::vector<double> t(reps);
    for (int d = 0; d < n; ++d) { // warm-up: connections, modules
        CK(cudaSetDevice(d));
        op(d);
    }
    for (int r = 0; r < reps; ++r) {
        double t0 = ums_now();
        for (int d = 0; d < n; ++d) {
            CK(cudaSetDevice(d));
            op(d);
        }
        t[r] = (ums_now() - t0) * 1e6 / n;
    }
    return ums_median(t.data(), t.size());
}

// Least squares T = S/B + L; B in MB/s (1e6 B/s, as P003), L in us.
static void fit(const std::vector<double> &bytes, const std::vector<double> &us, double *mbps, double *lat)
{
    double n = bytes.size(), sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < bytes.size(); ++i)
        sx += bytes[i], sy += us[i], sxx += bytes[i] * bytes[i], sxy += bytes[i] * us[i];
    double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx); // us per byte
    *lat = (sy - slope * sx) / n;
    *mbps = slope > 0 ? 1.0 / slope : INFINITY;
}

int main(int argc, char **argv)
{
    long long max_devices = 0, reps = 50, large_reps = 5;
    size_t min_bytes = 512, max_bytes = 4u << 20, large = 64u << 20;
    const char *intervals = "0,1,2,5,10,20,50";
    long long interval_calls = 20;
    int skip_intervals = 0;
    long long local_keepalive_ms = 0;
    const char *gap_wait = "sleep";
    const ums_arg args[] = {
        {"max-devices", UMS_ARG_INT, &max_devices, "fit for n = 1..this many devices (0: all)", 0, VCUDA_MAX_DEVICES, NULL},
        {"min-bytes", UMS_ARG_SIZE, &min_bytes, "smallest copy of the fit (power of two)", 4, 1ull << 30, NULL},
        {"max-bytes", UMS_ARG_SIZE, &max_bytes, "largest copy of the fit (power of two)", 4, 1ull << 30, NULL},
        {"reps", UMS_ARG_INT, &reps, "sweeps per point (median)", 3, 100000, NULL},
        {"large", UMS_ARG_SIZE, &large, "large-copy size for throughput", 1 << 20, 16ull << 30, NULL},
        {"large-reps", UMS_ARG_INT, &large_reps, "large copies per direction (median)", 1, 1000, NULL},
        {"intervals", UMS_ARG_STRING, &intervals, "idle ms between D2H calls, comma-separated", 0, 0, NULL},
        {"interval-calls", UMS_ARG_INT, &interval_calls, "D2H calls per interval (median)", 3, 10000, NULL},
        {"no-intervals", UMS_ARG_FLAG, &skip_intervals, "skip the interval sweep", 0, 0, NULL},
        {"gap-wait", UMS_ARG_CHOICE, &gap_wait,
         "how this program passes an idle gap: sleep (its core may go idle) or spin (busy: the core stays awake)",
         0, 0, "sleep|spin"},
        {"local-keepalive-ms", UMS_ARG_INT, &local_keepalive_ms,
         "local runtime only: a thread of this program copies 4 bytes back from device 0 every N ms on a stream "
         "of its own during the interval sweep (P003's dummy transfer without the network; 0: none)", 0, 60000, NULL},
    };
    ums_args_parse(argc, argv, "vcuda-bench: copy/launch latency and bandwidth, local or through vcuda (P003 §4.2)",
                   args, sizeof args / sizeof args[0]);
    ums_json_init("vcuda-bench");
    if ((min_bytes & (min_bytes - 1)) || (max_bytes & (max_bytes - 1)) || min_bytes > max_bytes)
        ums_usage_fail("--min-bytes %zu and --max-bytes %zu must be powers of two, min <= max", min_bytes, max_bytes);
    if (max_bytes == min_bytes) ums_usage_fail("the fit needs at least two sizes (--min-bytes < --max-bytes)");
    std::vector<double> gaps(64);
    int ngaps = ums_parse_numbers(intervals, gaps.data(), 64, 0, 10000);
    if (ngaps < 0) ums_usage_fail("--intervals '%s': expected comma-separated milliseconds in [0, 10000]", intervals);
    gaps.resize(ngaps);

    // The stand-in exports every cuda* name NVIDIA's runtime does, and a mark of its own:
    // that is how this run knows whether its calls cross the network.
    int remote = dlsym(RTLD_DEFAULT, "vcuda_stand_in") != NULL;
    Dl_info info;
    const char *cudart = dladdr((void *)(cudaError_t(*)(void **, size_t))&cudaMalloc, &info) && info.dli_fname ? info.dli_fname : "?";
    const char *servers = getenv("VCUDA_SERVERS");
    transport = !remote ? "local" : servers && !strncmp(servers, "ucx://", 6) ? "vcuda-ucx" : "vcuda-tcp";
    ums_param_str("transport", transport);
    ums_param_str("cudart", cudart);
    const char *ka = getenv("VCUDA_KEEPALIVE_MS");
    ums_param_int("keepalive_ms", remote && ka && *ka ? atoll(ka) : 0);
    if (remote && local_keepalive_ms)
        ums_usage_fail("--local-keepalive-ms is for the local runtime; through vcuda VCUDA_KEEPALIVE_MS keeps a server busy");
    ums_param_str("gap_wait", gap_wait);
    ums_param_int("local_keepalive_ms", local_keepalive_ms);

    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0)
        ums_unsupported("no CUDA device (%s)%s", cudaGetErrorString(e), remote ? " through vcuda: check VCUDA_SERVERS" : "");
    int nmax = max_devices > 0 && max_devices < ndev ? (int)max_devices : ndev;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    ums_param_str("gpu", prop.name);
    ums_param_int("devices", ndev);

    size_t buf_bytes = std::max(max_bytes, large);
    std::vector<device_buffers> dev(nmax);
    char *host = nullptr;
    CK(cudaMallocHost((void **)&host, buf_bytes));
    for (size_t i = 0; i < buf_bytes; ++i) host[i] = (char)(i * 131 + 7);
    for (int d = 0; d < nmax; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaMalloc(&dev[d].dev, buf_bytes));
        CK(cudaMalloc((void **)&dev[d].flag, sizeof(int)));
    }

    // Correctness first: a round trip of the whole buffer and one kernel per device.
    std::vector<char> back(buf_bytes);
    for (int d = 0; d < nmax; ++d) {
        int flag = 0;
        CK(cudaSetDevice(d));
        CK(cudaMemcpy(dev[d].dev, host, buf_bytes, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(back.data(), dev[d].dev, buf_bytes, cudaMemcpyDeviceToHost));
        trivial_kernel<<<1, 32>>>(dev[d].flag, 1000 + d);
        CK(cudaGetLastError());
        CK(cudaMemcpy(&flag, dev[d].flag, sizeof flag, cudaMemcpyDeviceToHost));
        if (memcmp(back.data(), host, buf_bytes) || flag != 1000 + d)
            ums_fail("device %d: data did not survive the round trip (flag %d)", d, flag);
    }

    ums_rec r;
    for (int n = 1; n <= nmax; ++n) {
        std::vector<double> sizes, th, td;
        for (size_t s = min_bytes; s <= max_bytes; s *= 2) {
            double h = per_call_us(n, (int)reps, [&](int d) { CK(cudaMemcpy(dev[d].dev, host, s, cudaMemcpyHostToDevice)); });
            double g = per_call_us(n, (int)reps, [&](int d) { CK(cudaMemcpy(host, dev[d].dev, s, cudaMemcpyDeviceToHost)); });
            sizes.push_back((double)s), th.push_back(h), td.push_back(g);
            for (int dir = 0; dir < 2; ++dir) {
                begin(&r, "copy_time", dir ? g : h, "us", n);
                ums_rec_str(&r, "dir", dir ? "D2H" : "H2D");
                ums_rec_int(&r, "bytes", (long long)s);
                ums_rec_emit(&r);
            }
        }
        double lk = per_call_us(n, (int)reps, [&](int d) { trivial_kernel<<<1, 32>>>(dev[d].flag, 1); });
        CK(cudaGetLastError());
        for (int d = 0; d < n; ++d) {
            CK(cudaSetDevice(d));
            CK(cudaDeviceSynchronize());
        }
        double bh, lh, bd, ld;
        fit(sizes, th, &bh, &lh);
        fit(sizes, td, &bd, &ld);
        const struct { const char *name; double v; const char *unit; } fits[] = {
            {"BH", bh, "MB/s"}, {"LH", lh, "us"}, {"BD", bd, "MB/s"}, {"LD", ld, "us"}, {"LK", lk, "us"}};
        for (const auto &f : fits) {
            begin(&r, f.name, f.v, f.unit, n);
            ums_rec_str(&r, "kind", "fit");
            ums_rec_emit(&r);
        }
        fprintf(stderr, "vcuda-bench: %s n=%d: BH %.0f MB/s LH %.2f us  BD %.0f MB/s LD %.2f us  LK %.2f us\n",
                transport, n, bh, lh, bd, ld, lk);
    }

    // 1 KiB H2D on one device: the call latency target (calls are cheap: many of them,
    // so that a noisy moment on a shared machine does not move the median).
    double h1k = per_call_us(1, (int)std::max(reps, 500LL), [&](int d) { CK(cudaMemcpy(dev[d].dev, host, 1024, cudaMemcpyHostToDevice)); });
    begin(&r, "h2d_1k_time", h1k, "us", 1);
    ums_rec_emit(&r);
    double d1k = per_call_us(1, (int)std::max(reps, 500LL), [&](int d) { CK(cudaMemcpy(host, dev[d].dev, 1024, cudaMemcpyDeviceToHost)); });
    begin(&r, "d2h_1k_time", d1k, "us", 1);
    ums_rec_emit(&r);
    double ls = per_call_us(1, (int)std::max(reps, 500LL), [&](int d) {
        trivial_kernel<<<1, 32>>>(dev[d].flag, 1);
        CK(cudaDeviceSynchronize());
    });
    begin(&r, "launch_sync_time", ls, "us", 1);
    ums_rec_emit(&r);
    // looked up, not linked: the same binary measures runtimes that lack it
    typedef cudaError_t (*host_fn_launch)(cudaStream_t, cudaHostFn_t, void *);
    host_fn_launch launch_host_fn = (host_fn_launch)dlsym(RTLD_DEFAULT, "cudaLaunchHostFunc");
    if (launch_host_fn) {
        static int calls;
        double hf = per_call_us(1, (int)std::max(reps, 500LL), [&](int) {
            CK(launch_host_fn(0, [](void *p) { ++*(int *)p; }, &calls));
            CK(cudaStreamSynchronize(0));
        });
        begin(&r, "host_fn_time", hf, "us", 1);
        ums_rec_emit(&r);
    }

    // Large copies and, through vcuda, the bare transport over the same chunks.
    CK(cudaSetDevice(0));
    std::vector<double> t(large_reps);
    double gbps[3] = {0, 0, 0};
    for (int dir = 0; dir < 3; ++dir) {
        char why[VCUDA_WHY_LEN];
        if (dir == 2 && (!remote || vcuda_client_open(why) || vcuda_client_device_count() == 0)) break;
        for (long long k = 0; k < large_reps; ++k) {
            double t0 = ums_now();
            if (dir == 0) CK(cudaMemcpy(dev[0].dev, host, large, cudaMemcpyHostToDevice));
            else if (dir == 1) CK(cudaMemcpy(host, dev[0].dev, large, cudaMemcpyDeviceToHost));
            else {
                vcuda_msg m, rep;
                memset(&m, 0, sizeof m);
                m.hdr.opcode = VCUDA_OP_SINK;
                // the chunks the stand-in's copies use, from the same setting
                if (vcuda_client_send_chunks(0, &m, 0, (const uint8_t *)host, large, vcuda_client_chunk(), &rep, why))
                    ums_fail("transport measurement: %s", why);
            }
            t[k] = ums_now() - t0;
        }
        gbps[dir] = large / ums_median(t.data(), t.size()) / 1e9;
        static const char *const what[] = {"H2D", "D2H", "transport"};
        begin(&r, dir == 2 ? "transport_bandwidth" : "copy_bandwidth", gbps[dir], "GB/s", 1);
        ums_rec_str(&r, "dir", what[dir]);
        ums_rec_int(&r, "bytes", (long long)large);
        ums_rec_emit(&r);
    }
    if (gbps[2] > 0) {
        begin(&r, "large_copy_vs_transport", std::min(gbps[0], gbps[1]) / gbps[2], "ratio", 1);
        ums_rec_emit(&r);
    }
    if (remote) vcuda_client_close();

    // D2H latency after idle gaps (P003 figs. 8/9).
    std::atomic<int> ka_stop(0);
    std::thread ka_thread;
    if (!skip_intervals && local_keepalive_ms)
        ka_thread = std::thread([&] {
            int *touch = nullptr, v = 0;
            cudaStream_t st;
            CK(cudaSetDevice(0));
            CK(cudaMalloc((void **)&touch, sizeof(int)));
            CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
            while (!ka_stop.load()) {
                CK(cudaMemcpyAsync(&v, touch, sizeof v, cudaMemcpyDeviceToHost, st));
                CK(cudaStreamSynchronize(st));
                std::this_thread::sleep_for(std::chrono::milliseconds(local_keepalive_ms));
            }
            CK(cudaStreamDestroy(st));
            CK(cudaFree(touch));
        });
    const bool spin_gaps = !strcmp(gap_wait, "spin");
    double idle_first = 0, idle_last = 0;
    if (!skip_intervals)
        for (double gap : gaps) {
            std::vector<double> lat(interval_calls);
            int flag;
            CK(cudaSetDevice(0));
            for (long long k = 0; k < interval_calls; ++k) {
                if (spin_gaps)
                    for (const double until = ums_now() + gap * 1e-3; ums_now() < until;) {
                    }
                else
                    std::this_thread::sleep_for(std::chrono::microseconds((long long)(gap * 1000)));
                double t0 = ums_now();
                CK(cudaMemcpy(&flag, dev[0].flag, sizeof flag, cudaMemcpyDeviceToHost));
                lat[k] = (ums_now() - t0) * 1e6;
            }
            double med = ums_median(lat.data(), lat.size());
            begin(&r, "d2h_after_idle", med, "us", 1);
            ums_rec_num(&r, "interval_ms", gap);
            ums_rec_emit(&r);
            if (gap == gaps.front()) idle_first = med;
            idle_last = med;
        }
    if (idle_first > 0 && gaps.size() > 1) { // the jump P003 saw: longest gap vs shortest
        begin(&r, "d2h_idle_jump", idle_last / idle_first, "ratio", 1);
        ums_rec_num(&r, "from_ms", gaps.front());
        ums_rec_num(&r, "to_ms", gaps.back());
        ums_rec_emit(&r);
    }
    if (ka_thread.joinable()) {
        ka_stop.store(1);
        ka_thread.join();
    }

    for (int d = 0; d < nmax; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaFree(dev[d].dev));
        CK(cudaFree(dev[d].flag));
    }
    CK(cudaFreeHost(host));
    return 0;
}
