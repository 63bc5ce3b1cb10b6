// The GEMMs of dp_cpu_bench's training step alone, as its Linear layers issue
// them on the CPU: per layer the forward product x wᵀ, the weight gradient
// dzᵀ x and, but for the first layer, the input gradient dz w. Each is timed
// by itself through ops::Gemm, so the sum says how much of a step is GEMM
// arithmetic, and each product's rate whose kernels a step's time comes from
// (bench/torch_cpu_reference.py --gemms times torch.mm on the same products).
//
//   bazel build -c opt //bench:cpu_gemm_bench
//   taskset -c 0 bazel-bin/bench/cpu_gemm_bench --cpu_threads=1
//
// The products are timed in --rounds rounds, each taking every product in
// turn --reps times, so that a host whose speed drifts slows them alike.
// Prints a line per product and one for their sum:
//   gemm bench=cpu_gemms name=fc1.weight_grad m=1024 n=784 k=256 trans_a=1
//        trans_b=0 us=... gflops=...
//   result bench=cpu_gemms threads=1 batch=256 gemm_ms=... gflops=...
// us: the product's median over the rounds; gemm_ms: the sum of the medians;
// gflops: 2 m n k per product over its time (the sum's over gemm_ms).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "core/backend_registry.h"
#include "core/check.h"
#include "core/cpu/cpu_threads.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace tandem {
namespace {

// One product d = op(a) op(b) of the step, with its operands.
struct Product {
  std::string name;
  int64_t m, n, k;
  bool trans_a, trans_b;
  Tensor a, b, d;
};

// [rows, cols] filled with a small constant: the GEMM kernels' speed does not
// depend on the values.
Tensor Operand(int64_t rows, int64_t cols) { return Tensor::Full({rows, cols}, 0.01f); }

Product Make(const std::string& name, int64_t m, int64_t n, int64_t k, bool trans_a,
             bool trans_b) {
  return {name,
          m,
          n,
          k,
          trans_a,
          trans_b,
          trans_a ? Operand(k, m) : Operand(m, k),
          trans_b ? Operand(n, k) : Operand(k, n),
          Tensor::Zeros({m, n})};
}

// The step's products for layer sizes `sizes` ([inputs, hidden..., classes])
// at `batch` rows, as layers/linear.cc issues them.
std::vector<Product> StepProducts(const std::vector<int64_t>& sizes, int64_t batch) {
  std::vector<Product> products;
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    const int64_t in = sizes[l], out = sizes[l + 1];
    const std::string layer = "fc" + std::to_string(l + 1);
    products.push_back(Make(layer + ".forward", batch, out, in, false, true));  // x w^T
    products.push_back(Make(layer + ".weight_grad", out, in, batch, true, false));  // dz^T x
    if (l > 0) products.push_back(Make(layer + ".input_grad", batch, in, out, false, false));
  }
  return products;
}

// Seconds per call of `product`, over `reps` calls.
double TimeProduct(Product& p, int reps) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) ops::Gemm(p.a, p.trans_a, p.b, p.trans_b, p.d);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
}

double Flops(const Product& p) { return 2.0 * static_cast<double>(p.m) * p.n * p.k; }

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  using namespace tandem;
  CLI::App app{"The GEMMs of dp_cpu_bench's training step, each timed alone"};
  std::string hidden = "1024,1024";
  int64_t inputs = 784, classes = 10, batch = 256;
  int rounds = 15, reps = 10, cpu_threads = 1;
  app.add_option("--hidden", hidden, "hidden sizes, comma-separated");
  app.add_option("--inputs", inputs, "input features");
  app.add_option("--classes", classes, "output classes");
  app.add_option("--batch_size", batch, "rows of the step's batch");
  app.add_option("--rounds", rounds, "rounds over all products (the median is reported)");
  app.add_option("--reps", reps, "calls of each product per round");
  app.add_option("--cpu_threads", cpu_threads, "intra-op threads (0: all hardware threads)");
  CLI11_PARSE(app, argc, argv);

  return bench::RunMain([&] {
    TANDEM_CHECK(inputs >= 1 && classes >= 1 && batch >= 1 && rounds >= 1 && reps >= 1)
        << "--inputs, --classes, --batch_size, --rounds and --reps must be at least 1";
    std::vector<int64_t> sizes = {inputs};
    for (int64_t h : bench::ParseIntList(hidden, "--hidden")) sizes.push_back(h);
    sizes.push_back(classes);
    cpu::SetCpuThreads(cpu_threads);
    std::cout << "machine backend=\"" << GetBackend(Device::Cpu()).Describe() << "\"\n";

    std::vector<Product> products = StepProducts(sizes, batch);
    for (Product& p : products) TimeProduct(p, 1);  // kernels made and caches warm
    std::vector<std::vector<double>> seconds(products.size());
    for (int r = 0; r < rounds; ++r) {
      for (size_t i = 0; i < products.size(); ++i) {
        seconds[i].push_back(TimeProduct(products[i], reps));
      }
    }
    double total = 0, flops = 0;
    bench::ResultPrinter results;
    for (size_t i = 0; i < products.size(); ++i) {
      const Product& p = products[i];
      const double median = bench::Median(seconds[i]);
      total += median;
      flops += Flops(p);
      bench::Row row("gemm");
      row.Add("bench", "cpu_gemms").Add("name", p.name).Add("m", p.m).Add("n", p.n);
      row.Add("k", p.k).Add("trans_a", p.trans_a ? 1 : 0).Add("trans_b", p.trans_b ? 1 : 0);
      row.Add("us", median * 1e6, 1).Add("gflops", Flops(p) / median / 1e9, 1);
      results.Print(row);
    }
    bench::Row sum("result");
    sum.Add("bench", "cpu_gemms").Add("threads", cpu::CpuThreads()).Add("batch", batch);
    sum.Add("gemm_ms", total * 1e3, 3).Add("gflops", flops / total / 1e9, 1);
    results.Print(sum);
    return 0;
  });
}
