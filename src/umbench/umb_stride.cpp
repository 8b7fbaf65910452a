// umb-stride (P000 experiment 3, list 3): the GPU adds 1 to one element every S
// bytes, S = min, min+step, ..., max (paper: 4 KB ... 396 KB).  Explicit copies move
// the whole array at every S; managed memory moves the migration units that hold a
// touched element, so its time stays flat while S is below the unit and falls beyond.
// --beyond continues with doubling strides.  Reports the crossover stride (paper:
// 128 KB), the flat level (paper: ~2600 ms for S <= 120 KB) and the implied migration
// granule (the end of the flat region).
#include <vector>

#include "umb_p000_driver.h"

int main(int argc, char **argv)
{
    ums_json_init("umb-stride");
    P000Options o;
    size_t smin = 4096, smax = 396 * 1024, sstep = 4096, beyond = 0;
    p000_parse(argc, argv, "P000 exp. 3: stride sweep, explicit vs managed", o,
               {{"min", UMS_ARG_SIZE, &smin, "smallest stride in bytes (default 4K)", 8, 1e12, nullptr},
                {"max", UMS_ARG_SIZE, &smax, "largest stride in bytes (default 396K)", 8, 1e12, nullptr},
                {"step", UMS_ARG_SIZE, &sstep, "stride step in bytes (default 4K)", 8, 1e12, nullptr},
                {"beyond", UMS_ARG_SIZE, &beyond, "after --max, double the stride up to this many bytes (default: no)", 0, 1e12, nullptr}},
               "explicit,managed");
    if (smin % sizeof(double) || sstep % sizeof(double))
        ums_usage_fail("--min and --step must be multiples of %zu bytes", sizeof(double));
    if (smax < smin) ums_usage_fail("--max (%zu) is below --min (%zu)", smax, smin);
    ums_param_int("min_bytes", (long long)smin);
    ums_param_int("max_bytes", (long long)smax);
    ums_param_int("step_bytes", (long long)sstep);
    ums_param_int("beyond_bytes", (long long)beyond);
    const auto modes = p000_modes(o);
    umb_p000_device((int)o.device);
    const size_t n = o.bytes / sizeof(double);
    std::vector<double> kib, explicit_ms, managed_ms;
    size_t last = 0;
    for (size_t s = smin; s <= smax; s += sstep) kib.push_back((last = s) / 1024.0);
    // Fast links push the crossover past the paper's range: keep doubling beyond it.
    for (size_t s = 2 * last; beyond && s <= beyond; s *= 2) kib.push_back(s / 1024.0);
    for (const auto &m : modes) {
        umb_p000_buf *buf = p000_open(m, n);
        for (double k : kib) {
            const umb_touch touch = {n, (size_t)(k * 1024.0 + 0.5) / sizeof(double)};
            const umb_p000_times t = p000_point(buf, n, touch, o.repeat);
            p000_emit_point(m.c_str(), "stride_kib", k, t);
            if (m == "explicit") explicit_ms.push_back(t.total * 1e3);
            if (m == "managed") managed_ms.push_back(t.total * 1e3);
        }
        umb_p000_free(buf);
    }
    if (!explicit_ms.empty() && !managed_ms.empty()) {
        ums_result("crossover_kib", umb_final_win_start(kib.data(), managed_ms.data(), explicit_ms.data(), kib.size()), "KiB");
        // One run per point and fault handling that varies by +-15% between runs (seen
        // on an H100): a 25% band still separates the plateau from the fall beyond it.
        const size_t end = umb_plateau_end(managed_ms.data(), managed_ms.size(), 0.25);
        double flat = 0.0, expl = 0.0;
        for (size_t i = 0; i <= end; ++i) flat += managed_ms[i] / (double)(end + 1);
        for (double v : explicit_ms) expl += v / (double)explicit_ms.size();
        ums_rec r;
        ums_rec_begin(&r, "granule_kib", kib[end], "KiB");
        ums_rec_num(&r, "next_stride_kib", end + 1 < kib.size() ? kib[end + 1] : -1.0);
        ums_rec_emit(&r);
        ums_result("flat_managed_ms", flat, "ms");
        ums_result("explicit_mean_ms", expl, "ms");
    }
    return 0;
}
