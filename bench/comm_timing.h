// Collective timing shared by the benchmarks: how long one barrier or one
// all-reduce takes on a worker's communicator, as the slowest rank saw it.
//
//   Launch(options, [&](Worker& w) {
//     const double barrier_us = bench::BarrierMicros(w.comm, 20);
//     const double ar_us = bench::AllReduceMicros(w.gradient_comm(), w.comm,
//                                                 w.device, 4 << 10, 20);
//     const double ms = bench::MaxOverRanks(w.comm, my_ms);  // every rank
//   });
//
// Every function is a collective: every rank of the communicator calls it
// with the same arguments.
#ifndef TANDEM_BENCH_COMM_TIMING_H_
#define TANDEM_BENCH_COMM_TIMING_H_

#include <cstdint>

#include "core/device.h"
#include "parallel/communicator.h"

namespace tandem {
namespace bench {

// The largest (mean) of every rank's `value`, on every rank.
double MaxOverRanks(Communicator& comm, double value);
double MeanOverRanks(Communicator& comm, double value);

// Median over `iters` (after 2 untimed calls) of one Barrier on `comm`, in
// microseconds; the slowest rank's median.
double BarrierMicros(Communicator& comm, int iters);

// Median over `iters` (after 2 untimed calls) of one in-place kAverage
// all-reduce of `bytes` (a multiple of 4) of ones on `comm`, in
// microseconds; the slowest rank's median. Each call follows a Barrier on
// `host` (and, on a GPU, a device synchronisation), so ranks start together.
// The data lives on `device`. Timed with the device's markers (core/
// backend.h: the steady clock on the CPU, events on the compute stream on a
// GPU); a communicator with stream-ordered collectives (NCCL) is timed
// through QueueAllReduce + JoinQueued, so the time is the GPU's from the
// compute stream handing over to the all-reduce being joined back.
double AllReduceMicros(Communicator& comm, Communicator& host, Device device,
                       int64_t bytes, int iters);

}  // namespace bench
}  // namespace tandem

#endif  // TANDEM_BENCH_COMM_TIMING_H_
