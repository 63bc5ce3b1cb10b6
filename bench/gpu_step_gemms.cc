#include "bench/gpu_step_gemms.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>

#include "core/backend_registry.h"
#include "core/dtype.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace tandem {
namespace bench_step {
namespace {

Tensor InDType(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor cast = Tensor::Empty(t.shape(), t.device(), dtype);
  ops::Cast(t, cast);
  return cast;
}

// Median time of one ops::Gemm of `shape` on the main lane, in runs of
// about `run_ms`, after `load_ms` of the same GEMM back to back (0: none;
// with it, the rate the GPU keeps up under load, as during the timed steps).
double TimeGemmMs(const GemmShape& s, const Options& o, Rng& rng, double load_ms = 0,
                  double run_ms = 20) {
  const DType in = s.precision == Precision::kBf16 ? DType::kBFloat16 : DType::kFloat32;
  const DType out = s.out_f32 ? DType::kFloat32 : in;
  Tensor a = InDType(RandomTensor(s.trans_a ? Shape{s.k, s.m} : Shape{s.m, s.k}, rng), in);
  Tensor b = InDType(RandomTensor(s.trans_b ? Shape{s.n, s.k} : Shape{s.k, s.n}, rng), in);
  Tensor c = InDType(RandomTensor({s.m, s.n}, rng), out);
  ops::GemmOptions options;
  options.beta = s.beta;
  options.tf32 = s.precision == Precision::kTf32;
  auto gemm = [&](int) { ops::Gemm(a, s.trans_a, b, s.trans_b, c, options); };
  int k = 0;
  // Also the warm-up.
  const double one_ms = std::max(TimeSteps(3, 1, k, gemm).gpu_ms, 1e-3);
  if (load_ms > 0) TimeSteps(static_cast<int>(std::ceil(load_ms / one_ms)), 1, k, gemm);
  const int iters = static_cast<int>(std::clamp(run_ms / one_ms, 3.0, 100 * run_ms));
  return TimeSteps(iters, o.repeats, k, gemm).gpu_ms;
}

// The memory ceiling: a device-to-device copy of `bytes`, counting bytes
// read plus bytes written.
double CopyGBps(int64_t bytes, const Options& o) {
  const int64_t n = bytes / 4;
  Tensor src = Tensor::Empty({n}, kDevice), dst = Tensor::Empty({n}, kDevice);
  ops::Fill(src, 1.f);
  int k = 0;
  const double ms = TimeSteps(10, o.repeats, k, [&](int) { dst.CopyFrom(src); }).gpu_ms;
  return 2.0 * static_cast<double>(n) * 4 / (ms * 1e-3) / 1e9;
}

// The square GEMM rate of the run's precision after o.sustain_ms of load,
// timed in runs of about 200 ms, as a "gemm" row named "..._sustained".
void MeasureSustainedRate(const Options& o, bench::ResultPrinter& results, GemmRates& rates) {
  Rng rng(o.seed + 11);
  const int64_t s = o.sgemm_size;
  const Precision p = o.precision;
  const double ms = TimeGemmMs({s, s, s, false, false, 0.f, p, false}, o, rng, o.sustain_ms, 200);
  const double tflops = Tflops(2.0 * s * s * s, ms);
  rates.Set(p, tflops);
  bench::Row row("gemm");
  row.Add("bench", "gpu_step")
      .Add("name", std::string(PrecisionName(p)) + "_gemm_" + std::to_string(s) + "_sustained")
      .Add("m", s).Add("n", s).Add("k", s).Add("precision", PrecisionName(p))
      .Add("sustain_ms", o.sustain_ms, 0).Add("ms", ms, 4).Add("tflops", tflops, 2);
  results.Print(row);
}

}  // namespace

double GemmTimer::Ms(const GemmShape& s) {
  auto it = cache_.find(s);
  if (it != cache_.end()) return it->second;
  const double ms = TimeGemmMs(s, options_, rng_);
  cache_[s] = ms;
  return ms;
}

GemmSum ModelGemms(const ModelSpec& spec, int64_t batch, Precision spec_precision,
                   GemmTimer& timer, bench::ResultPrinter& results) {
  GemmSum sum;
  // dW reads dz^T from a transposed copy where the backend wants one, as the
  // step does (Backend::GemmWantsATransposed); the copy's pass is not timed.
  const bool dz_copy = GetBackend(kDevice).GemmWantsATransposed(
      spec_precision == Precision::kBf16 ? DType::kBFloat16 : DType::kFloat32,
      spec_precision == Precision::kTf32);
  for (size_t l = 0; l + 1 < spec.sizes.size(); ++l) {
    const int64_t in = spec.sizes[l], outf = spec.sizes[l + 1];
    const struct {
      const char* kind;
      GemmShape shape;
    } gemms[] = {
        {"fwd", {batch, outf, in, false, true, 0.f, spec_precision, false}},
        {"dW", {outf, in, batch, !dz_copy, false, 1.f, spec_precision, true}},
        {"dx", {batch, in, outf, false, false, 0.f, spec_precision, false}},
    };
    for (const auto& g : gemms) {
      if (l == 0 && std::string(g.kind) == "dx") continue;
      const double ms = timer.Ms(g.shape);
      sum.all_ms += ms;
      bench::Row row("gemm");
      row.Add("bench", "gpu_step").Add("model", spec.name).Add("batch", batch)
          .Add("layer", "fc" + std::to_string(l + 1)).Add("kind", g.kind)
          .Add("m", g.shape.m).Add("n", g.shape.n).Add("k", g.shape.k)
          .Add("ms", ms, 4)
          .Add("tflops", Tflops(2.0 * g.shape.m * g.shape.n * g.shape.k, ms), 2);
      results.Print(row);
    }
  }
  return sum;
}

References MeasureReferences(const Options& o, GemmTimer& timer, bench::ResultPrinter& results) {
  References refs;
  const int64_t s = o.sgemm_size;
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16}) {
    Cool(o);
    const double ms = timer.Ms({s, s, s, false, false, 0.f, p, false});
    const double tflops = Tflops(2.0 * s * s * s, ms);
    refs.rates.Set(p, tflops);
    bench::Row row("gemm");
    // "sgemm_8192" as before for float32, "tf32_gemm_8192", "bf16_gemm_8192".
    const std::string name = p == Precision::kFp32 ? std::string("sgemm_")
                                                    : std::string(PrecisionName(p)) + "_gemm_";
    row.Add("bench", "gpu_step").Add("name", name + std::to_string(s))
        .Add("m", s).Add("n", s).Add("k", s).Add("precision", PrecisionName(p))
        .Add("ms", ms, 4).Add("tflops", tflops, 2);
    results.Print(row);
  }
  if (o.sustain_ms > 0) MeasureSustainedRate(o, results, refs.sustained);
  const int64_t copy_bytes = int64_t{1} << 30;
  refs.copy_gbps = CopyGBps(copy_bytes, o);
  bench::Row copy("copy");
  copy.Add("bench", "gpu_step").Add("name", "d2d_1GiB").Add("bytes", copy_bytes)
      .Add("GBps_read_plus_write", refs.copy_gbps, 0);
  results.Print(copy);
  return refs;
}

