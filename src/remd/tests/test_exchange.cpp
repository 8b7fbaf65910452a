// The exchange step (P003 eq. 1) on synthetic ladders with fixed energies:
//  - per pair, the acceptance rate is min(1, exp(delta)) (binomial 5-sigma bound);
//  - the chain of alternating even/odd sweeps leaves the Boltzmann distribution over
//    assignments invariant: observed frequencies of the 3! assignments of 3 replicas to
//    3 temperatures match exp(-sum_k beta_k U_at(k)) / Z (detailed balance);
//  - flags mark exactly the swapped replicas; parity picks the pairs; a seed reproduces.
#include <math.h>
#include <stdio.h>

#include <algorithm>
#include <vector>

#include "remd_host.h"

namespace {

int failures = 0;

void expect(bool ok, const char *what)
{
    printf("%-70s %s\n", what, ok ? "ok" : "FAIL");
    failures += !ok;
}

double beta(double t) { return 1.0 / (REMD_KB * t); }

} // namespace

int main()
{
    // 8 temperatures, energies chosen so that delta_k takes the listed values.
    const int K = 8;
    const double want_delta[K - 1] = {0.7, -0.1, -0.5, -1.0, -2.0, -3.0, 0.0};
    RemdLadder L;
    L.init(K, 50, 250, false);
    std::vector<double> U(K);
    U[0] = -1000.0;
    for (int k = 0; k + 1 < K; ++k)
        U[k + 1] = U[k] - want_delta[k] / (beta(L.temp[k]) - beta(L.temp[k + 1]));
    const long long trials = 200000;
    std::vector<long long> acc(K - 1, 0), tries(K - 1, 0);
    std::vector<int> flag(K);
    for (long long m = 0; m < trials; ++m)
        for (int parity = 0; parity < 2; ++parity) {
            L.init(K, 50, 250, false);
            remd_exchange(L, U.data(), 99, 2 * m + parity, flag.data());
            for (int k = parity; k + 1 < K; k += 2) {
                ++tries[k];
                acc[k] += L.rep_at[k] == k + 1;
            }
        }
    bool rates_ok = true;
    for (int k = 0; k + 1 < K; ++k) {
        const double p = std::min(1.0, exp(want_delta[k])), got = (double)acc[k] / tries[k];
        const double sd = sqrt(p * (1 - p) / tries[k]);
        const bool ok = fabs(got - p) <= 5 * sd + 1e-12;
        printf("  pair %d: delta %+.2f, expected %.4f, observed %.4f (%lld tries)%s\n", k, want_delta[k], p, got,
               tries[k], ok ? "" : "  <-- off");
        rates_ok &= ok;
    }
    expect(rates_ok, "acceptance per pair = min(1, exp(delta)) within 5 sigma");

    // Detailed balance: 3 replicas, energies fixed to each replica, 3 temperatures.
    RemdLadder C;
    C.init(3, 80, 160, true);
    const double Ur[3] = {-900.0, -898.5, -897.0}; // every assignment has >= 4% weight
    std::vector<int> perm = {0, 1, 2};
    std::vector<std::vector<int>> perms;
    do perms.push_back(perm); while (std::next_permutation(perm.begin(), perm.end()));
    std::vector<double> weight(perms.size());
    double z = 0.0, ground = 0.0;
    for (size_t p = 0; p < perms.size(); ++p) {
        double e = 0.0;
        for (int k = 0; k < 3; ++k) e += beta(C.temp[k]) * Ur[perms[p][k]];
        if (p == 0) ground = e;
        weight[p] = exp(-(e - ground));
        z += weight[p];
    }
    std::vector<long long> seen(perms.size(), 0);
    const long long steps = 1000000;
    std::vector<int> f3(3);
    for (long long it = 0; it < steps; ++it) {
        remd_exchange(C, Ur, 12345, it, f3.data());
        const size_t p = std::find(perms.begin(), perms.end(), C.rep_at) - perms.begin();
        ++seen[p];
    }
    bool balance_ok = true;
    for (size_t p = 0; p < perms.size(); ++p) {
        const double pi = weight[p] / z, got = (double)seen[p] / steps;
        // Successive states are correlated: allow 5 sigma of an effective sample 20x smaller.
        const double sd = sqrt(pi * (1 - pi) / (steps / 20.0));
        const bool ok = fabs(got - pi) <= 5 * sd;
        printf("  assignment %d%d%d: Boltzmann %.4f, observed %.4f%s\n", perms[p][0], perms[p][1], perms[p][2], pi, got,
               ok ? "" : "  <-- off");
        balance_ok &= ok;
    }
    expect(balance_ok, "assignment frequencies match the Boltzmann weights");
    bool moved = true;
    for (long long s : seen) moved &= s > 0;
    expect(moved, "every assignment is visited");

    // Flags and parity: a ladder whose every swap is certain (delta > 0).
    RemdLadder F;
    F.init(6, 50, 250, true);
    std::vector<double> Uf = {0, -1e3, -2e3, -3e3, -4e3, -5e3}; // colder replicas hold higher energy
    std::vector<int> fl(6);
    const int n_even = remd_exchange(F, Uf.data(), 1, 0, fl.data());
    expect(n_even == 3 && F.rep_at == std::vector<int>({1, 0, 3, 2, 5, 4}) && fl == std::vector<int>(6, 1),
           "even sweep swaps pairs (0,1) (2,3) (4,5) and flags all six");
    F.init(6, 50, 250, true);
    const int n_odd = remd_exchange(F, Uf.data(), 1, 1, fl.data());
    expect(n_odd == 2 && F.rep_at == std::vector<int>({0, 2, 1, 4, 3, 5}) &&
               fl == std::vector<int>({0, 1, 1, 1, 1, 0}),
           "odd sweep swaps (1,2) (3,4) only and flags those four");

    // Reproducible draws: the same (seed, iter) decide the same; another seed differs.
    auto run = [&](uint64_t seed) {
        RemdLadder R;
        R.init(K, 50, 250, false);
        std::vector<int> fr(K), trace;
        for (long long it = 0; it < 200; ++it) {
            remd_exchange(R, U.data(), seed, it, fr.data());
            trace.insert(trace.end(), R.rep_at.begin(), R.rep_at.end());
        }
        return trace;
    };
    expect(run(5) == run(5), "the same seed gives the same exchange history");
    expect(run(5) != run(6), "another seed gives another history");
    return failures ? 1 : 0;
}
