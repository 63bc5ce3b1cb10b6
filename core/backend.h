// The backend op set: what every device must implement, on raw pointers.
//
// One Backend instance per device is that device's execution context: it owns
// the allocator, the device's lanes (core/lane.h) and, on CUDA, the cuBLAS
// handles and pinned staging buffers. Every op names the lane it runs on;
// the CPU backend runs ops at once, the CUDA backend queues them on the
// lane's stream. Shape checks happen one level up, in core/ops.h, so
// backends only compute.
//
// Layout: row-major, contiguous float32. Pointers are device pointers of this
// backend's device unless a name says "host".
#ifndef TANDEM_CORE_BACKEND_H_
#define TANDEM_CORE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "core/allocator.h"
#include "core/device.h"
#include "core/lane.h"

namespace tandem {

enum class Activation { kIdentity, kRelu, kGelu, kTanh };
const char* ActivationName(Activation activation);
// Parses "identity", "relu", "gelu" or "tanh".
Activation ParseActivation(const std::string& name);

enum class BinaryOp { kAdd, kSub, kMul };

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

// What Backend::GemmEx applies to the product before writing it.
struct GemmEpilogue {
  const float* bias = nullptr;  // [n], added to every row; null: none
  Activation activation = Activation::kIdentity;  // applied last
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
  // dst (on this device) = src (on `src_device`, of the same kind), queued on
  // `lane`; the caller orders `lane` after the writer of src.
  virtual void CopyFromPeer(const Lane& lane, void* dst, Device src_device,
                            const void* src, size_t bytes) = 0;
  // Lets copies from `peer` go device to device directly where the hardware
  // can (once per pair; nothing on the CPU).
  virtual void EnablePeerAccess(Device peer) { (void)peer; }

  // C[m, n] = alpha * op(A) * op(B) + beta * C, where op(A) is [m, k] and
  // op(B) is [k, n]; A is stored [m, k] or, transposed, [k, m].
  virtual void Gemm(const Lane& lane, bool trans_a, bool trans_b, int64_t m, int64_t n,
                    int64_t k, float alpha, const float* a, const float* b,
                    float beta, float* c) = 0;
  // D[m, n] = act(alpha op(A) op(B) + beta C + bias): Gemm with the result
  // in its own buffer (c may equal d; c is not read when beta is 0) and an
  // optional bias and activation. The default runs a copy, Gemm and
  // BiasActivation; the CUDA backend does it in one cuBLASLt call where it
  // can (ReLU or no activation), so the result is written once.
  virtual void GemmEx(const Lane& lane, bool trans_a, bool trans_b, int64_t m, int64_t n,
                      int64_t k, float alpha, const float* a, const float* b,
                      float beta, const float* c, float* d,
                      const GemmEpilogue& epilogue);
  // pre[r, c] = x[r, c] + bias[c] (skipped when pre is null) and
  // out[r, c] = act(x[r, c] + bias[c]), in one pass; x may equal pre or out.
  virtual void BiasActivation(const Lane& lane, Activation activation, const float* x,
                              const float* bias, float* pre, float* out,
                              int64_t rows, int64_t cols) = 0;
  // out[c] = beta * out[c] + alpha * sum_r x[r, c].
  virtual void ColumnSums(const Lane& lane, const float* x, int64_t rows, int64_t cols,
                          float alpha, float beta, float* out) = 0;
  virtual void Binary(const Lane& lane, BinaryOp op, const float* a, const float* b, float* out,
                      int64_t n) = 0;
  // y += alpha * x.
  virtual void Axpy(const Lane& lane, float alpha, const float* x, float* y, int64_t n) = 0;
  virtual void Scale(const Lane& lane, float alpha, float* x, int64_t n) = 0;
  virtual void Fill(const Lane& lane, float value, float* x, int64_t n) = 0;
  virtual void ActivationForward(const Lane& lane, Activation activation, const float* x,
                                 float* y, int64_t n) = 0;
  // dx = dy * act'(x) when accumulate is false, dx += dy * act'(x) otherwise.
  virtual void ActivationBackward(const Lane& lane, Activation activation, const float* x,
                                  const float* dy, float* dx, int64_t n,
                                  bool accumulate) = 0;
  // loss[0] = sum_r -log softmax(logits[r])[labels[r]] / normalizer;
  // dlogits (if not null) = (softmax - onehot) / normalizer. Labels are class
  // indices stored as floats.
  virtual void SoftmaxCrossEntropy(const Lane& lane, const float* logits, const float* labels,
                                   int64_t rows, int64_t classes,
                                   float normalizer, float* loss,
                                   float* dlogits) = 0;
  // loss[0] = sum (pred - target)^2 / normalizer;
  // dpred (if not null) = 2 (pred - target) / normalizer.
  virtual void Mse(const Lane& lane, const float* pred, const float* target, int64_t n,
                   float normalizer, float* loss, float* dpred) = 0;
  // out[r] = index of the first maximum of x[r, :].
  virtual void Argmax(const Lane& lane, const float* x, int64_t rows, int64_t cols,
                      float* out) = 0;
  // out[0] = number of rows whose argmax equals the label.
  virtual void CountCorrect(const Lane& lane, const float* logits, const float* labels,
                            int64_t rows, int64_t classes, float* out) = 0;
  // mask[i] = 0 with probability p, else 1 / (1 - p); bits from
  // HashU64(seed, offset + i), so CPU and CUDA draw the same mask.
  virtual void DropoutMask(const Lane& lane, float p, uint64_t seed, uint64_t offset,
                           float* mask, int64_t n) = 0;
  // If loss[0] is NaN or infinite and first_bad[0] < 0, sets first_bad[0] =
  // step: a sticky record of the first non-finite loss that the host reads
  // only now and then, so checking costs no synchronisation per step.
  virtual void TrackNonFinite(const Lane& lane, const float* loss, int64_t step,
                              float* first_bad) = 0;
  // Parameter updates, in one pass over a (possibly flat) buffer. velocity
  // may be null when momentum is 0.
  virtual void SgdUpdate(const Lane& lane, const SgdParams& params, float* param,
                         const float* grad, float* velocity, int64_t n) = 0;
  // `step` counts from 1 (bias correction).
  virtual void AdamWUpdate(const Lane& lane, const AdamWParams& params, int64_t step,
                           float* param, const float* grad, float* m,
                           float* v, int64_t n) = 0;
};

}  // namespace tandem

#endif  // TANDEM_CORE_BACKEND_H_
