#include "umb_halo_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "umstudy/support.h"

namespace {

// The global grid value at (row, col): both ranks and the reference agree on it.
inline double initial(size_t row, size_t col) { return (double)((row + col) % 3343); }

// Serial reference of the whole torus (small N only): the sum after `iters` sweeps.
double reference(size_t N, long long iters)
{
    std::vector<double> a(N * N), b(N * N);
    for (size_t i = 0; i < N; ++i)
        for (size_t j = 0; j < N; ++j) a[i * N + j] = initial(i, j);
    for (long long it = 0; it < iters; ++it) {
        for (size_t i = 0; i < N; ++i)
            for (size_t j = 0; j < N; ++j)
                b[i * N + j] = (a[((i + N - 1) % N) * N + j] + a[((i + 1) % N) * N + j] +
                                a[i * N + (j + N - 1) % N] + a[i * N + (j + 1) % N]) * 0.25;
        a.swap(b);
    }
    double s = 0.0;
    for (double v : a) s += v;
    return s;
}

std::vector<std::string> split(const char *list)
{
    std::vector<std::string> out;
    std::string s = list;
    for (size_t pos = 0; pos <= s.size();) {
        size_t end = s.find(',', pos);
        if (end == std::string::npos) end = s.size();
        out.push_back(s.substr(pos, end - pos));
        pos = end + 1;
    }
    return out;
}

bool in_setup = true;
void finalize_during_setup()
{
    int done = 0;
    if (in_setup && MPI_Finalized(&done) == MPI_SUCCESS && !done) MPI_Finalize();
}

} // namespace

HaloOptions halo_setup(int *argc, char ***argv, const char *modes, const char *default_modes)
{
    MPI_Init(argc, argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ums_json_init("umb-halo");
    long long n = 30720, iters = 20, device = -1;
    const char *packs = "cpu,gpu", *mode_arg = default_modes;
    int verify = 0;
    const std::string mode_help = "comma list of " + std::string(modes) + " (default " + default_modes + ")";
    const ums_arg args[] = {
        {"n", UMS_ARG_INT, &n, "global grid side N (even; paper: 30720 and 61440)", 4, 1 << 20, nullptr},
        {"iterations", UMS_ARG_INT, &iters, "Jacobi iterations (default 20, the paper's)", 1, 1e6, nullptr},
        {"packs", UMS_ARG_STRING, &packs, "comma list of cpu,gpu (default both)", 0, -1, nullptr},
        {"modes", UMS_ARG_STRING, &mode_arg, mode_help.c_str(), 0, -1, nullptr},
        {"device", UMS_ARG_INT, &device, "GPU ordinal; default rank % number of GPUs", -1, 1024, nullptr},
        {"verify", UMS_ARG_FLAG, &verify, "also compare with a serial CPU reference (N <= 2048)", 0, -1, nullptr},
    };
    // Only rank 0 speaks: help, usage errors and results would otherwise print twice.
    if (rank != 0 && (!freopen("/dev/null", "w", stderr) || !freopen("/dev/null", "w", stdout)))
        ums_fail("cannot silence rank %d", rank);
    // Every rank parses and validates the same arguments, so an exit here (--help, bad
    // input) happens on all of them: finalize on the way out, or the launcher reports
    // an abnormal termination instead of the exit status.
    atexit(finalize_during_setup);
    ums_args_parse(*argc, *argv, "P000 exp. 4: 2-rank halo-exchange stencil, explicit vs managed", args,
                   sizeof args / sizeof *args);
    if (size != 2) ums_usage_fail("umb-halo needs exactly 2 MPI ranks (one per half of the grid), got %d", size);
    if (n % 2) ums_usage_fail("--n %lld must be even (two halves)", n);
    if (verify && n > 2048) ums_usage_fail("--verify needs --n <= 2048 (the reference is serial)");
    HaloOptions o = {n, iters, device, verify, rank, split(packs), split(mode_arg),
                     {(size_t)n, (size_t)n / 2, (size_t)n / 2 + 2}};
    for (const auto &p : o.packs)
        if (p != "cpu" && p != "gpu") ums_usage_fail("unknown pack '%s' (cpu|gpu)", p.c_str());
    const std::string have = std::string("|") + modes + "|";
    for (const auto &m : o.modes)
        if (have.find("|" + m + "|") == std::string::npos) ums_usage_fail("unknown mode '%s' (%s)", m.c_str(), modes);
    // Which ranks share this node, and so its GPUs: P000 ran both halves on two GPUs of
    // one node; where a node has one GPU the halves run on two nodes, each on its own.
    // (Here, while every rank still takes the same path: it is a collective.)
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &o.local_rank);
    MPI_Comm_size(node, &o.local_size);
    MPI_Comm_free(&node);
    in_setup = false; // from here on one rank may fail alone: no collective at exit
    return o;
}

HaloGpu halo_gpu(const HaloOptions &o, int ndev)
{
    if (ndev == 0) return {0, 1, 0}; // an OpenACC build allowed to run on the host
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int nodes = size / o.local_size;
    if (o.device >= 0) return {(int)o.device, o.local_size, nodes}; // the node's ranks on one GPU
    const int sharing = (o.local_size + ndev - 1) / ndev;
    return {o.local_rank % ndev, sharing, nodes * (o.local_size < ndev ? o.local_size : ndev)};
}

