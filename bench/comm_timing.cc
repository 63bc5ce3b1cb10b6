#include "bench/comm_timing.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "bench/bench_util.h"
#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/check.h"
#include "core/tensor.h"

namespace tandem {
namespace bench {

std::unique_ptr<LaneEvent> TimingEvent(const Lane& lane) {
  std::unique_ptr<LaneEvent> event = lane.backend().NewEvent(/*timing=*/true);
  lane.backend().Record(*event, lane);
  return event;
}

double MaxOverRanks(Communicator& comm, double value) {
  std::vector<float> all(comm.size());
  const float mine = static_cast<float>(value);
  comm.AllGather(&mine, 1, all.data())->Wait();
  return *std::max_element(all.begin(), all.end());
}

double MeanOverRanks(Communicator& comm, double value) {
  float v = static_cast<float>(value);
  comm.AllReduce(&v, 1, ReduceOp::kAverage)->Wait();
  return v;
}

double BarrierMicros(Communicator& comm, int iters) {
  const Lane host = GetBackend(Device::Cpu()).main_lane();
  std::vector<double> us;
  for (int i = 0; i < iters + 2; ++i) {
    const std::unique_ptr<LaneEvent> start = TimingEvent(host);
    comm.Barrier()->Wait();
    if (i >= 2) us.push_back(1e3 * TimingEvent(host)->ElapsedMsSince(*start));
  }
  return MaxOverRanks(comm, Median(us));
}

double AllReduceMicros(Communicator& comm, Communicator& host, Device device,
                       int64_t bytes, int iters) {
  TANDEM_CHECK(bytes >= 4 && bytes % 4 == 0)
      << "all-reduce size must be a positive multiple of 4 bytes, got " << bytes;
  const int64_t count = bytes / 4;
  // Averages of all-ones stay all-ones, so the values never overflow.
  Tensor data = Tensor::Full({count}, 1.f, device);
  Backend& backend = GetBackend(device);
  const Lane main = backend.main_lane();
  CollectiveOptions after_main;
  after_main.after = {main};
  std::vector<double> us;
  for (int i = 0; i < iters + 2; ++i) {
    host.Barrier()->Wait();
    backend.Synchronize();
    const std::unique_ptr<LaneEvent> start = TimingEvent(main);
    comm.AllReduce(data.data(), count, ReduceOp::kAverage, after_main)->WaitOn(main);
    const std::unique_ptr<LaneEvent> end = TimingEvent(main);
    if (i >= 2) us.push_back(1e3 * end->ElapsedMsSince(*start));
  }
  const float first = data.Slice(0, 1).Item();
  TANDEM_CHECK(first == 1.f) << "all-reduce of ones averaged to " << first;
  return MaxOverRanks(host, Median(us));
}

}  // namespace bench
}  // namespace tandem
