// One-GPU profiles for the balance model (remd_profile.h).
#include "remd_profile.h"

#include <stdio.h>

#include "umstudy/support.h"

void remd_emit_kernel_info(const RemdKernelInfo &k)
{
    ums_rec r;
    ums_rec_begin(&r, "blocks_per_sm", k.blocks_per_sm, "1");
    ums_rec_int(&r, "sms", k.sms);
    ums_rec_int(&r, "threads", k.threads);
    ums_rec_int(&r, "atoms_per_thread", k.atoms_per_thread);
    ums_rec_int(&r, "regs", k.regs);
    ums_rec_int(&r, "shm_bytes", k.shm_bytes);
    ums_rec_emit(&r);
}

void remd_profile(RemdBackend &be, const RemdPlacement &pl, const RemdLadder &L, const RemdKernelInfo &k,
                  int segments, int nsteps)
{
    const int nrep = (int)L.temp.size();
    for (int sgm = 0; sgm < segments; ++sgm) {
        const int k0 = (int)((long long)sgm * nrep / segments), k1 = (int)((long long)(sgm + 1) * nrep / segments);
        std::vector<int> slots;
        for (int kk = k0; kk < k1; ++kk) slots.push_back(pl.slot_of(L.rep_at[kk]));
        const double t = be.time_copies(0, slots, nsteps);
        ums_rec r;
        ums_rec_begin(&r, "ladder_segment_time", t, "s");
        ums_rec_int(&r, "segment", sgm);
        ums_rec_int(&r, "segments", segments);
        ums_rec_int(&r, "k_lo", k0);
        ums_rec_int(&r, "k_hi", k1 - 1);
        ums_rec_num(&r, "t_lo", L.temp[k0]);
        ums_rec_num(&r, "t_hi", L.temp[k1 - 1]);
        ums_rec_int(&r, "replicas", k1 - k0);
        ums_rec_int(&r, "steps", nsteps);
        ums_rec_emit(&r);
        fprintf(stderr, "remd: ladder segment %d/%d (%.1f-%.1f K, %d replicas): %.4f s for %d steps\n", sgm + 1,
                segments, L.temp[k0], L.temp[k1 - 1], k1 - k0, t, nsteps);
    }
    for (int m = 1; m <= k.blocks_per_sm && (long long)m * k.sms <= nrep; ++m) {
        const int count = m * k.sms;
        std::vector<int> slots(count);
        for (int i = 0; i < count; ++i)
            slots[i] = pl.slot_of(L.rep_at[(int)(((long long)2 * i + 1) * nrep / (2LL * count))]);
        const double t = be.time_copies(0, slots, nsteps);
        ums_rec r;
        ums_rec_begin(&r, "wave_time", t, "s");
        ums_rec_int(&r, "resident", m);
        ums_rec_int(&r, "blocks", count);
        ums_rec_int(&r, "sms", k.sms);
        ums_rec_int(&r, "steps", nsteps);
        ums_rec_emit(&r);
        fprintf(stderr, "remd: one wave of %d blocks (%d per SM): %.4f s for %d steps\n", count, m, t, nsteps);
    }
}