void halo_params(const HaloOptions &o, const HaloGpu &g)
{
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ums_param_int("n", o.n);
    ums_param_int("iterations", o.iters);
    ums_param_int("ranks", size);
    ums_param_int("nodes", size / o.local_size);
    ums_param_int("gpus", g.gpus);
    ums_param_num("halo_spacing_kib", o.h.pitch * sizeof(double) / 1024.0);
}

int halo_measure(const HaloOptions &o, HaloRun run)
{
    const double ref = o.verify ? reference((size_t)o.n, o.iters) : 0.0;
    std::vector<double> ms(4, -1.0), sums;
    for (const auto &p : o.packs)
        for (const auto &m : o.modes) {
            HaloResult r = run(m, p, o);
            double global_sum = 0.0;
            MPI_Allreduce(&r.sum, &global_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            r.sum = global_sum;
            double busy = r.total - r.mpi, worst = 0.0, mpi_max = 0.0;
            MPI_Reduce(&busy, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            MPI_Reduce(&r.mpi, &mpi_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            ums_rec rec;
            ums_rec_begin(&rec, "time", worst * 1e3, "ms");
            ums_rec_str(&rec, "mode", m.c_str());
            ums_rec_str(&rec, "pack", p.c_str());
            ums_rec_num(&rec, "mpi_ms", mpi_max * 1e3);
            ums_rec_num(&rec, "place_ms", r.place * 1e3);
            ums_rec_num(&rec, "back_ms", r.back * 1e3);
            ums_rec_num(&rec, "checksum", r.sum);
            if (o.verify) ums_rec_num(&rec, "reference", ref);
            ums_rec_emit(&rec);
            ms[(p == "gpu") * 2 + (m == "managed")] = worst * 1e3;
            if (o.verify && fabs(r.sum - ref) > 1e-12 * fabs(ref))
                ums_fail("%s/%s pack: checksum %.17g differs from the CPU reference %.17g", m.c_str(), p.c_str(), r.sum, ref);
            // Not bit-equal: OpenMP combines the threads' partial sums in any order.
            if (!sums.empty() && fabs(r.sum - sums.front()) > 1e-12 * fabs(sums.front()))
                ums_fail("%s/%s pack: checksum %.17g differs from the first variant's %.17g", m.c_str(), p.c_str(), r.sum, sums.front());
            sums.push_back(r.sum);
        }
    // Only a binary that ran both modes has the paper's ratio (an OpenACC build runs one).
    for (int p = 0; p < 2; ++p)
        if (ms[p * 2] > 0 && ms[p * 2 + 1] > 0)
            ums_result(p ? "ratio_gpu_pack" : "ratio_cpu_pack", ms[p * 2 + 1] / ms[p * 2], "ratio");
    MPI_Finalize();
    return 0;
}

void halo_fill(double *a, const HaloOptions &o)
{
    const Half h = o.h;
    // Global column of local column j: rank 0 owns [0, nx), rank 1 [nx, 2nx).
    const size_t col0 = (size_t)o.rank * h.nx;
    const size_t N = 2 * h.nx;
#pragma omp parallel for
    for (size_t i = 0; i < h.ny + 2; ++i)
        for (size_t j = 0; j < h.pitch; ++j)
            a[i * h.pitch + j] = initial((i + h.ny - 1) % h.ny, (col0 + j + N - 1) % N);
}

// send[0][i] = a[i][1] (to the left neighbour), send[1][i] = a[i][nx] (to the right).
void halo_cpu_pack(const double *a, double *send, Half h)
{
#pragma omp parallel for
    for (size_t i = 0; i < h.ny; ++i) {
        send[i] = a[(i + 1) * h.pitch + 1];
        send[h.ny + i] = a[(i + 1) * h.pitch + h.nx];
    }
}
// a[i][0] = recv[0][i] (from the left), a[i][nx+1] = recv[1][i] (from the right).
void halo_cpu_unpack(double *a, const double *recv, Half h)
{
#pragma omp parallel for
    for (size_t i = 0; i < h.ny; ++i) {
        a[(i + 1) * h.pitch] = recv[i];
        a[(i + 1) * h.pitch + h.nx + 1] = recv[h.ny + i];
    }
}

// Both halo columns go to the other rank; with two ranks on a torus the left and the
// right neighbour are the same rank, so tags tell the two columns apart.
double halo_exchange(double *send, double *recv, Half h, int other)
{
    const double t0 = MPI_Wtime();
    MPI_Request req[4];
    const int n = (int)h.ny;
    MPI_Irecv(recv, n, MPI_DOUBLE, other, 1, MPI_COMM_WORLD, &req[0]);        // its right column
    MPI_Irecv(recv + h.ny, n, MPI_DOUBLE, other, 0, MPI_COMM_WORLD, &req[1]); // its left column
    MPI_Isend(send, n, MPI_DOUBLE, other, 0, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(send + h.ny, n, MPI_DOUBLE, other, 1, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    return MPI_Wtime() - t0;
}

double halo_sum(const double *a, Half h)
{
    double sum = 0.0;
#pragma omp parallel for reduction(+ : sum)
    for (size_t i = 1; i <= h.ny; ++i)
        for (size_t j = 1; j <= h.nx; ++j) sum += a[i * h.pitch + j];
    return sum;
}
