#include "core/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/cuda/caching_allocator.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/host_wait.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/event.h"
#include "core/cuda/kernels.h"
#include "core/cuda/lt_gemm.h"
#include "core/cuda/stream.h"

namespace tandem {
namespace cuda {
namespace {

// ---------------------------------------------------------------------------
// Availability.

struct Availability {
  int count = 0;
  std::string why_not;
};

const Availability& Probe() {
  static const Availability availability = [] {
    Availability a;
    const cudaError_t status = cudaGetDeviceCount(&a.count);
    if (status != cudaSuccess) {
      a.count = 0;
      a.why_not = std::string("no CUDA devices (cudaGetDeviceCount: ") +
                  cudaGetErrorString(status) + ")";
      cudaGetLastError();  // clear the sticky error for later calls
    } else if (a.count == 0) {
      a.why_not = "no CUDA devices (cudaGetDeviceCount returned 0)";
    }
    return a;
  }();
  return availability;
}

std::atomic<bool>& Tf32Flag() {
  static std::atomic<bool> allow = [] {
    const char* env = std::getenv("TANDEM_ALLOW_TF32");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return allow;
}

// ---------------------------------------------------------------------------
// Owned handles. Destructors release with the raw call and only log.

class CublasHandle {
 public:
  CublasHandle() { CUBLAS_CHECK(cublasCreate(&handle_)); }
  ~CublasHandle() {
    const cublasStatus_t status = cublasDestroy(handle_);
    if (status != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "tandem: ignoring %s in cublasDestroy\n",
                   internal::CublasErrorText(status).c_str());
    }
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Device memory outside the caching allocator (the cuBLAS workspace lives as
// long as the context, and should not show in the tensors' memory stats).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    CUDA_CHECK(cudaMalloc(&data_, bytes)) << "allocating " << bytes << " bytes";
  }
  ~DeviceBuffer() { TANDEM_CUDA_LOG_IF_ERROR(cudaFree(data_)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

// Page-locked host memory: the GPU's copy engines read and write it directly,
// so cudaMemcpyAsync from or to it is truly asynchronous.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { Release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // Grows (discarding the contents) to at least `bytes`. The caller must
  // know that no queued copy still uses the old buffer.
  void Reserve(size_t bytes) {
    if (bytes <= capacity_) return;
    Release();
    CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocPortable))
        << "allocating " << bytes << " bytes of pinned host memory";
    capacity_ = bytes;
  }
  char* data() const { return static_cast<char*>(data_); }
  size_t capacity() const { return capacity_; }

 private:
  void Release() {
    if (data_ != nullptr) TANDEM_CUDA_LOG_IF_ERROR(cudaFreeHost(data_));
    data_ = nullptr;
    capacity_ = 0;
  }

  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// Scratch device memory for one op, from the context's allocator. Freed as
// soon as the op is queued: see Note [Stream-ordered reuse].
class Scratch {
 public:
  Scratch(Allocator& allocator, size_t bytes)
      : allocator_(allocator),
        bytes_(bytes),
        data_(allocator.Allocate(bytes)) {}
  ~Scratch() { allocator_.Free(data_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  void* data() const { return data_; }

 private:
  Allocator& allocator_;
  size_t bytes_;
  void* data_;
};

// ---------------------------------------------------------------------------
// Staging for host <-> device copies.
//
// Note [Pinned staging]
// ~~~~~~~~~~~~~~~~~~~~~
// Tensor data on the host is ordinary pageable memory. cudaMemcpyAsync from
// pageable memory is not asynchronous, and the caller may reuse or free its
// buffer as soon as CopyHostToDevice returns. So a host-to-device copy first
// memcpy's the data into a pinned staging slot, then queues the DMA from the
// slot on the compute stream and returns: the caller's buffer is free at
// once, and the transfer overlaps whatever the host does next.
//
// The slot itself must not be overwritten while its DMA may still read it:
// an event is recorded after each staged copy and synchronised before the
// slot is filled again. Two slots alternate, so filling one overlaps the
// DMA out of the other; copies larger than a slot go in slot-sized chunks.
//
// Device-to-host copies mirror this: the DMA goes into a slot, the host waits
// for the event recorded after it (that is, for everything queued on the
// stream so far, as cudaStreamSynchronize would, but not for work other
// threads queue later) and copies the slot out, while the next chunk's DMA
// fills the other slot. This wait is the one place a copy blocks.

class StagingSlots {
 public:
  struct Slot {
    PinnedBuffer buffer;
    Event done;  // recorded after the last DMA that used `buffer`
  };

  // Returns the next slot, free for the host to fill or read: its previous
  // DMA has completed, and its buffer holds at least `bytes`.
  Slot& Next(size_t bytes) {
    Slot& slot = slots_[next_];
    next_ = (next_ + 1) % slots_.size();
    // Returns at once if nothing was recorded yet.
    slot.done.Synchronize();
    if (bytes > slot.buffer.capacity()) {
      // Grow geometrically from 1 MiB: cudaHostAlloc is slow (it pins pages),
      // so a few early copies should settle the size for good.
      const size_t grown =
          std::max(kMinStagingBytes, 2 * slot.buffer.capacity());
      slot.buffer.Reserve(std::max(bytes, std::min(grown, kStagingChunkBytes)));
    }
    return slot;
  }

 private:
  static constexpr size_t kMinStagingBytes = size_t{1} << 20;

  std::array<Slot, 2> slots_;
  size_t next_ = 0;
};

// ---------------------------------------------------------------------------
// The context.

constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

class CudaTimeMarker : public TimeMarker {
 public:
  explicit CudaTimeMarker(cudaStream_t stream) : event_(Event::Timing()) {
    event_.Record(stream);
  }
  double MicrosSince(const TimeMarker& earlier) const override {
    return 1000.0 * event_.ElapsedMsSince(
                        static_cast<const CudaTimeMarker&>(earlier).event_);
  }

 private:
  Event event_;
};

class CudaBackend : public Backend {
 public:
  // Requires `device` to be the current device (GetCudaBackend sees to it):
  // the stream, events and cuBLAS handle are created on the current device.
  explicit CudaBackend(int device)
      : device_(device),
        allocator_(device),
        main_blas_(stream_.get()),
        side_blas_(side_stream_.get()) {
    CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount,
                                      device_));
    description_ = MakeDescription();
  }

  Device device() const override { return Device::Cuda(device_); }
  Allocator& allocator() override { return allocator_; }
  std::string Describe() const override { return description_; }
  cudaStream_t stream() const { return stream_.get(); }
  cudaStream_t side_stream() const { return side_stream_.get(); }

  // See Note [Pinned staging].
  void CopyHostToDevice(const float* host, float* dst, int64_t n) override {
    if (n <= 0) return;
    DeviceGuard guard(device_);
    std::lock_guard<std::mutex> lock(h2d_mutex_);
    const char* from = reinterpret_cast<const char*>(host);
    char* to = reinterpret_cast<char*>(dst);
    const size_t total = static_cast<size_t>(n) * sizeof(float);
    for (size_t offset = 0; offset < total;) {
      const size_t chunk = std::min(total - offset, kStagingChunkBytes);
      StagingSlots::Slot& slot = h2d_.Next(chunk);
      std::memcpy(slot.buffer.data(), from + offset, chunk);
      CUDA_CHECK(cudaMemcpyAsync(to + offset, slot.buffer.data(), chunk,
                                 cudaMemcpyHostToDevice, stream_.get()))
          << "copying " << chunk << " bytes to cuda:" << device_;
      slot.done.Record(stream_.get());
      offset += chunk;
    }
  }

  // See Note [Pinned staging].
  void CopyDeviceToHost(const float* src, float* host, int64_t n) override {
    if (n <= 0) return;
    DeviceGuard guard(device_);
    JoinSideLane();
    std::lock_guard<std::mutex> lock(d2h_mutex_);
    const char* from = reinterpret_cast<const char*>(src);
    char* to = reinterpret_cast<char*>(host);
    const size_t total = static_cast<size_t>(n) * sizeof(float);
    // Chunk i goes through slot i % 2; chunk i is read out on the host while
    // chunk i + 1 is in flight.
    size_t pending_offset = 0, pending_bytes = 0;
    StagingSlots::Slot* pending = nullptr;
    for (size_t offset = 0; offset < total;) {
      const size_t chunk = std::min(total - offset, kStagingChunkBytes);
      StagingSlots::Slot& slot = d2h_.Next(chunk);
      CUDA_CHECK(cudaMemcpyAsync(slot.buffer.data(), from + offset, chunk,
                                 cudaMemcpyDeviceToHost, stream_.get()))
          << "copying " << chunk << " bytes from cuda:" << device_;
      slot.done.Record(stream_.get());
      if (pending != nullptr) {
        pending->done.Synchronize();
        std::memcpy(to + pending_offset, pending->buffer.data(), pending_bytes);
      }
      pending = &slot;
      pending_offset = offset;
      pending_bytes = chunk;
      offset += chunk;
    }
    pending->done.Synchronize();
    std::memcpy(to + pending_offset, pending->buffer.data(), pending_bytes);
  }

  void CopyDeviceToDevice(const float* src, float* dst, int64_t n) override {
    if (n <= 0 || src == dst) return;
    DeviceGuard guard(device_);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float),
                               cudaMemcpyDeviceToDevice, LaneStream()));
  }

