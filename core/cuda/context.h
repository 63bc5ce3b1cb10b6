// The CUDA backend's context and lanes (internal to core/cuda; users reach it
// through GetBackend(Device::Cuda(i)) and core/cuda/cuda_backend.h).
//
// A CudaContext owns, for one GPU: the caching allocator, the main and side
// lanes, the pinned staging buffers for host copies, and its description.
// A CudaLane is one non-blocking stream with, made at its first GEMM, a
// cuBLAS handle and a cuBLASLt planner bound to it with a workspace of their
// own (two GEMMs running at once must not share a workspace). Every method
// makes the context's device current for its duration, so any host thread
// may call any context.
#ifndef TANDEM_CORE_CUDA_CONTEXT_H_
#define TANDEM_CORE_CUDA_CONTEXT_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <string>

#include "core/backend.h"
#include "core/cuda/caching_allocator.h"
#include "core/cuda/event.h"
#include "core/cuda/handles.h"
#include "core/cuda/lt_gemm.h"
#include "core/cuda/staging.h"
#include "core/cuda/stream.h"

namespace tandem {
namespace cuda {

// A cuBLAS handle and a cuBLASLt planner bound to one stream, sharing one
// workspace (they run on that stream one call at a time). Not thread-safe:
// the lane's mutex guards it.
struct Blas {
  explicit Blas(cudaStream_t stream);
  // Sets the handle's math mode (TF32 or not) and SM-count target, where
  // they differ from what they are.
  void Configure(bool use_tf32, int sm_count_target);

  cudaStream_t stream;
  DeviceBuffer workspace;
  LtGemm lt;
  CublasHandle handle;
  bool tf32 = false;  // the handle's math mode
  int sm_target = 0;  // the handle's SM-count target; 0: all
};

class CudaLane : public LaneState {
 public:
  // On the current device, which must be `device`.
  CudaLane(int device, int priority);

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_.get(); }
  // Blocks the host until the lane has run its queued work.
  void Synchronize() const { stream_.Synchronize(); }

  // Runs `use` with this lane's Blas (made on first use) under its lock.
  template <typename Use>
  auto WithBlas(Use use) {
    std::lock_guard<std::mutex> lock(blas_mutex_);
    if (blas_ == nullptr) blas_ = std::make_unique<Blas>(stream_.get());
    return use(*blas_);
  }

  // `waiter` waits for what this lane has queued so far (see
  // cuda::StreamWaitFor); the record and the wait happen under one lock.
  void OrderAfterThis(cudaStream_t waiter);

 private:
  const int device_;
  Stream stream_;
  std::mutex order_mutex_;
  Event order_event_;  // scratch for OrderAfterThis
  std::mutex blas_mutex_;
  std::unique_ptr<Blas> blas_;
};

class CudaEvent : public LaneEvent {
 public:
  CudaEvent(int device, bool timing);
  bool Query() const override { return event_.Query(); }
  void Synchronize() const override { event_.Synchronize(); }
  double ElapsedMsSince(const LaneEvent& start) const override;

  int device() const { return device_; }
  Event& event() { return event_; }
  const Event& event() const { return event_; }

 private:
  int device_;
  Event event_;
};

class CudaContext : public Backend {
 public:
  // Requires `device` to be the current device (the registry sees to it).
  explicit CudaContext(int device);
  ~CudaContext() override;

  Device device() const override { return Device::Cuda(device_); }
  Allocator& allocator() override { return allocator_; }
  std::string Describe() const override { return description_; }
  int index() const { return device_; }

  Lane main_lane() override { return Lane(this, &main_, "main"); }
  Lane side_lane() override { return Lane(this, &side_, "side"); }
  OwnedLane NewLane(const LaneOptions& options) override;
  Lane ReserveForGemm(const Lane& lane, int multiprocessors) override;

  void WaitFor(const Lane& waiter, const Lane& producer) override;
  std::unique_ptr<LaneEvent> NewEvent(bool timing) override;
  void Record(LaneEvent& event, const Lane& lane) override;
  void Wait(const Lane& lane, const LaneEvent& event) override;
  using Backend::Synchronize;
  void Synchronize(const Lane& lane) override;

  void CopyHostToDevice(const Lane& lane, const void* host, void* dst,
                        size_t bytes) override;
  void CopyDeviceToHost(const Lane& lane, const void* src, void* host,
                        size_t bytes) override;
  void CopyRows(const Lane& lane, const void* src, int64_t src_pitch, void* dst,
                int64_t dst_pitch, int64_t row_bytes, int64_t rows) override;
  void CopyDeviceToDevice(const Lane& lane, const void* src, void* dst,
                          size_t bytes) override;
  void CopyFromPeer(const Lane& lane, void* dst, Device src_device,
                    const void* src, size_t bytes) override;
  void EnablePeerAccess(Device peer) override;

  bool MultipliesBFloat16() const override { return true; }
  bool GemmWantsATransposed(DType dtype, bool tf32) const override;

  // For the kernels of the op table (cuda_ops.cc and its siblings).
  // The lane's state, checked to belong to this context.
  CudaLane& LaneOf(const Lane& lane, const char* op) const;
  cudaStream_t StreamOf(const Lane& lane, const char* op) const {
    return LaneOf(lane, op).stream();
  }
  cudaStream_t MainStream() const { return main_.stream(); }
  // Ops that take scratch memory from the allocator run on the main lane
  // only: the allocator reuses freed blocks in the main lane's order.
  void MainLaneOnly(const Lane& lane, const char* op) const;
  // cuBLAS's SM-count target for the lane's GEMM reserve: 0 means "all".
  int GemmSmTarget(const Lane& lane) const;

 private:
  std::string MakeDescription();

  const int device_;
  int multiprocessors_ = 0;
  int compute_major_ = 0;  // the compute capability's major version
  // Declaration order is construction order: the lanes before their cuBLAS
  // handles (made inside them), the allocator before any tensor.
  CudaLane main_;
  CudaLane side_;
  CachingAllocator allocator_;
  std::mutex h2d_mutex_;
  StagingSlots h2d_;
  std::mutex d2h_mutex_;
  StagingSlots d2h_;
  std::string description_;
};

// The context's lane state behind `lane`, for code of core/cuda.
CudaLane& CudaLaneOf(const Lane& lane);

// The context of a CUDA lane: how the op table's kernels reach their device.
inline CudaContext& ContextOf(const Lane& lane) {
  return static_cast<CudaContext&>(lane.backend());
}

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_CONTEXT_H_
