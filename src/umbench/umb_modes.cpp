// umb-modes (P000 experiment 1, list 2): init an array on the CPU, add 1 to every
// element on the GPU, sum on the CPU, in each data-movement mode.  The paper's claim
// is about the ratios: both/managed ~ 0.99 (directives ignored under managed) and
// both/explicit ~ 1.44.
#include <map>

#include "umb_p000_driver.h"

int main(int argc, char **argv)
{
    ums_json_init("umb-modes");
    P000Options o;
    p000_parse(argc, argv, "P000 exp. 1: whole-array GPU pass in each data-movement mode", o, {},
               umb_p000_modes());
    const auto modes = p000_modes(o);
    umb_p000_device((int)o.device);
    const size_t n = o.bytes / sizeof(double);
    std::map<std::string, double> ms;
    for (const auto &m : modes) {
        umb_p000_buf *buf = p000_open(m, n);
        const umb_p000_times t = p000_point(buf, n, umb_touch{n, 1}, o.repeat);
        umb_p000_free(buf);
        p000_emit_point(m.c_str(), nullptr, 0, t);
        ms[m] = t.total * 1e3;
    }
    auto ratio = [&](const char *a, const char *b) {
        if (ms.count(a) && ms.count(b)) {
            const std::string name = std::string(a) + "_over_" + b;
            ums_result(name.c_str(), ms[a] / ms[b], "ratio");
        }
    };
    ratio("both", "managed");
    ratio("both", "explicit");
    ratio("managed", "explicit");
    ratio("prefetch", "explicit");
    return 0;
}