  std::unique_ptr<TimeMarker> Mark() override {
    DeviceGuard guard(device_);
    JoinSideLane();
    return std::make_unique<CudaTimeMarker>(stream_.get());
  }

  void Synchronize() override {
    DeviceGuard guard(device_);
    JoinSideLane();
    CountHostWait();
    CUDA_CHECK(cudaStreamSynchronize(stream_.get()))
        << "waiting for cuda:" << device_;
  }

  // Row-major C = op(A) op(B) through column-major cuBLAS: a row-major [r, c]
  // matrix is a column-major [c, r] one, i.e. its transpose. So cuBLAS
  // computes C^T [n, m] = op(B)^T op(A)^T, passing B first. Leading
  // dimensions are the stored row lengths: A is [m, k] (lda = k) or, when
  // transposed, [k, m] (lda = m); B is [k, n] (ldb = n) or [n, k] (ldb = k).
  void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
            float alpha, const float* a, const float* b, float beta,
            float* c) override {
    if (m <= 0 || n <= 0) return;
    DeviceGuard guard(device_);
    if (k <= 0) {
      // An empty sum; cuBLAS rejects lda = 0. beta == 0 overwrites garbage.
      if (beta == 0.f) {
        kernels::Fill(LaneStream(), 0.f, c, m * n);
      } else {
        kernels::Scale(LaneStream(), beta, c, m * n);
      }
      return;
    }
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int64_t lda = trans_a ? m : k;
    const int64_t ldb = trans_b ? k : n;
    // One host thread at a time per handle (cuBLAS handles are not
    // thread-safe); each lane has its own handle and workspace, since two
    // GEMMs running at once must not share a workspace. The math mode
    // follows SetAllowTf32.
    NotOverridden("Gemm");
    Blas& blas = OnSideLane() ? side_blas_ : main_blas_;
    std::lock_guard<std::mutex> lock(blas.mutex);
    const bool tf32 = AllowTf32();
    if (tf32 != blas.tf32) {
      CUBLAS_CHECK(
          cublasSetMathMode(blas.handle.get(), tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                    : CUBLAS_DEFAULT_MATH));
      blas.tf32 = tf32;
    }
    const int sm_target = GemmSmTarget();
    if (sm_target != blas.sm_target) {
      CUBLAS_CHECK(cublasSetSmCountTarget(blas.handle.get(), sm_target));
      blas.sm_target = sm_target;
    }
    CUBLAS_CHECK(cublasSgemm_64(blas.handle.get(), op_b, op_a, n, m, k, &alpha,
                                b, ldb, a, lda, &beta, c, n))
        << "Gemm m=" << m << " n=" << n << " k=" << k << " trans_a=" << trans_a
        << " trans_b=" << trans_b << " on cuda:" << device_;
  }

