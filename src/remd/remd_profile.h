// One-GPU measurements that analysis/remd_balance_model.py predicts tGPU(n) from: how
// a replica's cost varies along the temperature ladder, and how long one wave of blocks
// takes with m of them resident per multiprocessor.  Both time copies of replicas
// (RemdBackend::time_copies), so the run's own state is not touched.
//  - ladder_segment_time: the ladder cut into `segments` equal parts by ladder index,
//    each part's replicas timed alone over nsteps steps (same count each, so the same
//    wave structure: the ratios are the parts' relative costs);
//  - wave_time: m x SMs replicas spread evenly over the ladder, m = 1 .. blocks per SM,
//    one launch each: a single wave with m blocks per multiprocessor (g(m) of the model).
#ifndef UMSTUDY_REMD_PROFILE_H
#define UMSTUDY_REMD_PROFILE_H

#include "remd_host.h"
#include "remd_placement.h"

// The kernel's occupancy as one output line.
void remd_emit_kernel_info(const RemdKernelInfo &k);
// Both profiles of device 0's replicas (every replica: one device only), as output lines.
void remd_profile(RemdBackend &be, const RemdPlacement &pl, const RemdLadder &L, const RemdKernelInfo &k,
                  int segments, int nsteps);

#endif
