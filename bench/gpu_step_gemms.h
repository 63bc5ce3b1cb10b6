// The GEMMs alone, for bench/gpu_step_bench.cc: a model's GEMMs timed one
// by one at the shapes its step issues them, and what a step is compared
// with (the square GEMM rate of each precision, at once and sustained, and
// the device-to-device copy bandwidth), printed as "gemm ..." and "copy ..."
// rows.
//
//   using namespace tandem::bench_step;
//   GemmTimer timer(o);  // times each shape once
//   const References refs = MeasureReferences(o, timer, results);
//   const GemmSum gemms = ModelGemms(LargeModel(), 4096, o.precision, timer, results);
//   bench::Row row;
//   AddRateShares(row, step_tflops, o.precision, refs);  // pct_gemm, ...
//   PrintReferenceSummary(o, refs);  // the closing "gemm 8192^3 ..." lines
#ifndef TANDEM_BENCH_GPU_STEP_GEMMS_H_
#define TANDEM_BENCH_GPU_STEP_GEMMS_H_

#include <cstdint>
#include <map>
#include <tuple>

#include "bench/bench_util.h"
#include "bench/gpu_step_common.h"
#include "core/rng.h"
#include "layers/precision.h"

namespace tandem {
namespace bench_step {

struct GemmShape {
  int64_t m, n, k;
  bool trans_a, trans_b;
  float beta;
  // fp32, tf32 (float32 operands on TF32 tensor cores) or bf16 (bfloat16
  // operands, float32 accumulation; out_f32: a float32 result, as a
  // weight-gradient GEMM writes).
  Precision precision = Precision::kFp32;
  bool out_f32 = false;
  bool operator<(const GemmShape& o) const {
    return std::tie(m, n, k, trans_a, trans_b, beta, precision, out_f32) <
           std::tie(o.m, o.n, o.k, o.trans_a, o.trans_b, o.beta, o.precision, o.out_f32);
  }
};

// Median time of one ops::Gemm of a shape on the main lane, in runs of
// about 20 ms; each shape is timed once.
class GemmTimer {
 public:
  explicit GemmTimer(const Options& o) : options_(o), rng_(o.seed + 7) {}

  double Ms(const GemmShape& s);

 private:
  const Options& options_;
  Rng rng_;
  std::map<GemmShape, double> cache_;
};

struct GemmSum {
  double all_ms = 0;  // every GEMM the step issues
};

// The GEMMs of each Linear layer, as layers/linear.cc issues them:
//   forward  y[B,out]  = x[B,in] W[out,in]^T
//   dW       dW[out,in] += dz[B,out]^T x[B,in]        (beta 1: accumulates;
//            from a transposed copy of dz where the backend wants one)
//   dx       dx[B,in]  = dz[B,out] W[out,in]          (not for the first
//            layer: its input is data, BackwardArgs::input_grad is false)
GemmSum ModelGemms(const ModelSpec& spec, int64_t batch, Precision spec_precision,
                   GemmTimer& timer, bench::ResultPrinter& results);

// The 8192^3 GEMM rates of this run, per precision (0: not measured).
struct GemmRates {
  double fp32 = 0, tf32 = 0, bf16 = 0;
  double For(Precision p) const {
    return p == Precision::kBf16 ? bf16 : p == Precision::kTf32 ? tf32 : fp32;
  }
  void Set(Precision p, double tflops) {
    (p == Precision::kBf16 ? bf16 : p == Precision::kTf32 ? tf32 : fp32) = tflops;
  }
};

// What a step is compared with: the square GEMM rates at once and
// sustained, and the device-to-device copy bandwidth (0: not measured).
struct References {
  GemmRates rates, sustained;
  double copy_gbps = 0;
};

// The square GEMM rate of every precision (at once; the run's own precision
// also sustained) and the device-to-device copy bandwidth, printed as
// "gemm" and "copy" rows.
References MeasureReferences(const Options& o, GemmTimer& timer, bench::ResultPrinter& results);

// A step's share of each reference rate measured: pct_sgemm (float32),
// pct_gemm (its precision's), pct_gemm_sustained.
void AddRateShares(bench::Row& row, double step_tflops, Precision precision,
                   const References& refs);

// The closing summary lines on std::cout: the square GEMM rates and the copy
// bandwidth, and (when o.sustain_ms > 0) --precision's sustained rate.
void PrintReferenceSummary(const Options& o, const References& refs);

}  // namespace bench_step
}  // namespace tandem

#endif  // TANDEM_BENCH_GPU_STEP_GEMMS_H_