  // One cuBLASLt call where it can (see core/cuda/lt_gemm.h): the result
  // goes straight to d, with the bias and ReLU applied on the way out.
  void GemmEx(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, const float* b, float beta,
              const float* c, float* d, const GemmEpilogue& epilogue) override {
    if (m <= 0 || n <= 0) return;
    const bool relu = epilogue.activation == Activation::kRelu;
    if (k > 0 && (relu || epilogue.activation == Activation::kIdentity)) {
      DeviceGuard guard(device_);
      NotOverridden("GemmEx");
      Blas& blas = OnSideLane() ? side_blas_ : main_blas_;
      std::lock_guard<std::mutex> lock(blas.mutex);
      LtGemmCall call;
      call.trans_a = trans_a;
      call.trans_b = trans_b;
      call.m = m;
      call.n = n;
      call.k = k;
      call.alpha = alpha;
      call.a = a;
      call.b = b;
      call.beta = beta;
      call.c = c;
      call.d = d;
      call.bias = epilogue.bias;
      call.relu = relu;
      call.tf32 = AllowTf32();
      call.sm_count_target = GemmSmTarget();
      if (blas.lt.Run(blas.stream, call)) return;
    }
    Backend::GemmEx(trans_a, trans_b, m, n, k, alpha, a, b, beta, c, d, epilogue);
  }

