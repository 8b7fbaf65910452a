// Which device integrates which replica.  A replica keeps its device for the whole run
// (P003: the replicas stay on their GPU, only temperatures move), and replica r starts
// at ladder index r, so the placement decides each device's share of the temperature
// ladder.  Contiguous blocks (device d: replicas d nloc .. (d+1) nloc - 1) give the
// last device the hottest replicas, whose lattices melt and cost more per step, and
// every interval waits for it; interleaving (replica r on device r mod n) gives each
// device every n-th temperature.  Neither changes what is computed: a replica's kernel
// reads only its own state, temperature and flag, and the exchange sees every energy
// (the host gathers U of all replicas each interval), so a fixed seed gives the same
// trajectories, energies and swaps either way (tests/test_placement.cpp).
#ifndef UMSTUDY_REMD_PLACEMENT_H
#define UMSTUDY_REMD_PLACEMENT_H

#include <string.h>

struct RemdPlacement {
    bool interleaved = true;
    int ndev = 1, nloc = 0; // nloc = Nrep / ndev replicas per device

    RemdPlacement() = default;
    RemdPlacement(const char *kind, int ndev_, int nrep)
        : interleaved(strcmp(kind, "contiguous") != 0), ndev(ndev_), nloc(nrep / ndev_) {}
    const char *name() const { return interleaved ? "interleaved" : "contiguous"; }
    int device_of(int r) const { return interleaved ? r % ndev : r / nloc; }
    int slot_of(int r) const { return interleaved ? r / ndev : r % nloc; }
    int replica(int d, int slot) const { return interleaved ? slot * ndev + d : d * nloc + slot; }
    // Row of replica r in the host's energy array: device d's replicas are rows
    // d nloc .. (d+1) nloc - 1 in slot order, so each device's energies come back in one copy.
    int row(int r) const { return device_of(r) * nloc + slot_of(r); }
};

#endif
