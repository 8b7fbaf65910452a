// The host loop over the devices (remd_loop.h).
#include "remd_loop.h"

#include <string.h>

#include <algorithm>

RemdHostLoop::RemdHostLoop(RemdBackend &be_, const RemdPlacement &pl_, int natom_, int mexch_, bool threaded)
    : be(be_), pl(pl_), natom(natom_), mexch(mexch_), threads_wanted(threaded), temp_flag(pl_.ndev),
      dev_s(pl_.ndev, 0.0)
{
    for (auto &b : temp_flag) {
        b.assign(2 * (size_t)pl.nloc, 0.0f);
        be.pin(b.data(), b.size() * sizeof(float));
    }
    if (threaded)
        for (int d = 1; d < pl.ndev; ++d) helpers.emplace_back(&RemdHostLoop::helper, this, d);
}

RemdHostLoop::~RemdHostLoop()
{
    {
        std::lock_guard<std::mutex> lk(mu);
        stopping = true;
    }
    go.notify_all();
    for (auto &t : helpers) t.join();
}

void RemdHostLoop::helper(int d)
{
    long long seen = 0;
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
        go.wait(lk, [&] { return stopping || generation != seen; });
        if (stopping) return;
        seen = generation;
        const std::function<void(int)> fn = job;
        lk.unlock();
        fn(d);
        lk.lock();
        if (--pending == 0) done.notify_one();
    }
}

void RemdHostLoop::each(const std::function<void(int)> &fn)
{
    if (helpers.empty()) {
        for (int d = 0; d < pl.ndev; ++d) fn(d);
        return;
    }
    {
        std::lock_guard<std::mutex> lk(mu);
        job = fn;
        pending = pl.ndev - 1;
        ++generation;
    }
    go.notify_all();
    fn(0);
    std::unique_lock<std::mutex> lk(mu);
    done.wait(lk, [&] { return pending == 0; });
}

void RemdHostLoop::pack(int d, const float *temp, const int *flag)
{
    float *t = temp_flag[d].data();
    int *f = reinterpret_cast<int *>(t + pl.nloc);
    for (int j = 0; j < pl.nloc; ++j) {
        const int r = pl.replica(d, j);
        t[j] = temp[r];
        f[j] = flag[r];
    }
}

void RemdHostLoop::setup(const RemdState &st, const float *temp, int steps)
{
    const size_t n3 = 3 * (size_t)natom;
    // Gathered into slot order here, once, untimed (a device's own thread does its own).
    each([&](int d) {
        std::vector<float> x(pl.nloc * n3), v(pl.nloc * n3), tc(pl.nloc), tp(pl.nloc);
        for (int j = 0; j < pl.nloc; ++j) {
            const int r = pl.replica(d, j);
            memcpy(&x[j * n3], st.pos.data() + r * n3, n3 * sizeof(float));
            memcpy(&v[j * n3], st.vel.data() + r * n3, n3 * sizeof(float));
            tc[j] = st.tcur[r];
            tp[j] = temp[r];
        }
        be.setup(d, pl.nloc, x.data(), v.data(), tc.data(), tp.data(), steps);
        be.setup_wait(d);
    });
}

double RemdHostLoop::interval(const float *temp, const int *flag, float *U)
{
    const size_t ublock = (size_t)pl.nloc * mexch;
    if (threads_wanted) {
        each([&](int d) {
            pack(d, temp, flag);
            be.upload(d, temp_flag[d].data(), 1);
            be.launch(d);
            dev_s[d] = be.download(d, U + d * ublock);
        });
    } else {
        for (int d = 0; d < pl.ndev; ++d) pack(d, temp, flag);
        for (int d = 0; d < pl.ndev; ++d) be.upload(d, temp_flag[d].data(), 2); // list 1, lines 22-27
        for (int d = 0; d < pl.ndev; ++d) be.launch(d);                          // lines 28-30
        for (int d = 0; d < pl.ndev; ++d) dev_s[d] = be.download(d, U + d * ublock); // lines 31-33
    }
    return *std::max_element(dev_s.begin(), dev_s.end());
}

void RemdHostLoop::fetch(int r, float *x, float *v, float *f) { be.fetch(pl.device_of(r), pl.slot_of(r), x, v, f); }
