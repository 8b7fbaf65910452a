// umb-baseline (P001 §5.1, figs 5.1-5.4): what each data path can do on its own.
//   cpu_copy: A[i] = B[i] with OpenMP on pinned host memory
//   gpu_copy: the same copy by a kernel on device memory
//   h2d, d2h: cudaMemcpy between pinned host and device memory
//   d2d:      cudaMemcpy device to device (the bar the copy kernel is held to)
// Every rep is traced; the summary is the median of all reps (and first/settled).
#include <string.h>

#include <string>
#include <vector>

#include "umb_p001.h"
#include "umb_p001_args.h"
#include "umstudy/support.h"

int main(int argc, char **argv)
{
    ums_json_init("umb-baseline");
    P001Options o;
    const char *ops = "cpu_copy,gpu_copy,h2d,d2h,d2d";
    const ums_arg args[] = {UMB_P001_COMMON_ARGS(o, 200),
                            {"ops", UMS_ARG_STRING, &ops, "comma list of cpu_copy,gpu_copy,h2d,d2h,d2d", 0, -1, nullptr}};
    ums_args_parse(argc, argv, "P001 baselines: CPU copy, GPU copy, HtoD, DtoH (per-rep traces)", args,
                   sizeof args / sizeof *args);
    umb_p001_params(o);
    std::vector<std::string> list;
    for (std::string s = ops; !s.empty();) {
        const size_t c = s.find(',');
        list.push_back(s.substr(0, c));
        s = c == std::string::npos ? "" : s.substr(c + 1);
    }
    for (const auto &op : list)
        if (op != "cpu_copy" && op != "gpu_copy" && op != "h2d" && op != "d2h" && op != "d2d")
            ums_usage_fail("unknown op '%s' (cpu_copy|gpu_copy|h2d|d2h|d2d)", op.c_str());
    const UmbDevice dev = umb_cuda_device((int)o.device);
    const size_t n = o.bytes / sizeof(double);
    umb_cuda_require(dev, 2 * o.bytes, "two device arrays");
    double *h0 = umb_alloc("pinned", o.bytes, dev), *h1 = umb_alloc("pinned", o.bytes, dev);
    double *d0 = umb_alloc("device", o.bytes, dev), *d1 = umb_alloc("device", o.bytes, dev);
    umb_fill(Proc::Cpu, h0, n, true);
    umb_fill(Proc::Cpu, h1, n, false);
    umb_fill(Proc::Gpu, d0, n, true);
    umb_fill(Proc::Gpu, d1, n, false);

    double median_d2d = 0.0, median_gpu = 0.0;
    for (const auto &op : list) {
        UmbSeries s{op, {}};
        for (long long t = 0; t < o.trials; ++t) {
            std::vector<double> reps;
            for (long long r = 0; r < o.reps; ++r) {
                const double t0 = ums_now();
                double moved = 2.0 * o.bytes;
                if (op == "cpu_copy") umb_cpu_copy(h1, h0, n);
                else if (op == "gpu_copy") umb_gpu_copy(d1, d0, n);
                else if (op == "d2d") UMS_CUDA_CHECK(cudaMemcpy(d1, d0, o.bytes, cudaMemcpyDeviceToDevice));
                else if (op == "h2d") { UMS_CUDA_CHECK(cudaMemcpy(d1, h0, o.bytes, cudaMemcpyHostToDevice)); moved = o.bytes; }
                else { UMS_CUDA_CHECK(cudaMemcpy(h1, d0, o.bytes, cudaMemcpyDeviceToHost)); moved = o.bytes; }
                UMS_CUDA_CHECK(cudaDeviceSynchronize());
                const double gbps = moved / (ums_now() - t0) / kGB;
                umb_emit_rep(op.c_str(), (int)t, (int)r, gbps);
                reps.push_back(gbps);
            }
            s.trials.push_back(reps);
        }
        umb_emit_summary(s);
        std::vector<double> all;
        for (auto &t : s.trials) all.insert(all.end(), t.begin(), t.end());
        if (op == "d2d") median_d2d = umb_median_of(all);
        if (op == "gpu_copy") median_gpu = umb_median_of(all);
        // Every op leaves Src's values in its destination: check them.
        if (op == "cpu_copy" || op == "d2h") umb_check_copy(h1, n, op.c_str());
        else {
            UMS_CUDA_CHECK(cudaMemcpy(h1, d1, o.bytes, cudaMemcpyDeviceToHost));
            umb_check_copy(h1, n, op.c_str());
        }
    }
    if (median_d2d > 0 && median_gpu > 0) ums_result("gpu_over_d2d", median_gpu / median_d2d, "ratio");
    umb_free("pinned", h0);
    umb_free("pinned", h1);
    umb_free("device", d0);
    umb_free("device", d1);
    return 0;
}
