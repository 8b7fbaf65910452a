// P000's program with OpenACC moving the data, as the paper wrote it (lists 2 and 3):
// a host array from new[], `acc data copy` around the GPU loop, or no data directive
// under -gpu=managed.  One mode per binary (umb_acc.h).
#include <new>
#include <openacc.h>
#include <stdlib.h>
#include <string.h>

#include "umb_acc.h"
#include "umbench.h"
#include "umstudy/support.h"

struct umb_p000_buf {
    size_t n;
    double *a; // host memory, or managed where -gpu=managed replaces new[]
};

int umb_acc_devices(void) { return acc_get_num_devices(acc_device_not_host); }

void umb_acc_require(size_t bytes, const char *what)
{
#ifdef UMB_ACC_MODE_EXPLICIT
    if (umb_acc_devices() == 0) return; // on the host there is no second copy
    const int dev = acc_get_device_num(acc_device_not_host);
    const size_t free_bytes = acc_get_property(dev, acc_device_not_host, acc_property_free_memory);
    // 0: the runtime cannot tell, and the copy-in will say so if it does not fit.
    if (free_bytes && (double)bytes > 0.95 * (double)free_bytes)
        ums_unsupported("%s needs %.1f GiB of accelerator memory but %.1f GiB are free", what,
                        bytes / 1073741824.0, free_bytes / 1073741824.0);
#else
    (void)bytes;
    (void)what;
#endif
}

extern "C" {

const char *umb_p000_backend(void)
{
#ifdef __NVCOMPILER
    return "openacc-nvhpc";
#else
    return "openacc-gcc";
#endif
}
const char *umb_p000_modes(void) { return UMB_ACC_MODE; }

void umb_p000_device(int device)
{
    const int ndev = umb_acc_devices();
    ums_param_int("acc_devices", ndev);
    if (ndev == 0) {
        // The runtime would silently run every compute region on the host: a result,
        // but not of data movement.  CI sets UMB_ACC_ALLOW_HOST=1 to check the code path.
        const char *allow = getenv("UMB_ACC_ALLOW_HOST");
        if (!allow || strcmp(allow, "1") != 0)
            ums_unsupported("no OpenACC accelerator is available (the runtime would fall back to the "
                            "host); UMB_ACC_ALLOW_HOST=1 runs there anyway");
        ums_param_str("acc_device", "host");
        return;
    }
    if (device < 0 || device >= ndev) ums_usage_fail("--device %d but %d OpenACC accelerators are visible", device, ndev);
    acc_set_device_num(device, acc_device_not_host);
    const char *name = acc_get_property_string(device, acc_device_not_host, acc_property_name);
    const char *driver = acc_get_property_string(device, acc_device_not_host, acc_property_driver);
    ums_param_str("acc_device", "accelerator");
    ums_param_str("gpu", name ? name : "unknown");
    ums_param_int("device", device);
    ums_param_str("acc_driver", driver ? driver : "unknown");
    ums_param_num("gpu_memory_gib",
                  acc_get_property(device, acc_device_not_host, acc_property_memory) / 1073741824.0);
}

umb_p000_buf *umb_p000_alloc(const char *mode, size_t n)
{
    if (strcmp(mode, UMB_ACC_MODE) != 0) ums_fail("this binary runs mode '%s' only, not '%s'", UMB_ACC_MODE, mode);
    umb_acc_require(n * sizeof(double), "the device copy of the array");
    double *a = new (std::nothrow) double[n];
    if (!a) ums_unsupported("cannot allocate the %.1f GiB array", n * sizeof(double) / 1073741824.0);
    return new umb_p000_buf{n, a};
}

void umb_p000_run(umb_p000_buf *b, umb_touch t, umb_p000_times *out)
{
    double *a = b->a;
    const size_t n = b->n, count = umb_touch_count(t), stride = t.stride;
    const double t0 = ums_now();
    umb_p000_init(a, n);
    const double t1 = ums_now();
    double t2 = 0.0;
    // The region's entry copies the array in and its exit copies it out, so the copy
    // out falls into the CPU phase as in the paper's figure 1.
    UMB_ACC_DATA(data copy(a[0:n]))
    {
#pragma acc parallel loop
        for (size_t k = 0; k < count; ++k) a[k * stride] += 1.0;
        t2 = ums_now();
    }
    umb_p000_finish(out, a, n, t0, t1, t2);
}

void umb_p000_free(umb_p000_buf *b)
{
    if (!b) return;
    delete[] b->a;
    delete b;
}

} // extern "C"
