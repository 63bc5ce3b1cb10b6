#include "core/cpu/cpu_backend.h"

#include <chrono>
#include <cstring>
#include <memory>

#include "core/check.h"
#include "core/cpu/cpu_allocator.h"
#include "core/cpu/cpu_attention.h"
#include "core/cpu/cpu_gemm.h"
#include "core/cpu/cpu_gemm_bf16.h"
#include "core/cpu/cpu_op_kernels.h"
#include "core/cpu/cpu_threads.h"

namespace tandem {
namespace cpu {
namespace {

// The CPU runs every op at once on the calling thread, so all its lanes are
// one queue and an event is the host clock at its record.
class CpuLane : public LaneState {};

class CpuEvent : public LaneEvent {
 public:
  explicit CpuEvent(bool timing) : timing_(timing) {}
  bool Query() const override { return true; }
  void Synchronize() const override {}
  double ElapsedMsSince(const LaneEvent& start) const override {
    const auto* earlier = dynamic_cast<const CpuEvent*>(&start);
    TANDEM_CHECK(earlier != nullptr && timing_ && earlier->timing_)
        << "ElapsedMsSince needs two timing events of the CPU";
    return std::chrono::duration<double, std::milli>(time_ - earlier->time_).count();
  }
  void Record() { time_ = std::chrono::steady_clock::now(); }

 private:
  bool timing_;
  std::chrono::steady_clock::time_point time_ = std::chrono::steady_clock::now();
};

class CpuBackend : public Backend {
 public:
  Device device() const override { return Device::Cpu(); }
  Allocator& allocator() override { return allocator_; }
  // E.g. "cpu (GEMM: Eigen 3.4.0; bfloat16 GEMM: float32 GEMM on widened
  // operands, 2 threads)".
  std::string Describe() const override {
    const int threads = CpuThreads();
    return "cpu (GEMM: " + cpu::Describe(KernelGemmLibrary()) +
           "; bfloat16 GEMM: " + DescribeBf16Gemm() + ", " + std::to_string(threads) +
           (threads == 1 ? " thread)" : " threads)");
  }

  Lane main_lane() override { return Lane(this, &lane_, "main"); }
  Lane side_lane() override { return Lane(this, &lane_, "side"); }
  OwnedLane NewLane(const LaneOptions& options) override {
    return OwnedLane(*this, std::make_unique<CpuLane>(), options.name);
  }
  void WaitFor(const Lane&, const Lane&) override {}
  std::unique_ptr<LaneEvent> NewEvent(bool timing) override {
    return std::make_unique<CpuEvent>(timing);
  }
  void Record(LaneEvent& event, const Lane&) override {
    static_cast<CpuEvent&>(event).Record();
  }
  void Wait(const Lane&, const LaneEvent&) override {}
  void Synchronize(const Lane&) override {}

  void CopyHostToDevice(const Lane&, const void* host, void* dst,
                        size_t bytes) override {
    if (host != dst) std::memmove(dst, host, bytes);
  }
  void CopyDeviceToHost(const Lane&, const void* src, void* host,
                        size_t bytes) override {
    if (host != src) std::memmove(host, src, bytes);
  }
  void CopyDeviceToDevice(const Lane&, const void* src, void* dst,
                          size_t bytes) override {
    if (src != dst) std::memmove(dst, src, bytes);
  }
  void CopyRows(const Lane&, const void* src, int64_t src_pitch, void* dst, int64_t dst_pitch,
                int64_t row_bytes, int64_t rows) override {
    math::CopyRows(KernelIntra(), src, src_pitch, dst, dst_pitch, row_bytes, rows);
  }
  void CopyFromPeer(const Lane&, void* dst, Device, const void* src,
                    size_t bytes) override {
    if (src != dst) std::memmove(dst, src, bytes);
  }

  bool MultipliesBFloat16() const override { return Bf16GemmFast(); }

 private:
  CpuAllocator allocator_;
  CpuLane lane_;
};

}  // namespace

std::shared_ptr<Backend> CpuContext() {
  static const std::shared_ptr<Backend> backend = std::make_shared<CpuBackend>();
  return backend;
}

}  // namespace cpu
}  // namespace tandem