  void BiasActivation(Activation activation, const float* x, const float* bias,
                      float* pre, float* out, int64_t rows,
                      int64_t cols) override {
    DeviceGuard guard(device_);
    kernels::BiasActivation(LaneStream(), activation, x, bias, pre, out, rows,
                            cols);
  }

  void ColumnSums(const float* x, int64_t rows, int64_t cols, float alpha,
                  float beta, float* out) override {
    DeviceGuard guard(device_);
    kernels::ColumnSums(LaneStream(), x, rows, cols, alpha, beta, out);
  }

  void Binary(BinaryOp op, const float* a, const float* b, float* out,
              int64_t n) override {
    DeviceGuard guard(device_);
    kernels::Binary(LaneStream(), op, a, b, out, n);
  }

  void Axpy(float alpha, const float* x, float* y, int64_t n) override {
    DeviceGuard guard(device_);
    kernels::Axpy(LaneStream(), alpha, x, y, n);
  }

  void Scale(float alpha, float* x, int64_t n) override {
    DeviceGuard guard(device_);
    kernels::Scale(LaneStream(), alpha, x, n);
  }

  void Fill(float value, float* x, int64_t n) override {
    DeviceGuard guard(device_);
    kernels::Fill(LaneStream(), value, x, n);
  }

  void TrackNonFinite(const float* loss, int64_t step,
                      float* first_bad) override {
    DeviceGuard guard(device_);
    kernels::TrackNonFinite(LaneStream(), loss, step, first_bad);
  }

  void ActivationForward(Activation activation, const float* x, float* y,
                         int64_t n) override {
    DeviceGuard guard(device_);
    kernels::ActivationForward(LaneStream(), activation, x, y, n);
  }

  void ActivationBackward(Activation activation, const float* x,
                          const float* dy, float* dx, int64_t n,
                          bool accumulate) override {
    DeviceGuard guard(device_);
    kernels::ActivationBackward(LaneStream(), activation, x, dy, dx, n,
                                accumulate);
  }

  void SoftmaxCrossEntropy(const float* logits, const float* labels,
                           int64_t rows, int64_t classes, float normalizer,
                           float* loss, float* dlogits) override {
    if (rows <= 0) return;
    DeviceGuard guard(device_);
    MainLaneOnly(__func__);
    Scratch scratch(allocator_, kernels::SoftmaxCrossEntropyScratchBytes(rows));
    kernels::SoftmaxCrossEntropy(LaneStream(), logits, labels, rows, classes,
                                 normalizer, scratch.data(), loss, dlogits);
  }

