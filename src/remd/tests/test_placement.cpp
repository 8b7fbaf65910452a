// Placements and host loops change where and in which order replicas are integrated,
// never what is computed:
//  - a placement maps replicas one to one onto (device, slot) and rows; contiguous
//    gives device d a block of the ladder, interleaved every n-th temperature;
//  - the CPU reference driven as 1, 2 or 4 devices, placed contiguously or interleaved,
//    by P003's serial list 1 or one host thread per device, gives bit for bit the same
//    energies, swaps, ladder and final positions for a fixed seed over intervals with
//    swaps between neighbours on different devices (and another seed does not);
//  - timing copies of replicas (the profiles, tuning) leaves the replicas untouched.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <memory>
#include <set>
#include <vector>

#include "remd_host.h"
#include "remd_loop.h"
#include "remd_placement.h"

namespace {

int failures = 0;

void expect(bool ok, const char *what)
{
    printf("%-78s %s\n", what, ok ? "ok" : "FAIL");
    failures += !ok;
}

struct Outcome {
    std::vector<std::vector<float>> U; // per interval, replica order
    std::vector<int> swaps, rep_at;
    std::vector<float> x;              // final positions, replica order
    int cross_device_swaps = 0;
};

const int kCells = 4, kRep = 8, kSteps = 5, kIter = 4;

Outcome run(int ndev, const char *placement, bool threaded, long long seed)
{
    RemdOptions o;
    o.nrep = kRep, o.mexch = kSteps, o.cpu = 1;
    const RemdSystem s = remd_system(kCells, 5e-3, 0.5);
    std::unique_ptr<RemdBackend> be(remd_cpu_backend(s, o, ndev));
    const RemdPlacement pl(placement, ndev, kRep);
    RemdHostLoop loop(*be, pl, s.natom, kSteps, threaded);
    RemdLadder L;
    L.init(kRep, 100, 104, true); // close temperatures: neighbours swap often
    RemdState st;
    st.resize(kRep, s.natom, kSteps);
    std::vector<float> temp(kRep);
    std::vector<int> flag(kRep, 0);
    for (int r = 0; r < kRep; ++r) {
        temp[r] = (float)L.temp_of(r);
        remd_init_replica(s, (uint64_t)seed, r, temp[r], st.x(r), st.v(r));
        st.tcur[r] = temp[r];
    }
    loop.setup(st, temp.data(), 0);
    Outcome out;
    std::vector<double> ulast(kRep);
    for (int it = 0; it < kIter; ++it) {
        loop.interval(temp.data(), flag.data(), st.energy.data());
        std::vector<float> U;
        for (int r = 0; r < kRep; ++r) {
            const float *u = st.u(pl.row(r));
            U.insert(U.end(), u, u + kSteps);
            ulast[r] = u[kSteps - 1];
        }
        out.U.push_back(U);
        const std::vector<int> before = L.rep_at;
        out.swaps.push_back(remd_exchange(L, ulast.data(), (uint64_t)seed, it, flag.data()));
        for (int k = 0; k + 1 < kRep; ++k)
            out.cross_device_swaps += L.rep_at[k] != before[k] && pl.device_of(before[k]) != pl.device_of(before[k + 1]);
        for (int r = 0; r < kRep; ++r) temp[r] = (float)L.temp_of(r);
    }
    out.rep_at = L.rep_at;
    const size_t n3 = 3 * (size_t)s.natom;
    std::vector<float> x(n3), v(n3), f(n3);
    for (int r = 0; r < kRep; ++r) {
        loop.fetch(r, x.data(), v.data(), f.data());
        out.x.insert(out.x.end(), x.begin(), x.end());
    }
    return out;
}

bool same(const Outcome &a, const Outcome &b)
{
    return a.U == b.U && a.swaps == b.swaps && a.rep_at == b.rep_at && a.x == b.x;
}

} // namespace

