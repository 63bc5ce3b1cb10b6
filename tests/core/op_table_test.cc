// The op table (core/op_table.h) and its dispatcher (core/dispatch.h):
// every op of the table has a CPU-vs-CUDA case here, each case really runs
// its op on both devices, and the table's rules (one dtype, aliasing) are
// enforced at every call, naming the op.
//
// The cases run the op through its public wrapper on random float32 data,
// on CPU tensors and on cuda:0 copies, and compare every tensor afterwards
// (relative error of the norm, 1e-5; the bit-level and bfloat16 comparisons
// live in ops_parity_test). Without a GPU they skip, saying why; the checks
// of the table itself run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/backend_registry.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace tandem {
namespace {

// The tensors of one case, CPU or GPU copies, and what to do with them.
using Tensors = std::vector<Tensor>;
using Run = std::function<void(Tensors&)>;
struct ParityCase {
  std::function<Tensors(Rng&)> make;  // CPU tensors
  Run run;
};

Tensor Random(const Shape& shape, Rng& rng, float scale = 1.f) {
  std::vector<float> v(NumElements(shape));
  for (float& x : v) x = rng.Normal(0.f, scale);
  return Tensor::FromVector(v, shape);
}

// Whole numbers in [0, bound), as float32 indices and labels are.
Tensor Indices(int64_t n, int64_t bound, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.UniformInt(bound));
  return Tensor::FromVector(v, {n});
}

Tensor Positive(const Shape& shape, Rng& rng) {
  std::vector<float> v(NumElements(shape));
  for (float& x : v) x = 0.5f + std::abs(rng.Normal(0.f, 1.f));
  return Tensor::FromVector(v, shape);
}

constexpr int64_t kR = 37, kC = 29;  // odd sizes: the GPU kernels' scalar tails run

