// himeno-cpu: the CPU (OpenMP) variant, and the reference the others are checked against.
#include <stdlib.h>
#include <vector>

#include "himeno.h"
#include "umstudy/support.h"

int main(int argc, char **argv)
{
    HimenoOptions o = himeno_parse(argc, argv, "cpu");
    HimenoRun r = {};
    std::vector<double> t_total(o.repeat), t_loop(o.repeat);
    r.time_total = t_total.data();
    r.time_loop = t_loop.data();
    r.copy_bw = himeno_cpu_copy_bandwidth((size_t)1 << 28);

    HimenoFields f = himeno_fields_alloc(o.grid, malloc);
    for (long long rep = 0; rep < o.repeat; ++rep) {
        himeno_init(&f, o.grid);
        const double t0 = ums_now();
        r.gosa = himeno_cpu_jacobi(&f, o.grid, o.iterations, &r.gosa_first);
        t_total[rep] = t_loop[rep] = ums_now() - t0;
    }
    r.checksum = himeno_checksum(f.p, o.grid);
    himeno_report(&o, &r);
    const int rc = o.verify ? himeno_verify(&o, &r, f.p) : 0;
    himeno_fields_free(&f, free);
    return rc;
}
