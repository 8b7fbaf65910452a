// umb-halo-acc-<mode> (P000 experiment 4, list 4) with OpenACC moving the data, one
// mode per binary (umb_acc.h); the grid, the exchange and the reporting are umb-halo's
// (umb_halo_common.h), so the two builds differ only here.
//   pack cpu: list 4 itself: the half enters the GPU once (enter data copyin), the
//     sweeps run on present data, and every iteration the half goes back for the CPU's
//     pack/unpack (exit data copyout) and in again (enter data copyin);
//   pack gpu: GPU loops pack into / unpack from halo buffers of their own, which
//     copyout / copyin move; the CPU copies them to and from MPI's buffers, which is
//     where managed memory migrates them (the paper arranged it so, to time it).
// The managed build has none of the data directives (UMB_ACC_DATA).
#include <string.h>
#include <string>
#include <vector>

#include "umb_acc.h"
#include "umb_halo_common.h"
#include "umbench.h"
#include "umstudy/support.h"

namespace {

HaloResult run(const std::string &, const std::string &packing, const HaloOptions &o)
{
    const Half h = o.h;
    // Scalars in the compute regions (firstprivate), not the struct (an aggregate
    // would be copied in and out as data).
    const size_t ny = h.ny, nx = h.nx, pitch = h.pitch, cnt = h.count(), nh = 2 * ny;
    const bool gpu_pack = packing == "gpu";
    const int other = 1 - o.rank;
    double *a = new double[cnt], *anew = new double[cnt];
    std::vector<double> send(nh), recv(nh), send_d(nh), recv_d(nh);
    double *sd = send_d.data(), *rd = recv_d.data();
    halo_fill(a, o);

    MPI_Barrier(MPI_COMM_WORLD);
    double mpi = 0.0;
    const double tp = MPI_Wtime();
    UMB_ACC_DATA(enter data copyin(a[0:cnt]) create(anew[0:cnt]))
    // Touch both arrays on the GPU before the clock starts, as umb-halo does: a managed
    // run would otherwise be charged for their first migration.
    UMB_ACC_DATA(data present(a[0:cnt], anew[0:cnt]))
    {
#pragma acc parallel loop
        for (size_t x = 0; x < cnt; ++x) anew[x] = a[x];
    }
    const double t0 = MPI_Wtime();
    for (long long it = 0; it < o.iters; ++it) {
        UMB_ACC_DATA(data present(a[0:cnt], anew[0:cnt]))
        {
#pragma acc parallel loop collapse(2)
            for (size_t i = 1; i <= ny; ++i)
                for (size_t j = 1; j <= nx; ++j) {
                    const size_t x = i * pitch + j;
                    anew[x] = (a[x - pitch] + a[x + pitch] + a[x - 1] + a[x + 1]) * 0.25;
                }
            // a = anew and the periodic rows (row 0 <- row ny, row ny+1 <- row 1).  A
            // loop of its own: list 4's two loops in one parallel region have no
            // barrier between them.
#pragma acc parallel loop collapse(2)
            for (size_t i = 1; i <= ny; ++i)
                for (size_t j = 1; j <= nx; ++j) {
                    const size_t x = i * pitch + j;
                    a[x] = anew[x];
                    if (i == ny) a[j] = anew[x];
                    if (i == 1) a[(ny + 1) * pitch + j] = anew[x];
                }
        }
        if (gpu_pack) {
            UMB_ACC_DATA(data present(a[0:cnt]) copyout(sd[0:nh]))
            {
#pragma acc parallel loop
                for (size_t i = 0; i < ny; ++i) {
                    sd[i] = a[(i + 1) * pitch + 1];
                    sd[ny + i] = a[(i + 1) * pitch + nx];
                }
            }
            memcpy(send.data(), sd, nh * sizeof(double));
            mpi += halo_exchange(send.data(), recv.data(), h, other);
            memcpy(rd, recv.data(), nh * sizeof(double));
            UMB_ACC_DATA(data present(a[0:cnt]) copyin(rd[0:nh]))
            {
#pragma acc parallel loop
                for (size_t i = 0; i < ny; ++i) {
                    a[(i + 1) * pitch] = rd[i];
                    a[(i + 1) * pitch + nx + 1] = rd[ny + i];
                }
            }
        } else {
            UMB_ACC_DATA(exit data copyout(a[0:cnt]))
            halo_cpu_pack(a, send.data(), h);
            mpi += halo_exchange(send.data(), recv.data(), h, other);
            halo_cpu_unpack(a, recv.data(), h);
            UMB_ACC_DATA(enter data copyin(a[0:cnt]))
        }
    }
    const double t1 = MPI_Wtime();
    UMB_ACC_DATA(exit data copyout(a[0:cnt]) delete(anew[0:cnt]))
    const double sum = halo_sum(a, h);
    const double back = MPI_Wtime() - t1;
    delete[] a;
    delete[] anew;
    return {t1 - t0, mpi, sum, t0 - tp, back};
}

} // namespace

int main(int argc, char **argv)
{
    // One mode per binary: it is both what can run and the default.
    const HaloOptions o = halo_setup(&argc, &argv, umb_p000_modes(), umb_p000_modes());
    ums_param_str("backend", umb_p000_backend());
    const HaloGpu g = halo_gpu(o, umb_acc_devices());
    umb_p000_device(g.ordinal);
    // Per rank: a and anew on the GPU; two ranks on one GPU need twice that.
    umb_acc_require(2 * o.h.count() * sizeof(double) * g.sharing, "the two arrays of both halves");
    halo_params(o, g);
    return halo_measure(o, run);
}
