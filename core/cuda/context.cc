#include "core/cuda/context.h"

#include <string>
#include <utility>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"

namespace tandem {
namespace cuda {
namespace {

constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

int StreamPriority(bool high) {
  if (!high) return 0;
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return greatest;
}

std::string Where(int device) { return "cuda:" + std::to_string(device); }

}  // namespace

Blas::Blas(cudaStream_t stream)
    : stream(stream),
      workspace(kCublasWorkspaceBytes),
      lt(workspace.data(), workspace.bytes()) {
  // cublasSetStream resets the workspace to cuBLAS's own pool, so bind the
  // stream first and the workspace second.
  CUBLAS_CHECK(cublasSetStream(handle.get(), stream));
  CUBLAS_CHECK(cublasSetWorkspace(handle.get(), workspace.data(), workspace.bytes()));
  CUBLAS_CHECK(cublasSetPointerMode(handle.get(), CUBLAS_POINTER_MODE_HOST));
  CUBLAS_CHECK(cublasSetMathMode(handle.get(), CUBLAS_DEFAULT_MATH));
}

void Blas::Configure(bool use_tf32, int sm_count_target) {
  if (use_tf32 != tf32) {
    CUBLAS_CHECK(cublasSetMathMode(
        handle.get(), use_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    tf32 = use_tf32;
  }
  if (sm_count_target != sm_target) {
    CUBLAS_CHECK(cublasSetSmCountTarget(handle.get(), sm_count_target));
    sm_target = sm_count_target;
  }
}

CudaLane::CudaLane(int device, int priority) : device_(device), stream_(priority) {}

void CudaLane::OrderAfterThis(cudaStream_t waiter) {
  std::lock_guard<std::mutex> lock(order_mutex_);
  DeviceGuard guard(device_);
  StreamWaitFor(waiter, stream_.get(), order_event_);
}

CudaEvent::CudaEvent(int device, bool timing)
    : device_(device), event_(timing ? Event::Timing() : Event()) {}

double CudaEvent::ElapsedMsSince(const LaneEvent& start) const {
  const auto* earlier = dynamic_cast<const CudaEvent*>(&start);
  TANDEM_CHECK(earlier != nullptr)
      << "ElapsedMsSince: the start event is not a CUDA event";
  return event_.ElapsedMsSince(earlier->event_);
}

CudaLane& CudaLaneOf(const Lane& lane) {
  TANDEM_CHECK(lane.valid() && lane.device().is_cuda())
      << "expected a lane of a CUDA device, got the " << lane.Describe();
  return *static_cast<CudaLane*>(lane.state());
}

CudaContext::CudaContext(int device)
    : device_(device), main_(device, 0), side_(device, 0), allocator_(device) {
  CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors_,
                                    cudaDevAttrMultiProcessorCount, device_));
  CUDA_CHECK(cudaDeviceGetAttribute(&compute_major_, cudaDevAttrComputeCapabilityMajor,
                                    device_));
  description_ = MakeDescription();
}

CudaContext::~CudaContext() {
  // Lanes, handles and buffers release themselves; the streams' queued work
  // finishes first (cudaStreamDestroy defers the release).
  DeviceGuard guard(device_);
}

CudaLane& CudaContext::LaneOf(const Lane& lane, const char* op) const {
  TANDEM_CHECK(lane.valid() && lane.device() == Device::Cuda(device_))
      << op << " on " << Where(device_) << " was given the " << lane.Describe();
  return *static_cast<CudaLane*>(lane.state());
}

void CudaContext::MainLaneOnly(const Lane& lane, const char* op) const {
  TANDEM_CHECK(lane.state() == &main_)
      << op << " on " << Where(device_) << " uses scratch memory and runs on "
      << "the main lane only, not the " << lane.Describe();
}

// Note [TF32 and transposed operands]
// Hopper's TF32 tensor-core kernels read both operands of a product along
// k. A weight gradient dy^T x stores both with k (the batch) as the row
// index, and cuBLAS runs it far below its TF32 rate (gemm_strategy_bench
// --dz_transposed=off|on measures both). Transposing dy first costs one pass over it
// and makes the product an NN one. bfloat16 products and full-precision
// float32 ones read either layout at nearly full speed.
bool CudaContext::GemmWantsATransposed(DType dtype, bool tf32) const {
  return tf32 && dtype == DType::kFloat32 && compute_major_ == 9;
}

int CudaContext::GemmSmTarget(const Lane& lane) const {
  return lane.gemm_reserve() == 0 ? 0 : multiprocessors_ - lane.gemm_reserve();
}

OwnedLane CudaContext::NewLane(const LaneOptions& options) {
  DeviceGuard guard(device_);
  auto state = std::make_unique<CudaLane>(device_, StreamPriority(options.high_priority));
  return OwnedLane(*this, std::move(state), options.name);
}

Lane CudaContext::ReserveForGemm(const Lane& lane, int multiprocessors) {
  TANDEM_CHECK(multiprocessors >= 0 && multiprocessors < multiprocessors_)
      << lane.Describe() << ": a GEMM reserve of " << multiprocessors << " SMs; "
      << Where(device_) << " has " << multiprocessors_ << ", so reserve 0 to "
      << multiprocessors_ - 1;
  return Backend::ReserveForGemm(lane, multiprocessors);
}

void CudaContext::WaitFor(const Lane& waiter, const Lane& producer) {
  CudaLane& from = LaneOf(producer, "WaitFor");
  from.OrderAfterThis(CudaLaneOf(waiter).stream());
}

std::unique_ptr<LaneEvent> CudaContext::NewEvent(bool timing) {
  DeviceGuard guard(device_);
  return std::make_unique<CudaEvent>(device_, timing);
}

void CudaContext::Record(LaneEvent& event, const Lane& lane) {
  auto* cuda_event = dynamic_cast<CudaEvent*>(&event);
  TANDEM_CHECK(cuda_event != nullptr && cuda_event->device() == device_)
      << "Record on the " << lane.Describe()
      << ": the event must come from NewEvent of " << Where(device_);
  DeviceGuard guard(device_);
  cuda_event->event().Record(StreamOf(lane, "Record"));
}

void CudaContext::Wait(const Lane& lane, const LaneEvent& event) {
  const auto* cuda_event = dynamic_cast<const CudaEvent*>(&event);
  TANDEM_CHECK(cuda_event != nullptr)
      << "Wait on the " << lane.Describe() << " for an event of another kind of device";
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaStreamWaitEvent(StreamOf(lane, "Wait"), cuda_event->event().get(), 0))
      << "on the " << lane.Describe();
}

void CudaContext::Synchronize(const Lane& lane) {
  DeviceGuard guard(device_);
  LaneOf(lane, "Synchronize").Synchronize();
}

// See Note [Pinned staging].
void CudaContext::CopyHostToDevice(const Lane& lane, const void* host, void* dst,
                                   size_t bytes) {
  if (bytes == 0) return;
  DeviceGuard guard(device_);
  std::lock_guard<std::mutex> lock(h2d_mutex_);
  StagedHostToDevice(h2d_, StreamOf(lane, "CopyHostToDevice"), host, dst, bytes,
                     description_.c_str());
}

void CudaContext::CopyDeviceToHost(const Lane& lane, const void* src, void* host,
                                   size_t bytes) {
  if (bytes == 0) return;
  DeviceGuard guard(device_);
  std::lock_guard<std::mutex> lock(d2h_mutex_);
  StagedDeviceToHost(d2h_, StreamOf(lane, "CopyDeviceToHost"), src, host, bytes,
                     description_.c_str());
}

void CudaContext::CopyDeviceToDevice(const Lane& lane, const void* src, void* dst,
                                     size_t bytes) {
  if (bytes == 0 || src == dst) return;
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                             StreamOf(lane, "CopyDeviceToDevice")))
      << "copying " << bytes << " bytes on " << lane.Describe();
}