// One case per op of the table, by the op's name.
const std::map<std::string, ParityCase>& Cases() {
  static const auto* cases = new std::map<std::string, ParityCase>{
      {"Gemm",
       {[](Rng& r) { return Tensors{Random({kR, 19}, r), Random({kC, 19}, r), Random({kR, kC}, r)}; },
        [](Tensors& t) { ops::Gemm(t[0], false, t[1], true, t[2], 0.7f, 0.3f); }}},
      {"BiasActivation",
       {[](Rng& r) {
          return Tensors{Random({kR, kC}, r), Random({kC}, r), Tensor::Zeros({kR, kC}),
                         Tensor::Zeros({kR, kC})};
        },
        [](Tensors& t) { ops::BiasActivation(Activation::kGelu, t[0], t[1], &t[2], t[3]); }}},
      {"ColumnSums",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r), Random({kC}, r)}; },
        [](Tensors& t) { ops::ColumnSums(t[0], t[1], 0.5f); }}},
      {"ActivationForward",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r, 2.f), Tensor::Zeros({kR, kC})}; },
        [](Tensors& t) { ops::ActivationForward(Activation::kTanh, t[0], t[1]); }}},
      {"ActivationBackward",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r), Random({kR, kC}, r), Random({kR, kC}, r)}; },
        [](Tensors& t) {
          ops::ActivationBackward(Activation::kSilu, t[0], t[1], t[2], /*accumulate=*/true);
        }}},
      {"ActivationBackwardColumnSums",
       {[](Rng& r) {
          return Tensors{Random({kR, kC}, r), Random({kR, kC}, r), Tensor::Zeros({kR, kC}),
                         Random({kC}, r)};
        },
        [](Tensors& t) {
          ops::ActivationBackwardColumnSums(ops::MainLaneOf(t[0]), Activation::kRelu, t[0], t[1], t[2],
                                            t[3], 0.5f);
        }}},
      {"Binary",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r), Random({kR, kC}, r), Tensor::Zeros({kR, kC})}; },
        [](Tensors& t) { ops::Sub(t[0], t[1], t[2]); }}},
      {"Axpy",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r), Random({kR, kC}, r)}; },
        [](Tensors& t) { ops::Axpy(-0.5f, t[0], t[1]); }}},
      {"Scale",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r)}; },
        [](Tensors& t) { ops::Scale(t[0], 3.f); }}},
      {"Fill",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r)}; },
        [](Tensors& t) { ops::Fill(t[0], 1.25f); }}},
      {"Cast",
       {[](Rng& r) {
          return Tensors{Random({kR, kC}, r),
                         Tensor::Zeros({kR, kC}, Device::Cpu(), DType::kBFloat16)};
        },
        [](Tensors& t) { ops::Cast(t[0], t[1]); }}},
      {"SoftmaxCrossEntropy",
       {[](Rng& r) {
          return Tensors{Random({kR, 10}, r, 3.f), Indices(kR, 10, r), Tensor::Zeros({1}),
                         Tensor::Zeros({kR, 10})};
        },
        [](Tensors& t) { ops::SoftmaxCrossEntropy(t[0], t[1], t[2], &t[3]); }}},
      {"Mse",
       {[](Rng& r) {
          return Tensors{Random({kR, kC}, r), Random({kR, kC}, r), Tensor::Zeros({1}),
                         Tensor::Zeros({kR, kC})};
        },
        [](Tensors& t) { ops::Mse(t[0], t[1], t[2], &t[3]); }}},
      {"Argmax",
       {[](Rng& r) { return Tensors{Random({kR, 10}, r), Tensor::Zeros({kR})}; },
        [](Tensors& t) { ops::Argmax(t[0], t[1]); }}},
      {"CountCorrect",
       {[](Rng& r) { return Tensors{Random({kR, 10}, r), Indices(kR, 10, r), Tensor::Zeros({1})}; },
        [](Tensors& t) { ops::CountCorrect(t[0], t[1], t[2]); }}},
      {"DropoutMask",
       {[](Rng&) { return Tensors{Tensor::Zeros({kR, kC})}; },
        [](Tensors& t) { ops::DropoutMask(0.3f, 77, 123, t[0]); }}},
      {"TrackNonFinite",
       {[](Rng&) { return Tensors{Tensor::Full({1}, NAN), Tensor::Full({1}, -1.f)}; },
        [](Tensors& t) { ops::TrackNonFinite(t[0], 7, t[1]); }}},
      {"SgdUpdate",
       {[](Rng& r) { return Tensors{Random({kR * kC}, r), Random({kR * kC}, r), Random({kR * kC}, r)}; },
        [](Tensors& t) {
          SgdParams s;
          s.momentum = 0.9f;
          ops::SgdUpdate(s, t[0], t[1], &t[2]);
        }}},
      {"AdamWUpdate",
       {[](Rng& r) {
          return Tensors{Random({kR * kC}, r), Random({kR * kC}, r), Random({kR * kC}, r, 0.1f),
                         Positive({kR * kC}, r)};
        },
        [](Tensors& t) { ops::AdamWUpdate(AdamWParams{}, 3, t[0], t[1], t[2], t[3]); }}},
      {"Unary",
       {[](Rng& r) { return Tensors{Positive({kR, kC}, r), Tensor::Zeros({kR, kC})}; },
        [](Tensors& t) { ops::Log(t[0], t[1]); }}},
      {"BinaryScalar",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r), Tensor::Zeros({kR, kC})}; },
        [](Tensors& t) { ops::MulScalar(t[0], 1.5f, t[1]); }}},
      {"BroadcastBinary",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r), Random({kR}, r), Tensor::Zeros({kR, kC})}; },
        [](Tensors& t) { ops::BroadcastSub(t[0], t[1], Broadcast::kColumn, t[2]); }}},
      {"RowReduce",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r), Tensor::Zeros({kR})}; },
        [](Tensors& t) { ops::RowVariance(t[0], t[1]); }}},
      {"Softmax",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r, 3.f), Tensor::Zeros({kR, kC})}; },
        [](Tensors& t) { ops::Softmax(t[0], t[1]); }}},
      {"Transpose",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r), Tensor::Zeros({kC, kR})}; },
        [](Tensors& t) { ops::Transpose(t[0], t[1]); }}},
      {"GatherRows",
       {[](Rng& r) { return Tensors{Random({kR, kC}, r), Indices(11, kR, r), Tensor::Zeros({11, kC})}; },
        [](Tensors& t) { ops::GatherRows(t[0], t[1], t[2]); }}},
      {"ScatterAddRows",
       {[](Rng& r) { return Tensors{Random({11, kC}, r), Indices(11, kR, r), Random({kR, kC}, r)}; },
        [](Tensors& t) { ops::ScatterAddRows(t[0], t[1], t[2]); }}},
      {"LayerNormForward",
       {[](Rng& r) {
          return Tensors{Random({kR, kC}, r), Random({kC}, r), Random({kC}, r),
                         Tensor::Zeros({kR, kC}), Tensor::Zeros({kR}), Tensor::Zeros({kR})};
        },
        [](Tensors& t) {
          ops::LayerNormForward(ops::MainLaneOf(t[0]), t[0], t[1], t[2], 1e-5f, t[3], t[4], t[5]);
        }}},
      {"LayerNormBackward",
       {[](Rng& r) {
          return Tensors{Random({kR, kC}, r), Random({kR, kC}, r), Random({kC}, r),
                         Tensor::Zeros({kR}), Tensor::Zeros({kR}), Tensor::Zeros({kR, kC}),
                         Tensor::Zeros({kC}), Tensor::Zeros({kC})};
        },
        [](Tensors& t) {
          const Lane lane = ops::MainLaneOf(t[0]);
          Tensor y = Tensor::Zeros({kR, kC}, t[0].device());
          ops::LayerNormForward(lane, t[0], t[2], t[2], 1e-5f, y, t[3], t[4]);
          ops::LayerNormBackward(lane, t[0], t[1], t[2], t[3], t[4], &t[5], &t[6], &t[7]);
        }}},
      {"BatchedGemm",
       {[](Rng& r) { return Tensors{Random({3, 7, 19}, r), Random({3, 19, 5}, r), Random({3, 7, 5}, r)}; },
        [](Tensors& t) { ops::BatchedMatMul(t[0], false, t[1], false, t[2], 0.5f, 0.25f); }}},
      {"CausalSoftmax",
       {[](Rng& r) { return Tensors{Random({2, 3, 9, 9}, r, 2.f), Tensor::Zeros({2, 3, 9, 9})}; },
        [](Tensors& t) { ops::CausalSoftmax(t[0], 0.5f, t[1]); }}},
      {"CausalSoftmaxBackward",
       {[](Rng& r) {
          return Tensors{Random({2, 9, 9}, r), Random({2, 9, 9}, r), Tensor::Zeros({2, 9, 9})};
        },
        [](Tensors& t) {
          Tensor y = Tensor::Zeros({2, 9, 9}, t[0].device());
          ops::CausalSoftmax(t[0], 0.5f, y);
          ops::CausalSoftmaxBackward(y, t[1], 0.5f, t[2]);
        }}},
      {"TransposeBatched",
       {[](Rng& r) { return Tensors{Random({3, 5, 7}, r), Tensor::Zeros({3, 7, 5})}; },
        [](Tensors& t) { ops::TransposeLastTwo(t[0], t[1]); }}},
      {"Permute",
       {[](Rng& r) { return Tensors{Random({2, 3, 4, 5}, r), Tensor::Zeros({2, 4, 3, 5})}; },
        [](Tensors& t) { ops::Permute(t[0], {0, 2, 1, 3}, t[1]); }}},
      {"MaskedFill",
       {[](Rng& r) {
          return Tensors{Random({4, 6, 6}, r), Indices(36, 2, r).Reshape({6, 6}),
                         Tensor::Zeros({4, 6, 6})};
        },
        [](Tensors& t) { ops::MaskedFill(t[0], t[1], -3.f, t[2]); }}},
  };
  return *cases;
}

