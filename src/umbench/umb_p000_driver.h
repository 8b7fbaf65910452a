// What the three P000 single-process programs (modes, fraction, stride) share: the
// common options, the list of modes to run, and one measured, verified point.
#pragma once
#include <string>
#include <vector>

#include "umbench.h"
#include "umstudy/support.h"

struct P000Options {
    size_t bytes = 8ull << 30; // P000: 1 Gi doubles
    const char *modes = nullptr;
    long long repeat = 1;
    long long device = 0;
};

// Parses the common options plus `extra`; `default_modes` is a comma list (a backend
// with a single mode defaults to that mode instead).
void p000_parse(int argc, char **argv, const char *summary, P000Options &o,
                std::vector<ums_arg> extra, const char *default_modes);
// The requested modes, each checked against what this binary's backend can run.
std::vector<std::string> p000_modes(const P000Options &o);
// Allocates for `mode` and runs one untimed whole-array pass, so that no measured
// point pays the one-time population of fresh pages (pinned, device or managed).
umb_p000_buf *p000_open(const std::string &mode, size_t n);
// Runs `touch` o.repeat times on buf, verifies every sum (exits 1 on a mismatch) and
// returns the run with the median total time.
umb_p000_times p000_point(umb_p000_buf *buf, size_t n, umb_touch touch, long long repeat);
// Emits one point: {"metric":"time","value":ms,"unit":"ms","mode":...,<x>:..., phases}.
void p000_emit_point(const char *mode, const char *xname, double x, const umb_p000_times &t);
