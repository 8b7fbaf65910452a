// Options every P001 program takes.
#pragma once
#include "umstudy/support.h"

struct P001Options {
    size_t bytes = 4ull << 30; // per array; the thesis used 4 GB and 8 GB
    long long reps = 200, trials = 10, device = 0;
    const char *alloc = "managed";
};

#define UMB_P001_COMMON_ARGS(o, default_reps)                                                              \
    {"size", UMS_ARG_SIZE, &(o).bytes, "bytes per array, K/M/G suffixes (thesis: 4G and 8G)", 4096, 1e15, nullptr}, \
    {"reps", UMS_ARG_INT, &(o).reps, "repetitions per trial (default " #default_reps ")", 1, 1e7, nullptr},       \
    {"trials", UMS_ARG_INT, &(o).trials, "trials (default 10, the thesis')", 1, 1e5, nullptr},                    \
    {"device", UMS_ARG_INT, &(o).device, "GPU ordinal (default 0)", 0, 1024, nullptr}

inline void umb_p001_params(const P001Options &o)
{
    if (o.bytes % sizeof(double)) ums_usage_fail("--size %zu is not a multiple of 8", o.bytes);
    ums_param_int("size_bytes", (long long)o.bytes);
    ums_param_int("reps", o.reps);
    ums_param_int("trials", o.trials);
}
