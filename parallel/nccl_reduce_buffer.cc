// NcclCommunicator::NewReduceBuffer: reduce buffers in NCCL's symmetric
// memory.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "parallel/nccl_check.h"
#include "parallel/nccl_communicator.h"
#include "parallel/nccl_work.h"

namespace tandem {

// Note [Symmetric memory]
// ~~~~~~~~~~~~~~~~~~~~~~~
// NCCL 2.27 added symmetric memory: a buffer from ncclMemAlloc registered on
// every rank with ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC), at the
// same offset everywhere. Collectives on it run NCCL's symmetric kernels,
// which read the peers' buffers directly over NVLink instead of staging
// through NCCL's own FIFOs. The reducer's buckets live there
// (NewReduceBuffer); docs/benchmarks.md has the measurements.
// - Left to itself NCCL runs its symmetric kernel on few CTAs, and beside
//   backward's GEMMs a bucket's all-reduce then falls behind and queues
//   behind the one before it. Every communicator therefore asks for at
//   least kMinCtas CTAs (ncclConfig_t::minCTAs): the SMs the reducer's GEMM
//   reserve leaves free anyway (ReducerOptions::gemm_reserve), so the
//   all-reduce takes nothing the GEMMs were planned to use.
// - Registration is collective, so every rank makes the same buffers in the
//   same order (the reducer does), and each is numbered like a collective
//   (Communicator::Announce), so debug fingerprints catch a rank that
//   differs.
// - Deregistering is local: a buffer dropped after its communicator is gone
//   is only freed, since ncclCommDestroy and ncclCommAbort release the
//   windows themselves.
// TANDEM_NCCL_SYMMETRIC=0 turns it off, for comparison or for an NCCL that
// cannot register.

namespace {

constexpr const char* kWayOut = "TANDEM_NCCL_SYMMETRIC=0 on every rank uses ordinary memory";

#if TANDEM_NCCL_HAS_SYMMETRIC_MEMORY
// One symmetric reduce buffer: its memory, its window and the communicator
// that registered it. Released when the last tensor viewing it goes.
class SymmetricBuffer {
 public:
  SymmetricBuffer(std::shared_ptr<NcclCommState> state, int device, size_t bytes,
                  const std::string& context)
      : state_(std::move(state)), device_(device), memory_(bytes, context) {}

  // Registers the memory as a symmetric window; collective.
  void Register(const std::string& context) {
    state_->Run(context, [&](ncclComm_t comm) {
      return ncclCommWindowRegister(comm, memory_.get(), memory_.bytes(), &window_,
                                    NCCL_WIN_COLL_SYMMETRIC);
    });
  }

  float* data() const { return static_cast<float*>(memory_.get()); }

  ~SymmetricBuffer() {
    try {
      cuda::DeviceGuard guard(device_);
      // Kernels queued on any lane (all-reduces, updates, GEMMs writing
      // gradients) may still use the buffer; this runs when a model or
      // reducer is torn down, never inside a step.
      TANDEM_CUDA_LOG_IF_ERROR(cudaDeviceSynchronize());
      if (window_ != nullptr) {
        state_->RunIfLive([&](ncclComm_t comm) {
          LogIfNcclError(ncclCommWindowDeregister(comm, window_), "ncclCommWindowDeregister",
                         state_->description());
          return ncclSuccess;
        });
      }
      memory_ = NcclMemory();  // frees it while the device is current
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tandem: %s: ignoring %s while releasing a reduce buffer\n",
                   state_->description().c_str(), e.what());
    }
  }

  SymmetricBuffer(const SymmetricBuffer&) = delete;
  SymmetricBuffer& operator=(const SymmetricBuffer&) = delete;

 private:
  const std::shared_ptr<NcclCommState> state_;
  const int device_;
  NcclMemory memory_;
  ncclWindow_t window_ = nullptr;
};
#endif  // TANDEM_NCCL_HAS_SYMMETRIC_MEMORY

}  // namespace

// See Note [Symmetric memory].
Tensor NcclCommunicator::NewReduceBuffer(int64_t count, Device device) {
  TANDEM_CHECK(device == Device::Cuda(device_))
      << description_ << ": a reduce buffer on " << device
      << " (this communicator reduces memory of cuda:" << device_ << ")";
  if (!symmetric_memory_ || count <= 0) return Tensor::Zeros({count}, device);
#if TANDEM_NCCL_HAS_SYMMETRIC_MEMORY
  state_->ThrowIfAborted();
  const std::string context =
      Context(Announce(CollectiveKind::kWindowRegister, count)) + " (" + kWayOut + ")";
  cuda::DeviceGuard guard(device_);
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  auto buffer = std::make_shared<SymmetricBuffer>(state_, device_, bytes, context);
  buffer->Register(context);
  float* data = buffer->data();
  Tensor t = Tensor::Wrap(data, {count}, device, [buffer]() mutable { buffer.reset(); });
  ops::Fill(t, 0.f);
  return t;
#else
  TANDEM_CHECK(false) << description_ << ": symmetric memory needs NCCL 2.27 headers";
  return Tensor();
#endif
}

}  // namespace tandem