  void Mse(const float* pred, const float* target, int64_t n, float normalizer,
           float* loss, float* dpred) override {
    if (n <= 0) return;
    DeviceGuard guard(device_);
    MainLaneOnly(__func__);
    Scratch scratch(allocator_, kernels::MseScratchBytes(n));
    kernels::Mse(LaneStream(), pred, target, n, normalizer, scratch.data(),
                 loss, dpred);
  }

  void Argmax(const float* x, int64_t rows, int64_t cols, float* out) override {
    DeviceGuard guard(device_);
    kernels::Argmax(LaneStream(), x, rows, cols, out);
  }

  void CountCorrect(const float* logits, const float* labels, int64_t rows,
                    int64_t classes, float* out) override {
    if (rows <= 0) return;
    DeviceGuard guard(device_);
    MainLaneOnly(__func__);
    Scratch scratch(allocator_, kernels::CountCorrectScratchBytes(rows));
    kernels::CountCorrect(LaneStream(), logits, labels, rows, classes,
                          scratch.data(), out);
  }

  void DropoutMask(float p, uint64_t seed, uint64_t offset, float* mask,
                   int64_t n) override {
    DeviceGuard guard(device_);
    kernels::DropoutMask(LaneStream(), p, seed, offset, mask, n);
  }

  void SgdUpdate(const SgdParams& params, float* param, const float* grad,
                 float* velocity, int64_t n) override {
    DeviceGuard guard(device_);
    kernels::SgdUpdate(LaneStream(), params, param, grad, velocity, n);
  }

  // See Backend::BeginSideLane. A lane is open for the thread that began
  // it: other threads' ops stay on the main lane meanwhile. Threads sharing
  // a device (pipeline stages on one GPU) share its side stream, as they
  // share its main stream; a join waits for all of it.
  void BeginSideLane() override {
    DeviceGuard guard(device_);
    std::lock_guard<std::mutex> lock(lane_mutex_);
    TANDEM_CHECK(!OnSideLaneLocked() && OverrideLocked() == nullptr)
        << "cuda:" << device_
        << ": BeginSideLane while this thread's side lane is open or its ops "
           "go to another stream (cuda::StreamOverride)";
    StreamWaitFor(side_stream_.get(), stream_.get(), fork_event_);
    side_threads_.push_back(std::this_thread::get_id());
    side_pending_ = true;
  }

  void EndSideLane() override {
    std::lock_guard<std::mutex> lock(lane_mutex_);
    side_threads_.erase(std::remove(side_threads_.begin(), side_threads_.end(),
                                    std::this_thread::get_id()),
                        side_threads_.end());
  }

  void JoinSideLane() override {
    std::lock_guard<std::mutex> lock(lane_mutex_);
    JoinSideLaneLocked();
  }

  void AdamWUpdate(const AdamWParams& params, int64_t step, float* param,
                   const float* grad, float* m, float* v, int64_t n) override {
    DeviceGuard guard(device_);
    kernels::AdamWUpdate(LaneStream(), params, step, param, grad, m, v, n);
  }

 private:
  std::string MakeDescription() {
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    int runtime = 0, driver = 0, cublas = 0;
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    CUBLAS_CHECK(cublasGetVersion(main_blas_.handle.get(), &cublas));
    auto version = [](int v) {
      return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    };
    return "cuda:" + std::to_string(device_) + " (" + prop.name + ", sm_" +
           std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
           std::to_string(prop.multiProcessorCount) + " SMs, " +
           std::to_string(prop.totalGlobalMem >> 20) + " MiB; CUDA runtime " +
           version(runtime) + ", driver " + version(driver) + ", cuBLAS " +
           std::to_string(cublas) + ")";
  }

