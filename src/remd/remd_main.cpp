// remd: P003's replica-exchange MD of argon.  Per exchange interval the host loop
// (remd_loop.h) sends temperatures and flags to every GPU, runs a kernel of Mexch steps
// on each, brings the energies back, and the exchange runs on the CPU: as P003's list 1
// from one host thread (--host-loop serial), or with one host thread per GPU (threads).
// The same binary runs on local GPUs or, unmodified, through vcuda (-cudart shared).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "remd_host.h"
#include "remd_loop.h"
#include "remd_profile.h"
#include "umstudy/support.h"

namespace {

RemdOptions parse(int argc, char **argv)
{
    RemdOptions o;
    const ums_arg args[] = {
        {"cells", UMS_ARG_INT, &o.cells, "FCC cells per box side a (Natom = 4a^3; a = 4: 256, a = 8: 2,048)", 1, 64, nullptr},
        {"replicas", UMS_ARG_INT, &o.nrep, "replicas Nrep (a multiple of the GPU count)", 2, 1 << 24, nullptr},
        {"exchange-steps", UMS_ARG_INT, &o.mexch, "MD steps per exchange interval Mexch", 1, 1 << 20, nullptr},
        {"iterations", UMS_ARG_INT, &o.iterations, "exchange intervals Miter (timed)", 1, 1 << 30, nullptr},
        {"warmup", UMS_ARG_INT, &o.warmup, "untimed MD steps before the first interval (P003's relaxation)", 0, 1 << 20, nullptr},
        {"tmin", UMS_ARG_DOUBLE, &o.tmin, "lowest ladder temperature (K)", 1, 1e4, nullptr},
        {"tmax", UMS_ARG_DOUBLE, &o.tmax, "highest ladder temperature (K)", 1, 1e4, nullptr},
        {"ladder", UMS_ARG_CHOICE, &o.ladder, "temperature spacing", 0, -1, "geometric|linear"},
        {"dt-fs", UMS_ARG_DOUBLE, &o.dt_fs, "time step (fs)", 0.01, 50, nullptr},
        {"tau-ps", UMS_ARG_DOUBLE, &o.tau_ps, "Berendsen coupling time (ps); 0: NVE", 0, 1e6, nullptr},
        {"seed", UMS_ARG_INT, &o.seed, "seed of velocities and exchange draws", 0, 9e18, nullptr},
        {"kernel", UMS_ARG_CHOICE, &o.kernel,
         "faithful: P003's kernel, all pairs, positions in global memory; shared: all pairs, the "
         "replica's positions in shared memory, 4 atoms per thread in registers; fast: as shared, but "
         "a warp computes only the 4-atom cells whose bounding box comes within the cutoff of its own",
         0, -1, "faithful|shared|fast"},
        {"threads", UMS_ARG_INT, &o.threads, "threads per block (multiple of 32; 0: the kernel's default)", 0, 1024, nullptr},
        {"gpus", UMS_ARG_INT, &o.gpus, "GPUs to use (0: all that cudaGetDeviceCount reports; with --cpu, "
         "devices the CPU reference stands in for, default 1)", 0, 4096, nullptr},
        {"placement", UMS_ARG_CHOICE, &o.placement,
         "replicas to GPUs: interleaved (replica r on GPU r mod n: each GPU every n-th temperature) or "
         "contiguous (GPU d: replicas d Nrep/n .. (d+1) Nrep/n - 1, a block of the ladder); results are the same",
         0, -1, "interleaved|contiguous"},
        {"host-loop", UMS_ARG_CHOICE, &o.host_loop,
         "threads: one host thread per GPU, their calls overlapping; serial: P003's list 1, one thread calling "
         "each GPU in turn (through vcuda every call a round trip, one GPU after another)", 0, -1, "threads|serial"},
        {"tune", UMS_ARG_FLAG, &o.tune,
         "before the run, time --tune-steps steps of every threads-per-block configuration of the kernel on "
         "copies of the first GPU's replicas and use the fastest (the physics is the same)", 0, -1, nullptr},
        {"tune-steps", UMS_ARG_INT, &o.tune_steps, "steps each configuration is timed over (--tune)", 1, 1 << 20, nullptr},
        {"profile-segments", UMS_ARG_INT, &o.profile_segments,
         "one GPU: before the run, time copies of the replicas of each of this many equal parts of the ladder, "
         "and one wave of blocks per residency (the balance model's inputs; 0: none)", 0, 1 << 20, nullptr},
        {"profile-steps", UMS_ARG_INT, &o.profile_steps, "steps each profile launch runs (0: --exchange-steps)",
         0, 1 << 20, nullptr},
        {"cpu", UMS_ARG_FLAG, &o.cpu, "integrate on the CPU (the reference) instead of GPUs", 0, -1, nullptr},
        {"verify-replicas", UMS_ARG_INT, &o.verify_replicas,
         "recompute this many replicas' first interval on the CPU and compare", 0, 1 << 20, nullptr},
        {"verify-dx-nm", UMS_ARG_DOUBLE, &o.verify_dx_nm, "largest position difference allowed (nm)", 0, 1, nullptr},
        {"verify-du-rel", UMS_ARG_DOUBLE, &o.verify_du_rel, "largest relative energy difference allowed", 0, 1, nullptr},
        {"bins", UMS_ARG_INT, &o.bins, "temperature bins of the acceptance and energy records (= --replicas: one per temperature and neighbour pair)", 1, 1 << 24, nullptr},
        {"fp32-peak-tflops", UMS_ARG_DOUBLE, &o.fp32_peak_tflops,
         "the GPU's FP32 peak, to report the fraction reached (0: not reported)", 0, 1e6, nullptr},
    };
    ums_args_parse(argc, argv,
                   "Replica-exchange MD of Lennard-Jones argon (P003): Nrep replicas on a 50-250 K "
                   "ladder, Metropolis exchange every Mexch steps, the energies of every GPU to the host",
                   args, sizeof args / sizeof args[0]);
    if (o.tmin >= o.tmax) ums_usage_fail("--tmin (%g K) must be below --tmax (%g K)", o.tmin, o.tmax);
    if (o.threads % 32) ums_usage_fail("--threads %lld is not a multiple of 32", o.threads);
    if (o.verify_replicas > o.nrep) ums_usage_fail("--verify-replicas %lld exceeds --replicas %lld", o.verify_replicas, o.nrep);
    if (o.gpus && o.nrep % o.gpus)
        ums_usage_fail("--replicas %lld is not a multiple of --gpus %lld (each GPU takes Nrep/n replicas)", o.nrep, o.gpus);
    if (o.tune && o.cpu) ums_usage_fail("--tune sweeps the GPU kernel's threads per block; --cpu has none");
    if (o.tune && o.threads) ums_usage_fail("--tune picks --threads itself: give one or the other");
    if (o.profile_segments > o.nrep)
        ums_usage_fail("--profile-segments %lld exceeds --replicas %lld", o.profile_segments, o.nrep);
    if (o.profile_steps == 0) o.profile_steps = o.mexch;
    return o;
}

// Per-bin sums: bin b holds ladder indices [b*nrep/nbins, (b+1)*nrep/nbins).
struct Bins {
    int nbins, nrep;
    std::vector<double> u_sum, u_count;
    Bins(int nbins_, int nrep_) : nbins(std::min(nbins_, nrep_)), nrep(nrep_), u_sum(nbins), u_count(nbins) {}
    int of(int k) const { return (int)((long long)k * nbins / nrep); }
    int first(int b) const { return (int)(((long long)b * nrep + nbins - 1) / nbins); }
};

struct Verification {
    std::vector<int> reps;
    std::vector<std::vector<float>> x, v, f; // states before the first interval
};

double max_image_diff(const RemdSystem &s, const float *a, const float *b)
{
    double worst = 0.0;
    for (int k = 0; k < 3 * s.natom; ++k)
        worst = std::max(worst, (double)fabsf(remd_image(a[k] - b[k], s.box, s.half)));
    return worst;
}

double in_cutoff_fraction(const RemdSystem &s, const float *x)
{
    long long in = 0;
    for (int i = 0; i < s.natom; ++i)
        for (int j = 0; j < s.natom; ++j) {
            const float dx = remd_image(x[3 * j] - x[3 * i], s.box, s.half);
            const float dy = remd_image(x[3 * j + 1] - x[3 * i + 1], s.box, s.half);
            const float dz = remd_image(x[3 * j + 2] - x[3 * i + 2], s.box, s.half);
            const float r2 = dx * dx + dy * dy + dz * dz;
            in += r2 < s.rc2 && r2 > 0.0f;
        }
    return (double)in / ((double)s.natom * (s.natom - 1));
}

} // namespace

