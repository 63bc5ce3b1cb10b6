// Collective timing shared by the benchmarks: how long one barrier or one
// all-reduce takes on a worker's communicator, as the slowest rank saw it,
// and the timing events the benchmarks measure device time with.
//
//   Launch(options, [&](Worker& w) {
//     const double barrier_us = bench::BarrierMicros(w.comm, 20);
//     const double ar_us = bench::AllReduceMicros(w.gradient_comm(), w.comm,
//                                                 w.device, 4 << 10, 20);
//     const double ms = bench::MaxOverRanks(w.comm, my_ms);  // every rank
//   });
//
// Every function but TimingEvent is a collective: every rank of the
// communicator calls it with the same arguments.
#ifndef TANDEM_BENCH_COMM_TIMING_H_
#define TANDEM_BENCH_COMM_TIMING_H_

#include <cstdint>
#include <memory>

#include "core/device.h"
#include "core/lane.h"
#include "parallel/communicator.h"

namespace tandem {
namespace bench {

// A timing event recorded now at the end of `lane` (core/lane.h: the host
// clock on the CPU, a CUDA event on a GPU); `end->ElapsedMsSince(*start)`
// is the lane's time between two of them.
std::unique_ptr<LaneEvent> TimingEvent(const Lane& lane);

// The largest (mean) of every rank's `value`, on every rank.
double MaxOverRanks(Communicator& comm, double value);
double MeanOverRanks(Communicator& comm, double value);

// Median over `iters` (after 2 untimed calls) of one Barrier on `comm`, in
// microseconds; the slowest rank's median.
double BarrierMicros(Communicator& comm, int iters);

// Median over `iters` (after 2 untimed calls) of one in-place kAverage
// all-reduce of `bytes` (a multiple of 4) of ones on `comm`, in
// microseconds; the slowest rank's median. Each call follows a Barrier on
// `host` and a synchronisation of the device, so ranks start together. The
// data lives on `device`. Timed with timing events on the device's main
// lane: the all-reduce follows the main lane and the main lane waits for it
// (Work::WaitOn), so on a GPU the time is the device's, from the main lane
// handing over to the all-reduce to the main lane having the result; on a
// host transport WaitOn blocks the host until the result is in place, and
// the time is the host clock's.
double AllReduceMicros(Communicator& comm, Communicator& host, Device device,
                       int64_t bytes, int iters);

}  // namespace bench
}  // namespace tandem

#endif  // TANDEM_BENCH_COMM_TIMING_H_