  void SetGemmReserve(int multiprocessors) override {
    TANDEM_CHECK(multiprocessors >= 0 && multiprocessors < multiprocessors_)
        << "SetGemmReserve(" << multiprocessors << ") on cuda:" << device_
        << ": it has " << multiprocessors_
        << " multiprocessors, so reserve 0 to " << multiprocessors_ - 1;
    gemm_reserve_.store(multiprocessors, std::memory_order_relaxed);
  }

  // cuBLAS's SM-count target for the current reserve: 0 means "all".
  int GemmSmTarget() const {
    const int reserve = gemm_reserve_.load(std::memory_order_relaxed);
    return reserve == 0 ? 0 : multiprocessors_ - reserve;
  }

  // A cuBLAS handle bound to one stream, with its own workspace.
  struct Blas {
    explicit Blas(cudaStream_t stream)
        : stream(stream),
          workspace(kCublasWorkspaceBytes),
          lt(workspace.data(), workspace.bytes()) {
      // cublasSetStream resets the workspace to cuBLAS's own pool, so bind
      // the stream first and the workspace second.
      CUBLAS_CHECK(cublasSetStream(handle.get(), stream));
      CUBLAS_CHECK(cublasSetWorkspace(handle.get(), workspace.data(),
                                      workspace.bytes()));
      CUBLAS_CHECK(cublasSetPointerMode(handle.get(), CUBLAS_POINTER_MODE_HOST));
      CUBLAS_CHECK(cublasSetMathMode(handle.get(), CUBLAS_DEFAULT_MATH));
    }
    cudaStream_t stream;
    DeviceBuffer workspace;
    // Both run on `stream`, one call at a time, so they share the workspace.
    LtGemm lt;
    CublasHandle handle;
    std::mutex mutex;
    bool tf32 = false;  // the handle's math mode; guarded by mutex
    int sm_target = 0;  // the handle's SM-count target; guarded by mutex
  };

  // Whether the calling thread's ops go to the side lane.
  bool OnSideLane() {
    std::lock_guard<std::mutex> lock(lane_mutex_);
    return OnSideLaneLocked();
  }
  bool OnSideLaneLocked() const {
    return std::find(side_threads_.begin(), side_threads_.end(),
                     std::this_thread::get_id()) != side_threads_.end();
  }
  // Scratch memory is freed in the main lane's order (Note [Stream-ordered
  // reuse]), so ops that need it do not run on the side lane.
  void MainLaneOnly(const char* op) {
    TANDEM_CHECK(!OnSideLane())
        << op << " on cuda:" << device_
        << " uses scratch memory and cannot run on the side lane";
    NotOverridden(op);
  }
  // GEMMs run on their cuBLAS handle's stream and scratch memory follows the
  // main lane's order, so neither can follow a StreamOverride.
  void NotOverridden(const char* op) {
    std::lock_guard<std::mutex> lock(lane_mutex_);
    TANDEM_CHECK(OverrideLocked() == nullptr)
        << op << " on cuda:" << device_
        << " cannot run on another stream (cuda::StreamOverride): only "
           "element-wise ops can";
  }
  cudaStream_t OverrideLocked() const {
    for (const auto& entry : overrides_) {
      if (entry.first == std::this_thread::get_id()) return entry.second;
    }
    return nullptr;
  }
  cudaStream_t LaneStream() {
    std::lock_guard<std::mutex> lock(lane_mutex_);
    if (cudaStream_t s = OverrideLocked()) return s;
    return OnSideLaneLocked() ? side_stream_.get() : stream_.get();
  }

 public:
  // See cuda::StreamOverride.
  void PushStreamOverride(cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(lane_mutex_);
    TANDEM_CHECK(OverrideLocked() == nullptr && !OnSideLaneLocked())
        << "cuda::StreamOverride on cuda:" << device_
        << " while this thread already has one or has the side lane open";
    overrides_.push_back({std::this_thread::get_id(), stream});
  }
  void PopStreamOverride() {
    std::lock_guard<std::mutex> lock(lane_mutex_);
    for (auto it = overrides_.begin(); it != overrides_.end(); ++it) {
      if (it->first == std::this_thread::get_id()) {
        overrides_.erase(it);
        return;
      }
    }
  }

