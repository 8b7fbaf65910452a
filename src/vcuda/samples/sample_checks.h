// The samples' checks: a failed call or expectation prints one FAIL line and is counted,
// and the sample goes on (so one run shows every difference from the real runtime).
#pragma once
#include <cstdio>

static int failures = 0;
#define CHECK(call)                                                                           \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            printf("FAIL %s: %s (%s)\n", #call, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
            ++failures;                                                                       \
        }                                                                                     \
    } while (0)
#define EXPECT(cond, what)                                                                    \
    do {                                                                                      \
        bool ok_ = (cond);                                                                    \
        printf("%s %s\n", ok_ ? "ok" : "FAIL", what);                                         \
        failures += !ok_;                                                                     \
    } while (0)
