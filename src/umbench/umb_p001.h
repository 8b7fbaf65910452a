// What the P001 programs (baseline, patterns, migration) share: allocation with
// first-touch placement, the timed copies, and the per-repetition trace.
#pragma once
#include <string>
#include <vector>

#include "umb_cuda.h"

// Bandwidths (GB/s = 1e9 B/s): a copy kernel or loop moves 2 x size (read + write),
// as STREAM counts it; cudaMemcpy HtoD/DtoH moves size over the link.
constexpr double kGB = 1e9;

enum class Proc { Cpu, Gpu };

// The thesis' timing (list 4.6/4.7: cpuSecond around the loop or kernel + sync).
double umb_time_copy(Proc who, double *dst, const double *src, size_t n);
// CPU Dst[i] = Src[i] with OpenMP (list 4.6).
void umb_cpu_copy(double *dst, const double *src, size_t n);
// First touch by `who` (lists 4.4/4.5) places the pages: a[i] = i % 10 for a source,
// 0 for a destination.
void umb_fill(Proc who, double *a, size_t n, bool source);
// Checks Dst == Src's initial values on a sample of elements; exits 1 otherwise.
void umb_check_copy(const double *dst, size_t n, const char *what);

// "system" (malloc; needs pageable memory access) or "managed" (cudaMallocManaged).
// Exits 77 with the reason where the allocator cannot be used by the GPU.
double *umb_alloc(const std::string &alloc, size_t bytes, const UmbDevice &dev);
void umb_free(const std::string &alloc, double *p);

// Per-repetition trace lines and per-series summaries.
struct UmbSeries {
    std::string name; // e.g. "p5" or "gpu_copy"
    std::vector<std::vector<double>> trials; // GB/s per rep, per trial
};
// {"metric":"bandwidth","value":gbps,"unit":"GB/s","series":..,"trial":..,"rep":..,<phase>}
void umb_emit_rep(const char *series, int trial, int rep, double gbps, const char *phase = nullptr);
// Median over trials of: the first rep, the median of the last 10% of reps ("settled"),
// and the median of all reps, emitted as <name>_first, <name>_settled, <name>; and
// <name>_ramp = settled / first: ~1 when nothing migrates during the series, >> 1 when
// the first reps pay for migrating the data (GH200 access-counter migration, UM faults).
void umb_emit_summary(const UmbSeries &s);
double umb_settled(const std::vector<double> &reps);
double umb_median_of(std::vector<double> v);