 private:
  void JoinSideLaneLocked() {
    if (!side_pending_) return;
    DeviceGuard guard(device_);
    StreamWaitFor(stream_.get(), side_stream_.get(), join_event_);
    // Lanes still open may queue more side-lane work.
    side_pending_ = !side_threads_.empty();
  }

  const int device_;
  int multiprocessors_ = 0;
  std::atomic<int> gemm_reserve_{0};  // SetGemmReserve
  // Declaration order is construction order: the streams before the cuBLAS
  // handles bound to them, and destruction runs the other way.
  Stream stream_;
  Stream side_stream_;
  CachingAllocator allocator_;
  Blas main_blas_;
  Blas side_blas_;
  // The side lane (Backend::BeginSideLane); guarded by lane_mutex_.
  std::mutex lane_mutex_;
  Event fork_event_;
  Event join_event_;
  std::vector<std::thread::id> side_threads_;  // threads with the lane open
  // cuda::StreamOverride: per thread, where its ops go instead.
  std::vector<std::pair<std::thread::id, cudaStream_t>> overrides_;
  bool side_pending_ = false;  // side-lane work the main lane has not joined
  std::mutex h2d_mutex_;
  StagingSlots h2d_;
  std::mutex d2h_mutex_;
  StagingSlots d2h_;
  std::string description_;
};

constexpr int kMaxDevices = 64;

std::array<std::atomic<CudaBackend*>, kMaxDevices>& Contexts() {
  static std::array<std::atomic<CudaBackend*>, kMaxDevices> contexts{};
  return contexts;
}

CudaBackend& Context(int index) {
  const int count = DeviceCount();
  TANDEM_CHECK(index >= 0 && index < count)
      << "cuda:" << index << " is not available: "
      << (count == 0 ? UnavailableReason()
                     : std::to_string(count) + " CUDA device(s) visible");
  TANDEM_CHECK(index < kMaxDevices) << "cuda:" << index << ": Tandem supports "
                                    << kMaxDevices << " devices per process";
  std::atomic<CudaBackend*>& slot = Contexts()[index];
  // Double-checked: the common path is one atomic load, no lock.
  CudaBackend* context = slot.load(std::memory_order_acquire);
  if (context != nullptr) return *context;
  static std::mutex creation_mutex;
  std::lock_guard<std::mutex> lock(creation_mutex);
  context = slot.load(std::memory_order_acquire);
  if (context == nullptr) {
    DeviceGuard guard(index);
    // Never destroyed: tensors in static storage may free into it at exit.
    context = new CudaBackend(index);
    slot.store(context, std::memory_order_release);
  }
  return *context;
}

}  // namespace

int DeviceCount() { return Probe().count; }
std::string UnavailableReason() { return Probe().why_not; }

Backend& GetCudaBackend(int index) { return Context(index); }

cudaStream_t ComputeStream(int index) { return Context(index).stream(); }

cudaStream_t SideLaneStream(int index) { return Context(index).side_stream(); }

StreamOverride::StreamOverride(int device, cudaStream_t stream) : device_(device) {
  Context(device).PushStreamOverride(stream);
}

StreamOverride::~StreamOverride() { Context(device_).PopStreamOverride(); }

std::unique_ptr<TimeMarker> MarkStream(cudaStream_t stream, int device) {
  DeviceGuard guard(device);
  return std::make_unique<CudaTimeMarker>(stream);
}

void SetCurrentDevice(int index) {
  CUDA_CHECK(cudaSetDevice(index)) << "binding this thread to cuda:" << index;
}

void SetAllowTf32(bool allow) { Tf32Flag().store(allow); }
bool AllowTf32() { return Tf32Flag().load(); }

}  // namespace cuda
}  // namespace tandem
