// umb-fraction (P000 experiment 2): the GPU adds 1 to the first f% of the array,
// f = 0, step, ..., 100; explicit copies always move the whole array, managed memory
// moves what is touched.  Reports the time per f and the crossover: the largest f at
// which managed still wins (paper: ~60%).
#include <vector>

#include "umb_p000_driver.h"

int main(int argc, char **argv)
{
    ums_json_init("umb-fraction");
    P000Options o;
    double step = 5.0;
    p000_parse(argc, argv, "P000 exp. 2: contiguous-fraction sweep, explicit vs managed", o,
               {{"step", UMS_ARG_DOUBLE, &step, "fraction step in percent (default 5)", 0.1, 100, nullptr}},
               "explicit,managed");
    ums_param_num("step_pct", step);
    const auto modes = p000_modes(o);
    umb_p000_device((int)o.device);
    const size_t n = o.bytes / sizeof(double);
    std::vector<double> pct;
    for (double f = 0.0; f < 100.0 + 1e-9; f += step) pct.push_back(f > 100.0 ? 100.0 : f);
    if (pct.back() < 100.0) pct.push_back(100.0);
    std::vector<double> explicit_ms, managed_ms;
    for (const auto &m : modes) {
        umb_p000_buf *buf = p000_open(m, n);
        for (double f : pct) {
            const umb_touch touch = {(size_t)(f / 100.0 * (double)n + 0.5), 1};
            const umb_p000_times t = p000_point(buf, n, touch, o.repeat);
            p000_emit_point(m.c_str(), "fraction_pct", f, t);
            if (m == "explicit") explicit_ms.push_back(t.total * 1e3);
            if (m == "managed") managed_ms.push_back(t.total * 1e3);
        }
        umb_p000_free(buf);
    }
    if (!explicit_ms.empty() && !managed_ms.empty()) {
        // -1: managed never wins; 100: it wins everywhere (no crossover in range).
        ums_result("crossover_pct", umb_last_win_boundary(pct.data(), managed_ms.data(), explicit_ms.data(), pct.size()), "%");
        ums_result("managed_over_explicit_full", managed_ms.back() / explicit_ms.back(), "ratio");
    }
    return 0;
}