TEST(OpTableTest, EveryOpHasAParityCaseAndEveryCaseAnOp) {
  std::set<std::string> names;
  for (const OpInfo* op : OpTable()) {
    names.insert(op->name);
    EXPECT_EQ(Cases().count(op->name), 1u)
        << "op " << op->name << " of core/op_table.h has no CPU-vs-CUDA case here";
  }
  EXPECT_EQ(names.size(), OpTable().size()) << "an op name appears twice in the table";
  for (const auto& [name, unused] : Cases()) {
    EXPECT_EQ(names.count(name), 1u) << "case " << name << " names no op of the table";
  }
}

// The ops each device ran while a case ran.
std::mutex ran_mutex;
std::set<std::pair<std::string, bool>> ran;  // (op, on CUDA)
void Observe(const OpInfo& op, Device device) {
  std::lock_guard<std::mutex> lock(ran_mutex);
  ran.insert({op.name, device.is_cuda()});
}

double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

TEST(OpTableTest, EveryOpMatchesOnCpuAndCuda) {
  if (CudaDeviceCount() == 0) {
    GTEST_SKIP() << "CUDA-vs-CPU parity needs a GPU: " << CudaUnavailableReason();
  }
  op_table_internal::call_observer = &Observe;
  Rng rng(2026);
  for (const OpInfo* op : OpTable()) {
    SCOPED_TRACE(op->name);
    auto found = Cases().find(op->name);
    ASSERT_NE(found, Cases().end());
    Tensors cpu = found->second.make(rng);
    Tensors gpu;
    for (const Tensor& t : cpu) gpu.push_back(t.To(Device::Cuda(0)));
    {
      std::lock_guard<std::mutex> lock(ran_mutex);
      ran.clear();
    }
    found->second.run(cpu);
    found->second.run(gpu);
    {
      std::lock_guard<std::mutex> lock(ran_mutex);
      EXPECT_TRUE(ran.count({op->name, false})) << "the case did not run the op on the CPU";
      EXPECT_TRUE(ran.count({op->name, true})) << "the case did not run the op on the GPU";
    }
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_LE(RelativeError(gpu[i].ToVector(), cpu[i].ToVector()), 1e-5) << "tensor " << i;
    }
  }
  op_table_internal::call_observer = nullptr;
}