int main(int argc, char **argv)
{
    ums_json_init("remd");
    RemdOptions o = parse(argc, argv);
    const RemdSystem s = remd_system((int)o.cells, o.dt_fs * 1e-3, o.tau_ps);
    if (REMD_RC_SIGMA * REMD_SIGMA > s.half)
        ums_usage_fail("--cells %lld gives a %.3f nm box: the 3-sigma cutoff (%.4f nm) exceeds half the box, "
                       "so the minimum image would miss pairs (use --cells >= 4)",
                       o.cells, s.box, REMD_RC_SIGMA * REMD_SIGMA);
    const int nrep = (int)o.nrep, mexch = (int)o.mexch;

    std::unique_ptr<RemdBackend> be(o.cpu ? remd_cpu_backend(s, o, o.gpus ? (int)o.gpus : 1) : remd_gpu_backend(s, o));
    const int ndev = be->devices();
    if (o.profile_segments && ndev != 1)
        ums_usage_fail("--profile-segments is a one-GPU measurement (the balance model is fitted on one GPU): "
                       "use --gpus 1, not %d", ndev);
    const RemdPlacement pl(o.placement, ndev, nrep);
    RemdHostLoop loop(*be, pl, s.natom, mexch, strcmp(o.host_loop, "threads") == 0);

    RemdLadder ladder;
    ladder.init(nrep, o.tmin, o.tmax, strcmp(o.ladder, "geometric") == 0);
    RemdState st;
    st.resize(nrep, s.natom, mexch);
    be->pin(st.energy.data(), st.energy.size() * sizeof(float)); // every interval's D2H lands here
    std::vector<float> temp(nrep);
    std::vector<int> flag(nrep, 0);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < nrep; ++r) {
        temp[r] = (float)ladder.temp_of(r);
        remd_init_replica(s, (uint64_t)o.seed, r, temp[r], st.x(r), st.v(r));
        st.tcur[r] = temp[r];
    }
    const double t_setup = ums_now();
    loop.setup(st, temp.data(), (int)o.warmup);
    fprintf(stderr, "remd: %d replicas x %d atoms (box %.3f nm) on %s x %d (%s, host loop %s), set up in %.2f s\n",
            nrep, s.natom, s.box, be->name(), ndev, pl.name(), o.host_loop, ums_now() - t_setup);
    std::vector<RemdTuneTrial> trials;
    if (o.tune) trials = be->tune(0, (int)o.tune_steps);

    ums_param_str("mode", be->name());
    // Labels the output only: under vcuda-run the GPUs are remote (the binary is the same).
    ums_param_str("via", !o.cpu && getenv("VCUDA_SERVERS") ? "vcuda" : "local");
    ums_param_str("kernel", o.cpu ? "cpu-reference" : o.kernel);
    be->params();
    ums_param_int("tuned", o.tune);
    ums_param_int("natom", s.natom);
    ums_param_int("nrep", nrep);
    ums_param_int("mexch", mexch);
    ums_param_int("miter", o.iterations);
    ums_param_int("gpus", o.cpu ? 0 : ndev);
    ums_param_int("devices", ndev);
    ums_param_str("placement", pl.name());
    ums_param_str("host_loop", o.host_loop);
    ums_param_num("box_nm", s.box);
    ums_param_num("dt_fs", o.dt_fs);
    ums_param_num("tau_ps", o.tau_ps);
    ums_param_num("tmin", o.tmin);
    ums_param_num("tmax", o.tmax);
    ums_param_int("seed", o.seed);

    if (!trials.empty()) {
        const int chosen = be->kernel_info(0).threads;
        for (const RemdTuneTrial &t : trials) {
            ums_rec r;
            ums_rec_begin(&r, "tune_time", t.seconds, "s");
            ums_rec_int(&r, "threads", t.threads);
            ums_rec_int(&r, "atoms_per_thread", t.atoms_per_thread);
            ums_rec_int(&r, "blocks_per_sm", t.blocks_per_sm);
            ums_rec_int(&r, "steps", o.tune_steps);
            ums_rec_bool(&r, "chosen", t.threads == chosen);
            ums_rec_emit(&r);
            fprintf(stderr, "remd: tune: %4d threads (%d atoms each, %d blocks/SM): %.4f s for %lld steps%s\n",
                    t.threads, t.atoms_per_thread, t.blocks_per_sm, t.seconds, o.tune_steps,
                    t.threads == chosen ? "  <- used" : "");
        }
    }
    const RemdKernelInfo kinfo = be->kernel_info(0);
    if (!o.cpu) {
        remd_emit_kernel_info(kinfo);
        ums_result("threads_per_block", kinfo.threads, "1"); // as configured or as the sweep chose
    }
    if (o.profile_segments) remd_profile(*be, pl, ladder, kinfo, (int)o.profile_segments, (int)o.profile_steps);

    Verification ver;
    for (long long k = 0; k < o.verify_replicas; ++k) {
        const int r = (int)(o.verify_replicas > 1 ? k * (nrep - 1) / (o.verify_replicas - 1) : 0);
        const size_t n3 = 3 * (size_t)s.natom;
        ver.reps.push_back(r);
        ver.x.emplace_back(n3), ver.v.emplace_back(n3), ver.f.emplace_back(n3);
        loop.fetch(r, ver.x.back().data(), ver.v.back().data(), ver.f.back().data());
    }

    Bins bins((int)o.bins, nrep);
    std::vector<double> T(o.iterations), tgpu(o.iterations), tclt(o.iterations), ulast(nrep);
    std::vector<double> dev_sum(ndev, 0.0), spread(o.iterations, 1.0);
    auto urow = [&](int r) { return st.u(pl.row(r)); }; // replica r's energies
    long long accepted_total = 0;
    for (long long it = 0; it < o.iterations; ++it) {
        const double t0 = ums_now();
        tgpu[it] = loop.interval(temp.data(), flag.data(), st.energy.data());
        const double t1 = ums_now();
        std::vector<int> index_before = ladder.index_of;
        for (int r = 0; r < nrep; ++r) ulast[r] = urow(r)[mexch - 1];
        const int acc = remd_exchange(ladder, ulast.data(), (uint64_t)o.seed, it, flag.data());
        for (int r = 0; r < nrep; ++r) temp[r] = (float)ladder.temp_of(r);
        const double t2 = ums_now();
        T[it] = t2 - t0;
        tclt[it] = t2 - t1;
        accepted_total += acc;

        double u_all = 0.0;
        for (int r = 0; r < nrep; ++r) {
            double sum = 0.0;
            for (int step = 0; step < mexch; ++step) sum += urow(r)[step];
            const int b = bins.of(index_before[r]);
            bins.u_sum[b] += sum / s.natom;
            bins.u_count[b] += mexch;
            u_all += sum / s.natom;
        }
        const long long pairs_tried = (nrep - (it & 1)) / 2; // pairs (k, k+1) with k % 2 == it % 2
        ums_rec rec;
        ums_rec_begin(&rec, "interval_time", T[it], "s");
        ums_rec_int(&rec, "rep", it);
        ums_rec_num(&rec, "t_gpu", tgpu[it]);
        const std::vector<double> &per = loop.device_seconds();
        double per_mean = 0.0;
        for (int d = 0; d < ndev; ++d) dev_sum[d] += per[d], per_mean += per[d] / ndev;
        spread[it] = per_mean > 0 ? tgpu[it] / per_mean : 1.0;
        if (per.size() > 1) { // the fastest device, and each device where they are few
            ums_rec_num(&rec, "t_gpu_min", *std::min_element(per.begin(), per.end()));
            for (size_t d = 0; d < per.size() && per.size() <= 16; ++d) {
                char key[32];
                snprintf(key, sizeof key, "t_gpu_dev%zu", d);
                ums_rec_num(&rec, key, per[d]);
            }
        }
        ums_rec_num(&rec, "t_com", T[it] - tgpu[it] - tclt[it]);
        ums_rec_num(&rec, "t_clt", tclt[it]);
        ums_rec_num(&rec, "pair_evals_per_s", (double)nrep * s.natom * (s.natom - 1.0) * mexch / T[it]);
        ums_rec_int(&rec, "accepted", acc);
        ums_rec_num(&rec, "acceptance", pairs_tried ? (double)acc / pairs_tried : 0.0);
        ums_rec_num(&rec, "u_mean", u_all / ((double)nrep * mexch)); // kJ/mol per atom, all replicas and steps
        ums_rec_emit(&rec);
        fprintf(stderr, "remd: interval %lld: %.4f s (gpu %.4f, com %.4f, clt %.5f), %d swaps\n", it + 1,
                T[it], tgpu[it], T[it] - tgpu[it] - tclt[it], tclt[it], acc);

        if (it == 0 && !ver.reps.empty()) {
            double dx = 0.0, du = 0.0;
            const size_t n3 = 3 * (size_t)s.natom;
            std::vector<float> xg(n3), vg(n3), fg(n3);
            for (size_t k = 0; k < ver.reps.size(); ++k) {
                const int r = ver.reps[k];
                std::vector<float> U(mexch);
                float tc = (float)ladder.temp[index_before[r]];
                remd_cpu_replica(s, ver.x[k].data(), ver.v[k].data(), ver.f[k].data(), tc, 0, &tc, mexch, 0, U.data());
                loop.fetch(r, xg.data(), vg.data(), fg.data());
                dx = std::max(dx, max_image_diff(s, xg.data(), ver.x[k].data()));
                for (int step = 0; step < mexch; ++step)
                    du = std::max(du, fabs((double)urow(r)[step] - U[step]) / fabs((double)U[step]));
            }
            const bool pass = dx <= o.verify_dx_nm && du <= o.verify_du_rel;
            ums_rec v;
            ums_rec_begin_status(&v, pass ? "verified" : "mismatch");
            ums_rec_bool(&v, "pass", pass);
            ums_rec_num(&v, "max_dx_nm", dx);
            ums_rec_num(&v, "max_du_rel", du);
            ums_rec_int(&v, "replicas", (long long)ver.reps.size());
            ums_rec_int(&v, "steps", mexch);
            ums_rec_str(&v, "against", "cpu-reference");
            ums_rec_emit(&v);
            fprintf(stderr, "remd: %s vs CPU reference over %d steps, %zu replicas: max |dx| %.3g nm, "
                            "max |dU|/|U| %.3g: %s\n", be->name(), mexch, ver.reps.size(), dx, du,
                    pass ? "agree" : "MISMATCH");
            if (!pass) return UMS_EXIT_FAILED;
        }
    }

    auto mean = [](const std::vector<double> &v) {
        double sum = 0.0;
        for (double x : v) sum += x;
        return sum / v.size();
    };
    const double Tm = mean(T), tg = mean(tgpu), tc = mean(tclt);
    const double pairs = (double)nrep * s.natom * (s.natom - 1.0) * mexch; // per interval, P003's count
    std::vector<float> x0(3 * (size_t)s.natom), scratch(3 * (size_t)s.natom);
    loop.fetch(0, x0.data(), scratch.data(), scratch.data());
    const double fin = in_cutoff_fraction(s, x0.data());
    const double flops = pairs * (REMD_FLOPS_PAIR_OUT + (REMD_FLOPS_PAIR_IN - REMD_FLOPS_PAIR_OUT) * fin);

    ums_result("interval_time", Tm, "s");
    ums_result("t_gpu", tg, "s");
    ums_result("t_com", Tm - tg - tc, "s");
    ums_result("t_clt", tc, "s");
    // tGPU(n) is the slowest device's kernel time: each device's own (mean over the
    // intervals), and the slowest over the mean of all, interval by interval (1: balanced).
    for (int d = 0; d < ndev && !o.cpu; ++d) {
        ums_rec rec;
        ums_rec_begin(&rec, "device_kernel_time", dev_sum[d] / o.iterations, "s");
        ums_rec_int(&rec, "device", d);
        ums_rec_emit(&rec);
    }
    ums_result("t_gpu_imbalance", mean(spread), "1");
    // P003's tGPU0: GPU time of one replica's interval on one GPU (eq. 5).
    ums_result("t_gpu0", tg * ndev / nrep, "s");
    // n T(n): the denominator of P003's efficiency R = Tlocal(1) / (n T(n)).
    ums_result("gpu_seconds", Tm * (o.cpu ? 1 : ndev), "s");
    ums_result("pair_evals_per_s", pairs / Tm, "pairs/s");
    ums_result("kernel_pair_evals_per_s", pairs / tg, "pairs/s");
    ums_result("in_cutoff_fraction", fin, "1");
    ums_result("gflops", flops / tg * 1e-9, "GFLOPS");
    if (o.fp32_peak_tflops > 0) ums_result("fp32_peak_fraction", flops / tg / (o.fp32_peak_tflops * 1e12), "1");

    long long tries = 0, accepts = 0;
    for (size_t k = 0; k < ladder.tries.size(); ++k) tries += ladder.tries[k], accepts += ladder.accepts[k];
    ums_result("acceptance_mean", tries ? (double)accepts / tries : 0.0, "1");
    for (int b = 0; b < bins.nbins; ++b) {
        const int k0 = bins.first(b), k1 = bins.first(b + 1) - 1; // ladder indices of the bin
        long long bt = 0, ba = 0;
        for (int k = k0; k <= k1 && k < (int)ladder.tries.size(); ++k) bt += ladder.tries[k], ba += ladder.accepts[k];
        ums_rec rec;
        if (bt) { // pairs (k, k+1) whose lower temperature lies in the bin
            ums_rec_begin(&rec, "acceptance", (double)ba / bt, "1");
            ums_rec_int(&rec, "bin", b);
            ums_rec_num(&rec, "t_lo", ladder.temp[k0]);
            ums_rec_num(&rec, "t_hi", ladder.temp[k1]);
            ums_rec_int(&rec, "tries", bt);
            ums_rec_emit(&rec);
        }
        ums_rec_begin(&rec, "mean_potential", bins.u_sum[b] / bins.u_count[b], "kJ/mol/atom");
        ums_rec_int(&rec, "bin", b);
        ums_rec_num(&rec, "t_lo", ladder.temp[k0]);
        ums_rec_num(&rec, "t_hi", ladder.temp[k1]);
        ums_rec_emit(&rec);
    }
    fprintf(stderr, "remd: %lld interval(s) of %d steps: %.4f s each, %.3g pair evaluations/s, "
                    "%.1f GFLOPS in the kernel, acceptance %.3f (%lld swaps)\n",
            o.iterations, mexch, Tm, pairs / Tm, flops / tg * 1e-9, tries ? (double)accepts / tries : 0.0,
            accepted_total);
    return 0;
}
