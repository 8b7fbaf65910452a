// umb-patterns (P001 §4.2.1, figs 5.5/5.6): Dst[i] = Src[i] with Src and Dst placed by
// first touch in host memory (HM) or device memory (DM), run by the CPU or the GPU.
// Numbering as the thesis' fig. 4.1 (Src outer, Dst inner; CPU 1-4, GPU 5-8):
//   1 HM->HM by CPU   2 HM->DM by CPU   3 DM->HM by CPU   4 DM->DM by CPU
//   5 HM->HM by GPU   6 HM->DM by GPU   7 DM->HM by GPU   8 DM->DM by GPU
// Each trial allocates afresh, places, then copies `reps` times; every rep is traced.
// --alloc system (plain malloc, GH200's SAM: needs pageable memory access) or managed.
#include <string>
#include <vector>

#include "umb_p001.h"
#include "umb_p001_args.h"
#include "umstudy/support.h"

namespace {
struct Pattern {
    Proc src, dst, by;
};
const Pattern kPatterns[8] = {
    {Proc::Cpu, Proc::Cpu, Proc::Cpu}, {Proc::Cpu, Proc::Gpu, Proc::Cpu},
    {Proc::Gpu, Proc::Cpu, Proc::Cpu}, {Proc::Gpu, Proc::Gpu, Proc::Cpu},
    {Proc::Cpu, Proc::Cpu, Proc::Gpu}, {Proc::Cpu, Proc::Gpu, Proc::Gpu},
    {Proc::Gpu, Proc::Cpu, Proc::Gpu}, {Proc::Gpu, Proc::Gpu, Proc::Gpu},
};
const char *where(Proc p) { return p == Proc::Cpu ? "HM" : "DM"; }
} // namespace

int main(int argc, char **argv)
{
    ums_json_init("umb-patterns");
    P001Options o;
    const char *patterns = "1,2,3,4,5,6,7,8";
    const ums_arg args[] = {
        UMB_P001_COMMON_ARGS(o, 200),
        {"alloc", UMS_ARG_CHOICE, &o.alloc, "allocator: system (malloc, needs HMM/ATS) or managed", 0, -1, "system|managed"},
        {"patterns", UMS_ARG_STRING, &patterns, "comma list of pattern numbers 1-8 (default all)", 0, -1, nullptr}};
    ums_args_parse(argc, argv, "P001 8 placement patterns of Dst[i]=Src[i] (per-rep traces)", args,
                   sizeof args / sizeof *args);
    umb_p001_params(o);
    ums_param_str("alloc", o.alloc);
    std::vector<int> list;
    for (std::string s = patterns; !s.empty();) {
        const size_t c = s.find(',');
        const std::string item = s.substr(0, c);
        char *end = nullptr;
        const long p = strtol(item.c_str(), &end, 10);
        if (item.empty() || *end || p < 1 || p > 8) {
            ums_usage_fail("bad pattern '%s' in --patterns (numbers 1-8)", item.c_str());
        }
        list.push_back((int)p);
        s = c == std::string::npos ? "" : s.substr(c + 1);
    }
    const UmbDevice dev = umb_cuda_device((int)o.device);
    const size_t n = o.bytes / sizeof(double);
    for (int p : list) {
        const Pattern &pt = kPatterns[p - 1];
        const std::string name = "p" + std::to_string(p);
        UmbSeries s{name, {}};
        for (long long t = 0; t < o.trials; ++t) {
            double *src = umb_alloc(o.alloc, o.bytes, dev), *dst = umb_alloc(o.alloc, o.bytes, dev);
            // Each array is first-touched by the processor whose memory it should be in.
            umb_fill(pt.src, src, n, true);
            umb_fill(pt.dst, dst, n, false);
            std::vector<double> reps;
            for (long long r = 0; r < o.reps; ++r) {
                const double gbps = 2.0 * o.bytes / umb_time_copy(pt.by, dst, src, n) / kGB;
                umb_emit_rep(name.c_str(), (int)t, (int)r, gbps);
                reps.push_back(gbps);
            }
            s.trials.push_back(reps);
            umb_check_copy(dst, n, name.c_str());
            umb_free(o.alloc, src);
            umb_free(o.alloc, dst);
        }
        ums_rec r;
        ums_rec_begin(&r, "pattern", p, "1");
        ums_rec_str(&r, "src", where(pt.src));
        ums_rec_str(&r, "dst", where(pt.dst));
        ums_rec_str(&r, "by", pt.by == Proc::Cpu ? "CPU" : "GPU");
        ums_rec_emit(&r);
        umb_emit_summary(s);
    }
    return 0;
}
