// The backend op set: what every device must implement, on raw pointers.
//
// One Backend instance per device is that device's execution context: it owns
// the allocator and, on CUDA, the compute stream and cuBLAS handle. Ops are
// queued on the context in call order; the CPU backend runs them at once, the
// CUDA backend enqueues them on its stream. Shape checks happen one level up,
// in core/ops.h, so backends only compute.
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

// A point in a device's queue of work, for traces: on the CPU the host clock
// when it was made; on CUDA a timing event on the compute stream, i.e. the
// moment the GPU got there.
class TimeMarker {
 public:
  virtual ~TimeMarker() = default;
  // Microseconds from `earlier` (a marker of the same device) to this one;
  // waits for the device to reach this marker.
  virtual double MicrosSince(const TimeMarker& earlier) const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual Allocator& allocator() = 0;
  virtual std::string Describe() const = 0;

  // Copies. HostToDevice may return before the copy is done only if the
  // host buffer may be reused at once (the CUDA backend stages through
  // pinned memory); DeviceToHost returns when the data is on the host.
  virtual void CopyHostToDevice(const float* host, float* dst, int64_t n) = 0;
  virtual void CopyDeviceToHost(const float* src, float* host, int64_t n) = 0;
  virtual void CopyDeviceToDevice(const float* src, float* dst, int64_t n) = 0;
  // Waits until everything queued on this context has run.
  virtual void Synchronize() = 0;
  // A marker at the current end of this context's queue (see TimeMarker).
  virtual std::unique_ptr<TimeMarker> Mark() = 0;

  // The side lane: a second queue beside the main one, for work that may
  // overlap what the main queue does next. A layer's weight gradient needs
  // nothing that the next layer's backward needs, so it can run beside the
  // input-gradient GEMM that the next layer waits for (on a GPU the two then
  // share the SMs, and neither leaves them idle at its tail).
  //   BeginSideLane: ops the calling thread queues from now on go to the side
  //     lane, and start only after everything queued on the main lane so far.
  //   EndSideLane: back to the main lane; nothing waits.
  //   JoinSideLane: the main lane waits for all side-lane work queued so far
  //     (free when there is none). Host copies, Synchronize and Mark join
  //     first, so the host never sees side-lane work half done.
  // Memory the side lane reads or writes must stay alive until the join (see
  // Note [Stream-ordered reuse] in core/cuda/caching_allocator.h). The CPU
  // runs every op at once, in call order, so there these do nothing.
  virtual void BeginSideLane() {}
  virtual void EndSideLane() {}
  virtual void JoinSideLane() {}

  // GEMMs queued from now on are planned for `multiprocessors` fewer
  // multiprocessors than the device has, because other kernels (an
  // all-reduce) hold that many beside them; 0 plans for the whole device
  // again. A GEMM planned for every SM, with some of them taken, runs a
  // straggling extra wave. Per device, for every thread. Nothing on the CPU.
  virtual void SetGemmReserve(int multiprocessors) { (void)multiprocessors; }

  // C[m, n] = alpha * op(A) * op(B) + beta * C, where op(A) is [m, k] and
  // op(B) is [k, n]; A is stored [m, k] or, transposed, [k, m].
  virtual void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n,
                    int64_t k, float alpha, const float* a, const float* b,
                    float beta, float* c) = 0;
  // D[m, n] = act(alpha op(A) op(B) + beta C + bias): Gemm with the result
  // in its own buffer (c may equal d; c is not read when beta is 0) and an
  // optional bias and activation. The default runs a copy, Gemm and
  // BiasActivation; the CUDA backend does it in one cuBLASLt call where it
  // can (ReLU or no activation), so the result is written once.
  virtual void GemmEx(bool trans_a, bool trans_b, int64_t m, int64_t n,
                      int64_t k, float alpha, const float* a, const float* b,
                      float beta, const float* c, float* d,
                      const GemmEpilogue& epilogue);
  // pre[r, c] = x[r, c] + bias[c] (skipped when pre is null) and
  // out[r, c] = act(x[r, c] + bias[c]), in one pass; x may equal pre or out.
  virtual void BiasActivation(Activation activation, const float* x,
                              const float* bias, float* pre, float* out,
                              int64_t rows, int64_t cols) = 0;
  // out[c] = beta * out[c] + alpha * sum_r x[r, c].
  virtual void ColumnSums(const float* x, int64_t rows, int64_t cols,
                          float alpha, float beta, float* out) = 0;
  virtual void Binary(BinaryOp op, const float* a, const float* b, float* out,
                      int64_t n) = 0;
  // y += alpha * x.
  virtual void Axpy(float alpha, const float* x, float* y, int64_t n) = 0;
  virtual void Scale(float alpha, float* x, int64_t n) = 0;
  virtual void Fill(float value, float* x, int64_t n) = 0;
  virtual void ActivationForward(Activation activation, const float* x,
                                 float* y, int64_t n) = 0;
  // dx = dy * act'(x) when accumulate is false, dx += dy * act'(x) otherwise.
  virtual void ActivationBackward(Activation activation, const float* x,
                                  const float* dy, float* dx, int64_t n,
                                  bool accumulate) = 0;
  // loss[0] = sum_r -log softmax(logits[r])[labels[r]] / normalizer;
  // dlogits (if not null) = (softmax - onehot) / normalizer. Labels are class
  // indices stored as floats.
  virtual void SoftmaxCrossEntropy(const float* logits, const float* labels,
                                   int64_t rows, int64_t classes,
                                   float normalizer, float* loss,
                                   float* dlogits) = 0;
  // loss[0] = sum (pred - target)^2 / normalizer;
  // dpred (if not null) = 2 (pred - target) / normalizer.
  virtual void Mse(const float* pred, const float* target, int64_t n,
                   float normalizer, float* loss, float* dpred) = 0;
  // out[r] = index of the first maximum of x[r, :].
  virtual void Argmax(const float* x, int64_t rows, int64_t cols,
                      float* out) = 0;
  // out[0] = number of rows whose argmax equals the label.
  virtual void CountCorrect(const float* logits, const float* labels,
                            int64_t rows, int64_t classes, float* out) = 0;
  // mask[i] = 0 with probability p, else 1 / (1 - p); bits from
  // HashU64(seed, offset + i), so CPU and CUDA draw the same mask.
  virtual void DropoutMask(float p, uint64_t seed, uint64_t offset,
                           float* mask, int64_t n) = 0;
  // If loss[0] is NaN or infinite and first_bad[0] < 0, sets first_bad[0] =
  // step: a sticky record of the first non-finite loss that the host reads
  // only now and then, so checking costs no synchronisation per step.
  virtual void TrackNonFinite(const float* loss, int64_t step,
                              float* first_bad) = 0;
  // Parameter updates, in one pass over a (possibly flat) buffer. velocity
  // may be null when momentum is 0.
  virtual void SgdUpdate(const SgdParams& params, float* param,
                         const float* grad, float* velocity, int64_t n) = 0;
  // `step` counts from 1 (bias correction).
  virtual void AdamWUpdate(const AdamWParams& params, int64_t step,
                           float* param, const float* grad, float* m,
                           float* v, int64_t n) = 0;
};

}  // namespace tandem

#endif  // TANDEM_CORE_BACKEND_H_
