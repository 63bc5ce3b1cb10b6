// A device's execution context, and the types the ops are declared with.
//
// One Backend instance per device owns the allocator, the device's lanes
// (core/lane.h) and, on CUDA, the cuBLAS handles and pinned staging buffers;
// it copies memory, orders lanes and records events. The ops themselves are
// declared once in the op table (core/op_table.h), with the enums and
// structs below as their arguments, and run through dispatch::<Name>
// (core/dispatch.h): the CPU runs them at once, the CUDA backend queues them
// on the lane's stream. Shape checks happen one level up, in core/ops.h.
//
// Layout: row-major, contiguous. Operands are CPtr/Ptr (memory and dtype,
// core/dtype.h) of this backend's device; raw float pointers are float32;
// a name with "host" is host memory.
#ifndef TANDEM_CORE_BACKEND_H_
#define TANDEM_CORE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/lane.h"

namespace tandem {

enum class Activation { kIdentity, kRelu, kGelu, kTanh, kSigmoid, kSilu };
// Every activation. The kernels of both backends are instantiated once per
// entry (kernel_math::VisitActivation) and the tests iterate over it, so a
// new activation is its enum value, its entry here, its name (backend.cc)
// and its function and derivative (core/kernel_math.h).
inline constexpr Activation kActivations[] = {Activation::kIdentity, Activation::kRelu,
                                              Activation::kGelu,     Activation::kTanh,
                                              Activation::kSigmoid,  Activation::kSilu};
const char* ActivationName(Activation activation);
// Parses an ActivationName ("identity", "relu", "gelu", "tanh", "sigmoid",
// "silu").
Activation ParseActivation(const std::string& name);
// "identity, relu, gelu, tanh, sigmoid or silu": for messages.
std::string ActivationNames();

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

// The element-wise functions of dispatch::Unary (core/ops_math.h): exp,
// natural log, square root, 1 / sqrt(x) and 1 / x, in float32.
enum class UnaryOp { kExp, kLog, kSqrt, kRsqrt, kReciprocal };

// How a vector v is laid against a matrix x [rows, cols] in the broadcast
// ops (core/ops_math.h), as numpy broadcasts v[None, :] and v[:, None]:
enum class Broadcast {
  kRow,     // v is [cols], one row for every row: out[r, c] = x[r, c] op v[c]
  kColumn,  // v is [rows], one column for every column: out[r, c] = x[r, c] op v[r]
};

// What dispatch::RowReduce makes of each row of x [rows, cols].
enum class RowReduction { kSum, kMean, kMax, kVariance };

struct SgdParams {
  float lr = 0.01f;
  float momentum = 0.f;
  float weight_decay = 0.f;  // L2, added to the gradient
  bool nesterov = false;
};

struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;  // decoupled: param -= lr * wd * param
};

// dispatch::Permute's reordering: x is [in_shape[0], ..., in_shape[rank - 1]]
// (contiguous), and dimension i of out is dimension perm[i] of x, as numpy's
// transpose(x, perm). Passed by value to GPU kernels.
struct PermuteSpec {
  static constexpr int kMaxRank = 6;
  int rank = 0;
  int64_t in_shape[kMaxRank] = {};
  int perm[kMaxRank] = {};
};

// What dispatch::Gemm does besides the product, for one call.
struct GemmSpec {
  CPtr bias;  // [n], added to every row; data null: none
  Activation activation = Activation::kIdentity;  // applied last
  // float32 operands: let the GEMM use TF32 tensor cores (10-bit mantissa
  // inputs, float32 accumulation). bfloat16 operands always accumulate in
  // float32.
  bool tf32 = false;
};

// The batch of dispatch::BatchedGemm: `count` products, the b-th reading A
// at a + b * stride_a elements and B at b + b * stride_b. A stride of 0
// gives every product the same matrix (a broadcast); C is always dense,
// product b at c + b * m * n.
struct GemmBatch {
  int64_t count = 1;
  int64_t stride_a = 0;
  int64_t stride_b = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual Allocator& allocator() = 0;
  virtual std::string Describe() const = 0;