void CudaContext::CopyRows(const Lane& lane, const void* src, int64_t src_pitch, void* dst,
                           int64_t dst_pitch, int64_t row_bytes, int64_t rows) {
  if (rows <= 0 || row_bytes <= 0) return;
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<size_t>(dst_pitch), src,
                               static_cast<size_t>(src_pitch), static_cast<size_t>(row_bytes),
                               static_cast<size_t>(rows), cudaMemcpyDeviceToDevice,
                               StreamOf(lane, "CopyRows")))
      << "copying " << rows << " rows of " << row_bytes << " bytes on " << lane.Describe();
}

void CudaContext::CopyFromPeer(const Lane& lane, void* dst, Device src_device,
                               const void* src, size_t bytes) {
  TANDEM_CHECK(src_device.is_cuda())
      << "CopyFromPeer to " << Where(device_) << " from " << src_device
      << ": the source must be a GPU (host copies go through CopyHostToDevice)";
  if (bytes == 0) return;
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaMemcpyPeerAsync(dst, device_, src, src_device.index, bytes,
                                 StreamOf(lane, "CopyFromPeer")))
      << "copying " << bytes << " bytes to " << Where(device_) << " from "
      << src_device;
}

void CudaContext::EnablePeerAccess(Device peer) {
  if (!peer.is_cuda() || peer.index == device_) return;
  int can = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device_, peer.index));
  if (!can) return;  // cudaMemcpyPeerAsync still works, through the host
  DeviceGuard guard(device_);
  const cudaError_t status = cudaDeviceEnablePeerAccess(peer.index, 0);
  if (status == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();  // not an error: clear it for the next launch check
    return;
  }
  CUDA_CHECK(status) << "enabling peer access from " << Where(device_) << " to "
                     << peer;
}

std::string CudaContext::MakeDescription() {
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  int runtime = 0, driver = 0, cublas = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &cublas));
  int cublas_minor = 0;
  CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &cublas_minor));
  auto version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  };
  return Where(device_) + " (" + prop.name + ", sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) +
         " SMs, " + std::to_string(prop.totalGlobalMem >> 20) + " MiB; CUDA runtime " +
         version(runtime) + ", driver " + version(driver) + ", cuBLAS " +
         std::to_string(cublas) + "." + std::to_string(cublas_minor) + ")";
}

}  // namespace cuda
}  // namespace tandem
