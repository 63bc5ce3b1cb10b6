// The backend op set: what every device must implement, on raw pointers.
//
// One Backend instance per device is that device's execution context: it owns
// the allocator, the device's lanes (core/lane.h) and, on CUDA, the cuBLAS
// handles and pinned staging buffers. Every op names the lane it runs on;
// the CPU backend runs ops at once, the CUDA backend queues them on the
// lane's stream. Shape checks happen one level up, in core/ops.h, so
// backends only compute.
//
// Layout: row-major, contiguous. Operands are CPtr/Ptr (memory and dtype,
// core/dtype.h) of this backend's device; raw float pointers are float32;
// a name with "host" is host memory. A backend that cannot run an op on a
// dtype throws, naming the op and the dtype.
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

// The element-wise functions of Backend::Unary (core/ops_math.h): exp,
// natural log, square root, 1 / sqrt(x) and 1 / x, in float32.
enum class UnaryOp { kExp, kLog, kSqrt, kRsqrt, kReciprocal };

// How a vector v is laid against a matrix x [rows, cols] in the broadcast
// ops (core/ops_math.h), as numpy broadcasts v[None, :] and v[:, None]:
enum class Broadcast {
  kRow,     // v is [cols], one row for every row: out[r, c] = x[r, c] op v[c]
  kColumn,  // v is [rows], one column for every column: out[r, c] = x[r, c] op v[r]
};

// What Backend::RowReduce makes of each row of x [rows, cols].
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

// Backend::Permute's reordering: x is [in_shape[0], ..., in_shape[rank - 1]]
// (contiguous), and dimension i of out is dimension perm[i] of x, as numpy's
// transpose(x, perm). Passed by value to GPU kernels.
struct PermuteSpec {
  static constexpr int kMaxRank = 6;
  int rank = 0;
  int64_t in_shape[kMaxRank] = {};
  int perm[kMaxRank] = {};
};

// What Backend::Gemm does besides the product, for one call.
struct GemmSpec {
  CPtr bias;  // [n], added to every row; data null: none
  Activation activation = Activation::kIdentity;  // applied last
  // float32 operands: let the GEMM use TF32 tensor cores (10-bit mantissa
  // inputs, float32 accumulation). bfloat16 operands always accumulate in
  // float32.
  bool tf32 = false;
};

