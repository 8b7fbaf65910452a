// The host side of one exchange interval over all devices (P003 list 1): temperatures
// and flags to every device, the kernels, the energies back.  Two ways to drive the
// devices, with the same results:
//  - serial: P003's list 1, one host thread looping over the devices three times
//    (upload: 2 copies each, launch, download).  Every call to a device waits for the
//    one before it, so each device's round trips add up: through an API-remoting layer
//    (vcuda: each call a network round trip to that device's server) the interval grows
//    by one device's round trips per device added, and the download of device d waits
//    for the downloads of devices 0 .. d-1 even when its kernel ended first.
//  - threads: one host thread per device (the calling thread drives device 0), each
//    doing its device's upload (one copy), launch and download; different devices'
//    round trips overlap, so the interval costs about one device's round trips whatever
//    the device count.
#ifndef UMSTUDY_REMD_LOOP_H
#define UMSTUDY_REMD_LOOP_H

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "remd_host.h"
#include "remd_placement.h"

class RemdHostLoop {
  public:
    RemdHostLoop(RemdBackend &be, const RemdPlacement &pl, int natom, int mexch, bool threaded);
    ~RemdHostLoop();
    RemdHostLoop(const RemdHostLoop &) = delete;
    RemdHostLoop &operator=(const RemdHostLoop &) = delete;

    // Every replica's state (replica order) to its device, then `steps` untimed steps.
    void setup(const RemdState &st, const float *temp, int steps);
    // One interval: temp and flag (replica order) to the devices, the kernels, every
    // device's U into U (replica r's row is placement().row(r)).  Returns the slowest
    // device's kernel time (s); each device's is in device_seconds().
    double interval(const float *temp, const int *flag, float *U);
    void fetch(int r, float *x, float *v, float *f);
    const std::vector<double> &device_seconds() const { return dev_s; }
    const RemdPlacement &placement() const { return pl; }
    bool threaded() const { return threads_wanted; }
    // Runs fn(d) for every device d: on the devices' own threads, or in turn.
    void each(const std::function<void(int)> &fn);

  private:
    void helper(int d);
    void pack(int d, const float *temp, const int *flag);

    RemdBackend &be;
    RemdPlacement pl;
    int natom, mexch;
    bool threads_wanted;
    std::vector<RemdPinnable<float>> temp_flag; // per device: nloc temperatures, nloc flags
    std::vector<double> dev_s;
    // helper threads for devices 1 .. n-1 (threads mode)
    std::vector<std::thread> helpers;
    std::mutex mu;
    std::condition_variable go, done;
    std::function<void(int)> job;
    long long generation = 0;
    int pending = 0;
    bool stopping = false;
};

#endif