// The rules, on the CPU: the dispatcher refuses what the table forbids.
TEST(OpTableTest, DispatchEnforcesTheDTypeAndAliasingRules) {
  const Lane lane = MainLane(Device::Cpu());
  Tensor a = Tensor::Full({4}, 1.f), b = Tensor::Full({4}, 2.f);
  Tensor h = Tensor::Zeros({4}, Device::Cpu(), DType::kBFloat16);
  // Binary: one dtype.
  try {
    dispatch::Binary(lane, BinaryOp::kAdd, a.ptr(), h.ptr(), b.mutable_ptr(), 4);
    FAIL() << "a bfloat16 operand beside float32 ones was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("Binary: argument 3 is bfloat16"), std::string::npos)
        << e.what();
  }
  // Transpose: nothing in place.
  try {
    dispatch::Transpose(lane, a.ptr(), a.mutable_ptr(), 2, 2);
    FAIL() << "an in-place transpose was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("Transpose: argument 2 (written) is the memory of "
                                         "argument 1 (read)"),
              std::string::npos)
        << e.what();
  }
  // BroadcastBinary: in place over x, not over v.
  Tensor x = Tensor::Full({2, 2}, 1.f), v = Tensor::Full({2}, 3.f);
  dispatch::BroadcastBinary(lane, BinaryOp::kAdd, Broadcast::kRow, x.ptr(), v.ptr(),
                            x.mutable_ptr(), 2, 2);
  EXPECT_EQ(x.ToVector(), (std::vector<float>{4.f, 4.f, 4.f, 4.f}));
  EXPECT_THROW(dispatch::BroadcastBinary(lane, BinaryOp::kAdd, Broadcast::kRow, x.ptr(), v.ptr(),
                                         v.mutable_ptr(), 1, 2),
               std::exception);
  // Ops that allow aliasing run in place.
  dispatch::Binary(lane, BinaryOp::kMul, a.ptr(), b.ptr(), a.mutable_ptr(), 4);
  EXPECT_EQ(a.ToVector(), (std::vector<float>{2.f, 2.f, 2.f, 2.f}));
}

}  // namespace
}  // namespace tandem