void AddRateShares(bench::Row& row, double step_tflops, Precision precision,
                   const References& refs) {
  const GemmRates& rates = refs.rates;
  if (rates.fp32 > 0) {
    row.Add("sgemm_tflops", rates.fp32, 2).Add("pct_sgemm", 100.0 * step_tflops / rates.fp32, 1);
  }
  const double ref = rates.For(precision);
  if (ref > 0) row.Add("gemm_tflops", ref, 2).Add("pct_gemm", 100.0 * step_tflops / ref, 1);
  const double kept = refs.sustained.For(precision);
  if (kept > 0) {
    row.Add("gemm_sustained_tflops", kept, 2)
        .Add("pct_gemm_sustained", 100.0 * step_tflops / kept, 1);
  }
}

void PrintReferenceSummary(const Options& o, const References& refs) {
  const GemmRates& rates = refs.rates;
  std::cout << "gemm " << o.sgemm_size << "^3 TFLOP/s: fp32 " << bench::Fixed(rates.fp32, 2)
            << ", tf32 " << bench::Fixed(rates.tf32, 2) << ", bf16 "
            << bench::Fixed(rates.bf16, 2) << "; device-to-device copy "
            << bench::Fixed(refs.copy_gbps, 0) << " GB/s (read + write)\n";
  if (o.sustain_ms > 0) {
    std::cout << "gemm " << o.sgemm_size << "^3 TFLOP/s in " << PrecisionName(o.precision)
              << " after " << bench::Fixed(o.sustain_ms, 0) << " ms of load: "
              << bench::Fixed(refs.sustained.For(o.precision), 2) << "\n";
  }
}

}  // namespace bench_step
}  // namespace tandem