int main()
{
    // ---- the maps ----
    for (const char *kind : {"contiguous", "interleaved"})
        for (int ndev : {1, 2, 4, 7}) {
            const int nrep = 28;
            const RemdPlacement pl(kind, ndev, nrep);
            std::set<std::pair<int, int>> seen;
            std::set<int> rows;
            bool ok = true;
            for (int r = 0; r < nrep; ++r) {
                const int d = pl.device_of(r), j = pl.slot_of(r);
                ok &= d >= 0 && d < ndev && j >= 0 && j < pl.nloc && pl.replica(d, j) == r;
                ok &= pl.row(r) / pl.nloc == d && pl.row(r) % pl.nloc == j;
                seen.insert({d, j});
                rows.insert(pl.row(r));
            }
            char what[120];
            snprintf(what, sizeof what, "%s, %d devices: replica <-> (device, slot) <-> row one to one", kind, ndev);
            expect(ok && (int)seen.size() == nrep && (int)rows.size() == nrep, what);
        }
    {
        // 4 devices, 16 replicas at ladder indices 0..15: contiguous gives device 3 the
        // top quarter, interleaved gives every device the same spread of indices.
        const RemdPlacement c("contiguous", 4, 16), i("interleaved", 4, 16);
        int c3 = 0, lo = 1 << 30, hi = -1;
        for (int r = 0; r < 16; ++r) {
            if (c.device_of(r) == 3) c3 += r;
            if (i.device_of(r) == 3) lo = std::min(lo, r), hi = std::max(hi, r);
        }
        expect(c3 == 12 + 13 + 14 + 15, "contiguous: the last device holds the hottest quarter of the ladder");
        bool spread = true;
        for (int d = 0; d < 4; ++d) {
            int sum = 0;
            for (int r = 0; r < 16; ++r) sum += i.device_of(r) == d ? r : 0;
            spread &= sum == 24 + 4 * d; // d, d+4, d+8, d+12
        }
        expect(spread && lo == 3 && hi == 15, "interleaved: each device every 4th temperature, neighbours on others");
    }

    // ---- identical runs ----
    const Outcome ref = run(1, "contiguous", false, 7);
    int swaps = 0;
    for (int a : ref.swaps) swaps += a;
    expect(swaps > 0, "the reference run swaps temperatures (the exchange is exercised)");
    for (int ndev : {1, 2, 4})
        for (const char *kind : {"contiguous", "interleaved"})
            for (bool threaded : {false, true}) {
                const Outcome o = run(ndev, kind, threaded, 7);
                char what[120];
                snprintf(what, sizeof what, "%d device(s), %s, %s: same U, swaps, ladder, positions", ndev, kind,
                         threaded ? "threads" : "serial");
                expect(same(o, ref), what);
                if (ndev == 4 && !strcmp(kind, "interleaved") && threaded)
                    expect(o.cross_device_swaps > 0, "  ... with swaps between replicas on different devices");
            }
    expect(!same(run(2, "interleaved", true, 8), ref), "another seed gives another run (the comparison can fail)");

    // ---- copies leave the replicas alone ----
    {
        RemdOptions o;
        o.nrep = 4, o.mexch = 3, o.cpu = 1;
        const RemdSystem s = remd_system(kCells, 5e-3, 0.5);
        std::unique_ptr<RemdBackend> be(remd_cpu_backend(s, o, 1));
        const RemdPlacement pl("interleaved", 1, 4);
        RemdHostLoop loop(*be, pl, s.natom, 3, true);
        RemdState st;
        st.resize(4, s.natom, 3);
        std::vector<float> temp = {100, 150, 200, 250};
        for (int r = 0; r < 4; ++r) remd_init_replica(s, 3, r, temp[r], st.x(r), st.v(r)), st.tcur[r] = temp[r];
        loop.setup(st, temp.data(), 2);
        const size_t n3 = 3 * (size_t)s.natom;
        std::vector<float> x0(n3), v0(n3), f0(n3), x1(n3), v1(n3), f1(n3);
        loop.fetch(2, x0.data(), v0.data(), f0.data());
        const double t = be->time_copies(0, {2, 3, 2}, 4);
        loop.fetch(2, x1.data(), v1.data(), f1.data());
        expect(t > 0 && x0 == x1 && v0 == v1 && f0 == f1, "time_copies leaves the replicas' state as it was");
    }
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
