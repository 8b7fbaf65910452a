#include "umb_p000_driver.h"

#include <algorithm>
#include <string.h>

void p000_parse(int argc, char **argv, const char *summary, P000Options &o,
                std::vector<ums_arg> extra, const char *default_modes)
{
    // A backend with one mode (an OpenACC binary) runs that mode by default: the mains'
    // defaults name the modes their comparison needs, which such a binary can only half run.
    o.modes = strchr(umb_p000_modes(), '|') ? default_modes : umb_p000_modes();
    std::vector<ums_arg> args = {
        {"size", UMS_ARG_SIZE, &o.bytes, "array size in bytes, K/M/G suffixes (default 8G, the paper's)", 4096, 1e15, nullptr},
        {"modes", UMS_ARG_STRING, &o.modes, "comma-separated modes to run", 0, -1, nullptr},
        {"repeat", UMS_ARG_INT, &o.repeat, "runs per point; the median is reported (default 1, the paper's)", 1, 1000, nullptr},
        {"device", UMS_ARG_INT, &o.device, "GPU ordinal (default 0)", 0, 1024, nullptr},
    };
    args.insert(args.end(), extra.begin(), extra.end());
    ums_args_parse(argc, argv, summary, args.data(), args.size());
    if (o.bytes % sizeof(double))
        ums_usage_fail("--size %zu is not a multiple of sizeof(double)", o.bytes);
    ums_param_str("backend", umb_p000_backend());
    ums_param_int("size_bytes", (long long)o.bytes);
    ums_param_int("repeat", o.repeat);
}

std::vector<std::string> p000_modes(const P000Options &o)
{
    std::vector<std::string> out;
    const std::string have = std::string("|") + umb_p000_modes() + "|";
    std::string list = o.modes;
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t end = list.find_first_of(",|", pos); // umb_p000_modes() is |-separated
        if (end == std::string::npos) end = list.size();
        std::string m = list.substr(pos, end - pos);
        if (m.empty() || have.find("|" + m + "|") == std::string::npos) {
            ums_usage_fail("mode '%s' is not one this %s binary can run (%s)", m.c_str(),
                           umb_p000_backend(), umb_p000_modes());
        }
        if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
        pos = end + 1;
    }
    return out;
}

umb_p000_buf *p000_open(const std::string &mode, size_t n)
{
    umb_p000_buf *buf = umb_p000_alloc(mode.c_str(), n);
    p000_point(buf, n, umb_touch{n, 1}, 1);
    return buf;
}

umb_p000_times p000_point(umb_p000_buf *buf, size_t n, umb_touch touch, long long repeat)
{
    std::vector<umb_p000_times> runs((size_t)repeat);
    const double want = umb_p000_expected(n, touch);
    for (auto &r : runs) {
        umb_p000_run(buf, touch, &r);
        if (r.sum != want)
            ums_fail("wrong sum after the GPU pass: %.17g, expected %.17g (limit %zu, stride %zu)",
                     r.sum, want, touch.limit, touch.stride);
    }
    std::sort(runs.begin(), runs.end(),
              [](const umb_p000_times &a, const umb_p000_times &b) { return a.total < b.total; });
    return runs[runs.size() / 2];
}

void p000_emit_point(const char *mode, const char *xname, double x, const umb_p000_times &t)
{
    ums_rec r;
    ums_rec_begin(&r, "time", t.total * 1e3, "ms");
    ums_rec_str(&r, "mode", mode);
    if (xname) ums_rec_num(&r, xname, x);
    ums_rec_num(&r, "init_ms", t.init * 1e3);
    ums_rec_num(&r, "gpu_ms", t.gpu * 1e3);
    ums_rec_num(&r, "cpu_ms", t.cpu * 1e3);
    ums_rec_bool(&r, "verified", 1);
    ums_rec_emit(&r);
}