  // Lanes (core/lane.h). The main lane is where ops go when a call names no
  // lane; the side lane is a second queue of this context for work that may
  // overlap the main lane's (a layer's parameter gradients). NewLane makes
  // another, owned by the caller. On the CPU they are all one queue.
  virtual Lane main_lane() = 0;
  virtual Lane side_lane() = 0;
  virtual OwnedLane NewLane(const LaneOptions& options) = 0;
  // `lane` with its GEMMs planned for `multiprocessors` fewer SMs (see
  // Lane::WithGemmReserve); throws unless 0 <= multiprocessors < the SMs
  // the device has. The CPU accepts any reserve and ignores it.
  virtual Lane ReserveForGemm(const Lane& lane, int multiprocessors);

  // Ordering. WaitFor: `waiter` runs its later work only after what
  // `producer` (a lane of this backend) has queued so far; the host does not
  // wait. `waiter` may be a lane of another device of the same kind.
  virtual void WaitFor(const Lane& waiter, const Lane& producer) = 0;
  virtual std::unique_ptr<LaneEvent> NewEvent(bool timing) = 0;
  // `event` (made by this backend) marks the current end of `lane`.
  virtual void Record(LaneEvent& event, const Lane& lane) = 0;
  // `lane` runs its later work only after `event`'s point (an event made by
  // a backend of the same kind, possibly of another device).
  virtual void Wait(const Lane& lane, const LaneEvent& event) = 0;
  // Blocks the host until `lane` has run everything queued on it so far.
  virtual void Synchronize(const Lane& lane) = 0;
  // Synchronize of the main and side lanes.
  void Synchronize();

  // Copies, in bytes, queued on `lane`. CopyHostToDevice may return before
  // the copy is done, but the host buffer may be reused at once (the CUDA
  // backend stages through pinned memory); CopyDeviceToHost returns when the
  // data is on the host.
  virtual void CopyHostToDevice(const Lane& lane, const void* host, void* dst,
                                size_t bytes) = 0;
  virtual void CopyDeviceToHost(const Lane& lane, const void* src, void* host,
                                size_t bytes) = 0;
  virtual void CopyDeviceToDevice(const Lane& lane, const void* src, void* dst,
                                  size_t bytes) = 0;
  // `rows` rows of `row_bytes` bytes each: row r from src + r * src_pitch to
  // dst + r * dst_pitch (bytes), on this device; the rows must not overlap.
  virtual void CopyRows(const Lane& lane, const void* src, int64_t src_pitch, void* dst,
                        int64_t dst_pitch, int64_t row_bytes, int64_t rows) = 0;
  // dst (on this device) = src (on `src_device`, of the same kind), queued on
  // `lane`; the caller orders `lane` after the writer of src.
  virtual void CopyFromPeer(const Lane& lane, void* dst, Device src_device,
                            const void* src, size_t bytes) = 0;
  // Lets copies from `peer` go device to device directly where the hardware
  // can (once per pair; nothing on the CPU).
  virtual void EnablePeerAccess(Device peer) { (void)peer; }

  // Whether Gemm multiplies bfloat16 operands as they are: true for the
  // CUDA backend, and for the CPU backend where the CPU has bfloat16 dot
  // products. Where false, Gemm widens bfloat16 operands to float32 and runs
  // the float32 GEMM, and layers in bf16 compute in float32 instead (Note
  // [bf16 where the device does not multiply bfloat16] in
  // layers/precision.h).
  virtual bool MultipliesBFloat16() const = 0;
  // Whether Gemm with trans_a and not trans_b (both operands stored with k
  // as their row index, as in a weight gradient dy^T x) runs well below its
  // rate for these operands, so that a caller should pass a transposed copy
  // of A (trans_a false) instead. The CUDA backend says yes for TF32 on
  // Hopper (Note [TF32 and transposed operands] in core/cuda/context.cc).
  virtual bool GemmWantsATransposed(DType dtype, bool tf32) const {
    (void)dtype;
    (void)tf32;
    return false;
  }
};

}  // namespace tandem

#endif  // TANDEM_CORE_BACKEND_H_
