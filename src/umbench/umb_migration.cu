// umb-migration (P001 §4.2.2, fig. 5.7): Src first-touched in host memory, Dst in
// device memory; Dst[i] = Src[i] by the GPU for `reps`, then by the CPU, then by the
// GPU again.  On GH200 the first GPU phase ramps up (access-counter migration of Src
// to HBM), the CPU phase matches pattern 4, and the last GPU phase does not ramp
// again (pages do not migrate back to the CPU): phase3_ramp ~ 1, phase1_ramp >> 1.
#include <string>
#include <vector>

#include "umb_p001.h"
#include "umb_p001_args.h"
#include "umstudy/support.h"

int main(int argc, char **argv)
{
    ums_json_init("umb-migration");
    P001Options o;
    o.reps = 100;
    const ums_arg args[] = {
        UMB_P001_COMMON_ARGS(o, 100),
        {"alloc", UMS_ARG_CHOICE, &o.alloc, "allocator: system (malloc, needs HMM/ATS) or managed", 0, -1, "system|managed"}};
    ums_args_parse(argc, argv, "P001 migration: GPU, CPU, GPU phases on host-placed Src (per-rep traces)",
                   args, sizeof args / sizeof *args);
    umb_p001_params(o);
    ums_param_str("alloc", o.alloc);
    const UmbDevice dev = umb_cuda_device((int)o.device);
    const size_t n = o.bytes / sizeof(double);
    const Proc phases[3] = {Proc::Gpu, Proc::Cpu, Proc::Gpu};
    const char *names[3] = {"phase1", "phase2", "phase3"};
    UmbSeries series[3] = {{names[0], {}}, {names[1], {}}, {names[2], {}}};
    for (long long t = 0; t < o.trials; ++t) {
        double *src = umb_alloc(o.alloc, o.bytes, dev), *dst = umb_alloc(o.alloc, o.bytes, dev);
        umb_fill(Proc::Cpu, src, n, true);
        umb_fill(Proc::Gpu, dst, n, false);
        for (int ph = 0; ph < 3; ++ph) {
            std::vector<double> reps;
            for (long long r = 0; r < o.reps; ++r) {
                const double gbps = 2.0 * o.bytes / umb_time_copy(phases[ph], dst, src, n) / kGB;
                umb_emit_rep("migration", (int)t, (int)(ph * o.reps + r), gbps, names[ph]);
                reps.push_back(gbps);
            }
            series[ph].trials.push_back(reps);
        }
        umb_check_copy(dst, n, "migration");
        umb_free(o.alloc, src);
        umb_free(o.alloc, dst);
    }
    for (int ph = 0; ph < 3; ++ph) {
        umb_emit_summary(series[ph]);
    }
    return 0;
}