// The batch of Backend::BatchedGemm: `count` products, the b-th reading A
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

  // D[m, n] = act(alpha op(A) op(B) + beta C + bias), where op(A) is [m, k]
  // and op(B) is [k, n]; A is stored [m, k] or, transposed, [k, m]. C may be
  // D (in place) and is not read when beta is 0. A and B share a dtype, C
  // and D share one (float32 or bfloat16, accumulation in float32 either
  // way). The CPU backend computes in float32 and rounds the result once;
  // the CUDA backend calls cuBLAS or cuBLASLt (bias and ReLU in the
  // epilogue).
  virtual void Gemm(const Lane& lane, bool trans_a, bool trans_b, int64_t m,
                    int64_t n, int64_t k, float alpha, CPtr a, CPtr b,
                    float beta, CPtr c, Ptr d, const GemmSpec& spec) = 0;
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
  // pre[r, c] = x[r, c] + bias[c] (skipped when pre.data is null) and
  // out[r, c] = act(x[r, c] + bias[c]), in one pass; x may equal pre or out.
  virtual void BiasActivation(const Lane& lane, Activation activation, CPtr x,
                              CPtr bias, Ptr pre, Ptr out, int64_t rows,
                              int64_t cols) = 0;
  // out[c] = beta * out[c] + alpha * sum_r x[r, c], summed in float32.
  virtual void ColumnSums(const Lane& lane, CPtr x, int64_t rows, int64_t cols,
                          float alpha, float beta, Ptr out) = 0;
  // out = a op b, element-wise (kDiv: an IEEE division); a, b and out of
  // one dtype; out may be a or b.
  virtual void Binary(const Lane& lane, BinaryOp op, CPtr a, CPtr b, Ptr out,
                      int64_t n) = 0;
  // y += alpha * x.
  virtual void Axpy(const Lane& lane, float alpha, CPtr x, Ptr y, int64_t n) = 0;
  virtual void Scale(const Lane& lane, float alpha, Ptr x, int64_t n) = 0;
  virtual void Fill(const Lane& lane, float value, Ptr x, int64_t n) = 0;
  // dst = src converted to dst's dtype (rounded to nearest even).
  virtual void Cast(const Lane& lane, CPtr src, Ptr dst, int64_t n) = 0;
  virtual void ActivationForward(const Lane& lane, Activation activation, CPtr x,
                                 Ptr y, int64_t n) = 0;
  // dx = dy * act'(x) when accumulate is false, dx += dy * act'(x) otherwise.
  virtual void ActivationBackward(const Lane& lane, Activation activation,
                                  CPtr x, CPtr dy, Ptr dx, int64_t n,
                                  bool accumulate) = 0;
  // dz = dy * act'(x) and sums[c] = beta * sums[c] + sum_r dz[r, c] (dz as
  // stored), over [rows, cols]: ActivationBackward then ColumnSums, which a
  // backend may do in one pass (the CUDA backend does) with the same results.
  virtual void ActivationBackwardColumnSums(const Lane& lane, Activation activation, CPtr x,
                                            CPtr dy, Ptr dz, int64_t rows, int64_t cols,
                                            float beta, Ptr sums) {
    ActivationBackward(lane, activation, x, dy, dz, rows * cols, false);
    ColumnSums(lane, dz, rows, cols, 1.f, beta, sums);
  }
  // loss[0] = sum_r -log softmax(logits[r])[labels[r]] / normalizer;
  // dlogits (if data is not null) = (softmax - onehot) / normalizer. Labels
  // are class indices stored as floats; loss and softmax in float32.
  virtual void SoftmaxCrossEntropy(const Lane& lane, CPtr logits,
                                   const float* labels, int64_t rows,
                                   int64_t classes, float normalizer,
                                   float* loss, Ptr dlogits) = 0;
  // loss[0] = sum (pred - target)^2 / normalizer;
  // dpred (if data is not null) = 2 (pred - target) / normalizer.
  virtual void Mse(const Lane& lane, CPtr pred, CPtr target, int64_t n,
                   float normalizer, float* loss, Ptr dpred) = 0;
  // out[r] = index of the first maximum of x[r, :].
  virtual void Argmax(const Lane& lane, CPtr x, int64_t rows, int64_t cols,
                      float* out) = 0;
  // out[0] = number of rows whose argmax equals the label.
  virtual void CountCorrect(const Lane& lane, CPtr logits, const float* labels,
                            int64_t rows, int64_t classes, float* out) = 0;
  // mask[i] = 0 with probability p, else 1 / (1 - p); bits from
  // HashU64(seed, offset + i), so CPU and CUDA draw the same mask.
  virtual void DropoutMask(const Lane& lane, float p, uint64_t seed,
                           uint64_t offset, Ptr mask, int64_t n) = 0;
  // If loss[0] is NaN or infinite and first_bad[0] < 0, sets first_bad[0] =
  // step: a sticky record of the first non-finite loss that the host reads
  // only now and then, so checking costs no synchronisation per step.
  virtual void TrackNonFinite(const Lane& lane, const float* loss, int64_t step,
                              float* first_bad) = 0;
  // Parameter updates, in one pass over a (possibly flat) float32 buffer,
  // from a float32 or bfloat16 gradient. velocity may be null when momentum
  // is 0. `working` (data null: none) receives the updated parameters in its
  // dtype in the same pass: the bfloat16 copy that mixed-precision layers
  // compute with.
  virtual void SgdUpdate(const Lane& lane, const SgdParams& params,
                         float* param, CPtr grad, float* velocity, Ptr working,
                         int64_t n) = 0;
  // `step` counts from 1 (bias correction).
  virtual void AdamWUpdate(const Lane& lane, const AdamWParams& params,
                           int64_t step, float* param, CPtr grad, float* m,
                           float* v, Ptr working, int64_t n) = 0;

  // ---- The math for custom layers (core/ops_math.h) ----
  // Element-wise functions, broadcasts, row reductions, softmax, transpose
  // and row gather/scatter. Arithmetic in float32, each result rounded once
  // into its operand's dtype; sums keep float32 accumulators. Each queues
  // on `lane` only, with no scratch memory and no host wait, so any lane
  // may run it.

  // out = op(x), element-wise; x and out of one dtype; out may be x.
  virtual void Unary(const Lane& lane, UnaryOp op, CPtr x, Ptr out, int64_t n) = 0;
  // out = x op s, element-wise (kMul: x * s); x and out of one dtype; out
  // may be x.
  virtual void BinaryScalar(const Lane& lane, BinaryOp op, CPtr x, float s, Ptr out,
                            int64_t n) = 0;
  // out[r, c] = x[r, c] op v[c] (Broadcast::kRow) or x[r, c] op v[r]
  // (Broadcast::kColumn); x, v and out of one dtype; out may be x, not v.
  virtual void BroadcastBinary(const Lane& lane, BinaryOp op, Broadcast how, CPtr x,
                               CPtr v, Ptr out, int64_t rows, int64_t cols) = 0;
  // out[r] = the reduction of x[r, :] (cols > 0): the sum, the mean, the
  // maximum (NaN if the row holds a NaN; kernel_math::MaxOrNan) or the
  // population variance (mean of squared deviations from the mean, two
  // passes). float32 accumulators; x and out each of either dtype.
  virtual void RowReduce(const Lane& lane, RowReduction op, CPtr x, int64_t rows,
                         int64_t cols, Ptr out) = 0;
  // out[r, :] = softmax(x[r, :]) = exp(x - max) / sum exp(x - max), in
  // float32 (cols > 0); x and out of one dtype; out may be x.
  virtual void Softmax(const Lane& lane, CPtr x, Ptr out, int64_t rows, int64_t cols) = 0;
  // out [cols, rows] = x [rows, cols] transposed; one dtype; no overlap.
  virtual void Transpose(const Lane& lane, CPtr x, Ptr out, int64_t rows,
                         int64_t cols) = 0;
  // out[i, :] = table[indices[i], :] for i < n; table [table_rows, cols] and
  // out [n, cols] of one dtype; indices float32 whole numbers. The CPU
  // throws for an index that is not a row of the table, before writing
  // anything; a GPU fills that row of out with NaN.
  virtual void GatherRows(const Lane& lane, CPtr table, int64_t table_rows,
                          const float* indices, int64_t n, int64_t cols, Ptr out) = 0;
  // table[indices[i], :] += src[i, :] for i < n, each table row summed in
  // float32 in the order of i (table row first) and rounded once:
  // deterministic, the same bits on both backends. src [n, cols] and table
  // [table_rows, cols] each of either dtype. The CPU throws for a bad index
  // before writing anything; a GPU skips that position.
  virtual void ScatterAddRows(const Lane& lane, CPtr src, const float* indices, int64_t n,
                              int64_t cols, Ptr table, int64_t table_rows) = 0;

  // ---- Layer normalisation (core/ops_layer_norm.h) ----
  // Per row of x [rows, cols] (cols > 0): mean[r] and the population
  // variance var[r] of x[r, :] in float32 (two passes), rstd[r] = 1 /
  // sqrt(var[r] + eps), and y[r, c] = (x[r, c] - mean[r]) * rstd[r] *
  // weight[c] + bias[c], rounded once. x, weight [cols], bias [cols] and y
  // of one dtype; mean and rstd float32 [rows]; y apart from x. Queued on
  // `lane` only, no scratch memory, no host wait.
  virtual void LayerNormForward(const Lane& lane, CPtr x, CPtr weight, CPtr bias, float eps,
                                int64_t rows, int64_t cols, Ptr y, float* mean,
                                float* rstd) = 0;
  // The gradients of LayerNormForward from dy [rows, cols], with xhat =
  // (x - mean) rstd and g = dy * weight: dx[r, :] = rstd[r] (g - mean(g) -
  // xhat mean(g xhat)), written (skipped when dx.data is null);
  // dweight[c] += sum_r dy xhat and dbias[c] += sum_r dy, float32 [cols],
  // added (each skipped when null). x, dy, weight and dx of one dtype; sums
  // in float32, in an order fixed by the shape. Queued on `lane` only.
  virtual void LayerNormBackward(const Lane& lane, CPtr x, CPtr dy, CPtr weight,
                                 const float* mean, const float* rstd, int64_t rows,
                                 int64_t cols, Ptr dx, float* dweight, float* dbias) = 0;

  // ---- Attention (core/ops_attention.h) ----
  // For each product b of `batch`: C[b] = alpha op(A[b]) op(B[b]) + beta
  // C[b], shapes and transposes as Gemm's (op(A[b]) [m, k], op(B[b]) [k, n],
  // C[b] [m, n]); C is read only when beta is not 0. A and B share a dtype;
  // C float32, or bfloat16 beside bfloat16 operands; float32 accumulation,
  // the result rounded once, except on CUDA for a bfloat16 C with beta != 0,
  // where cuBLAS may add partial products into C in bfloat16, whatever the
  // handle's math mode, and the result may be a few units in its last place
  // off; pass a float32 C where that matters.
  // `tf32`: float32 operands may use TF32 tensor cores (as GemmSpec::tf32).
  // C overlaps neither A nor B.
  virtual void BatchedGemm(const Lane& lane, bool trans_a, bool trans_b, int64_t m, int64_t n,
                           int64_t k, float alpha, CPtr a, CPtr b, float beta, Ptr c,
                           const GemmBatch& batch, bool tf32) = 0;
  // Over `batch` matrices [t, t] of x (t > 0), row i of each seeing only its
  // columns j <= i: out[i, j] = exp(scale x[i, j] - max) / sum over j' <= i,
  // with max the maximum of scale x[i, j'] over j' <= i, and out[i, j] = 0
  // exactly for j > i. float32 arithmetic; x and out of one dtype; out may
  // be x.
  virtual void CausalSoftmax(const Lane& lane, CPtr x, Ptr out, int64_t batch, int64_t t,
                             float scale) = 0;
  // The gradient of CausalSoftmax from its output y and dy (same layout):
  // dx[i, j] = scale y[i, j] (dy[i, j] - sum over j' <= i of dy[i, j']
  // y[i, j']) for j <= i, 0 exactly for j > i. One dtype; dx may be dy or y.
  virtual void CausalSoftmaxBackward(const Lane& lane, CPtr y, CPtr dy, Ptr dx, int64_t batch,
                                     int64_t t, float scale) = 0;
  // out[b] [cols, rows] = x[b] [rows, cols] transposed, for each of `batch`
  // matrices; one dtype; no overlap.
  virtual void TransposeBatched(const Lane& lane, CPtr x, Ptr out, int64_t batch, int64_t rows,
                                int64_t cols) = 0;
  // out = x with its dimensions reordered (PermuteSpec); one dtype; no
  // overlap; every dimension of at least 1 element.
  virtual void Permute(const Lane& lane, CPtr x, Ptr out, const PermuteSpec& spec) = 0;
  // out[i] = fill (in out's dtype) where mask[i % mask_n] is not 0, else
  // x[i], for i < n; x and out of one dtype; out may be x, not mask.
  virtual void MaskedFill(const Lane& lane, CPtr x, const float* mask, int64_t n, int64_t mask_n,
                          float fill, Ptr out) = 0;
};

}  // namespace tandem

#endif  // TANDEM_CORE_BACKEND_H_
