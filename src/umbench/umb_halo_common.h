// What the two builds of P000 experiment 4 (list 4) share: umb-halo (CUDA, both modes
// in one binary) and umb-halo-acc-<mode> (OpenACC, one mode per binary) differ only in
// how one measured run moves the data; the grid, its initial values, the CPU side of
// the halo exchange, the serial reference and the reporting live here, once.
#pragma once
// The C API only, in every file that includes this one (instead of mpi.h): Open MPI's
// C++ bindings, which MPI::MPI_C does not link, would otherwise be emitted in C++ files
// compiled with -fopenmp or -fopenacc.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stddef.h>
#include <string>
#include <vector>

// One rank's half of the N x N torus: ny rows of nx interior columns, a halo row and
// column on every side, rows `pitch` doubles apart.
struct Half {
    size_t ny, nx, pitch; // interior rows, interior columns, row length with halo
    size_t count() const { return (ny + 2) * pitch; }
};

struct HaloOptions {
    long long n, iters, device;
    int verify, rank;
    std::vector<std::string> packs, modes;
    Half h;
    int local_rank = 0, local_size = 1; // this rank among the ranks of its node
};

// One measured run of one (mode, pack) variant on this rank.  Times in seconds:
// total = the iterations, MPI included; mpi = MPI alone; place = the first placement
// of both arrays on the GPU; back = the return of the array and the CPU sum.
struct HaloResult {
    double total, mpi, sum, place, back; // sum: this rank's interior
};
typedef HaloResult (*HaloRun)(const std::string &mode, const std::string &pack, const HaloOptions &o);

// MPI_Init, JSON init, options and their validation (exits 1 or 2 on bad input, on
// every rank).  `modes` is the |-list this binary can run, `default_modes` a comma list.
HaloOptions halo_setup(int *argc, char ***argv, const char *modes, const char *default_modes);
// How this rank uses the `ndev` GPUs its node shows: its ordinal (--device, else its
// rank among the node's ranks % ndev), how many of the node's ranks share it (2 when
// both land on a node's only GPU; never across nodes), and the GPUs in use.
struct HaloGpu {
    int ordinal, sharing, gpus;
};
HaloGpu halo_gpu(const HaloOptions &o, int ndev);
// Records the run's parameters once the backend has chosen its GPU.
void halo_params(const HaloOptions &o, const HaloGpu &g);
// Runs every pack x mode variant, emits one time line each (checksums compared with
// each other and, with --verify, with the serial reference), the managed/explicit
// ratio per pack where one binary ran both modes, then MPI_Finalize.  Returns 0.
int halo_measure(const HaloOptions &o, HaloRun run);

// CPU side of one iteration: the initial values of this rank's half (with its halo),
// packing the two halo columns into / out of MPI's buffers, the exchange itself
// (returns its seconds) and the sum over the interior.
void halo_fill(double *a, const HaloOptions &o);
void halo_cpu_pack(const double *a, double *send, Half h);
void halo_cpu_unpack(double *a, const double *recv, Half h);
double halo_exchange(double *send, double *recv, Half h, int other);
double halo_sum(const double *a, Half h);
