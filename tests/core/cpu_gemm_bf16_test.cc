// Tests core/cpu/cpu_gemm_bf16.h: the CPU's bfloat16 GEMM, on the path this
// CPU takes, against a double-precision reference on the same bfloat16
// values, over shapes, transposes, alpha and beta; bits that follow the
// thread count only (Note [Blocked GEMM]); and which path the CPU takes (Note
// [bfloat16 GEMMs on the CPU]). //tests/core:cpu_gemm_bf16_widen_test runs
// it with DNNL_MAX_CPU_ISA=AVX512_CORE, which takes the widened path (Note
// [Widening a block at a time]) on any CPU, and ops_bf16_widen_test runs the
// backend's bfloat16 ops so.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <iostream>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu/cpu_gemm_bf16.h"
#include "core/cpu/cpu_thread_pool.h"
#include "core/dtype.h"
#include "tests/support/gemm_reference.h"

namespace tandem {
namespace cpu {
namespace {

using test::GemmCase;
using Case = GemmCase;

std::vector<uint16_t> RandomBf16(int64_t size, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> v(static_cast<size_t>(size));
  for (uint16_t& x : v) x = FloatToBFloat16Bits(dist(gen));
  return v;
}

struct Operands {
  std::vector<uint16_t> a, b;
  std::vector<float> c;
  Operands(const Case& t, uint32_t seed)
      : a(RandomBf16(t.m * t.k, seed)), b(RandomBf16(t.k * t.n, seed + 1)), c(t.m * t.n) {
    std::mt19937 gen(seed + 2);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (float& x : c) x = dist(gen);
  }
};

std::vector<float> RunGemm(ThreadPool& pool, int threads, const Case& t, const Operands& in) {
  return test::RunOnCopyOfC(t, in.c, [&](float* c) {
    GemmBf16(GemmLibraryFromEnvironment(), pool, threads, t.trans_a, t.trans_b, t.m, t.n, t.k,
             t.alpha, in.a.data(), in.b.data(), t.beta, c);
  });
}

// The products of bfloat16 values are exact in float32; what remains is
// float32 accumulation.
void ExpectNearReference(const Case& t, const Operands& in, const std::vector<float>& got) {
  auto widen = [](uint16_t bits) { return BFloat16BitsToFloat(bits); };
  test::ExpectGemmNearReference(t, test::StoredElement(in.a, t.trans_a, t.m, t.k, widen),
                                test::StoredElement(in.b, t.trans_b, t.k, t.n, widen), in.c,
                                got);
}

std::vector<Case> Cases() {
  return test::GemmCases({{1, 1, 1},
                          {3, 5, 7},
                          {17, 33, 65},
                          {1, 300, 9},
                          {31, 513, 130},
                          {513, 31, 130},
                          {40, 600, 0},
                          {128, 1024, 300},    // blocks of columns
                          {1024, 300, 64}});   // blocks of rows
}

bool WidenedPathForced() { return std::getenv("DNNL_MAX_CPU_ISA") != nullptr; }

TEST(CpuGemmBf16Test, MatchesReference) {
  ThreadPool pool;
  uint32_t seed = 7;
  for (const Case& t : Cases()) {
    const Operands in(t, seed += 3);
    ExpectNearReference(t, in, RunGemm(pool, 2, t, in));
  }
}

// Note [Blocked GEMM]: for a thread count the bits are fixed, whichever
// threads compute which blocks (other callers keep the pool's helpers
// busy meanwhile); on the widened path they are those of the float32 GEMM
// on the widened operands with the same thread count.
TEST(CpuGemmBf16Test, BitsFollowTheThreadCountOnly) {
  ThreadPool pool;
  for (const Case& t : {Case{false, true, 256, 1024, 784, 1.f, 0.f},
                        Case{true, false, 1024, 784, 256, 1.f, 1.f},
                        Case{false, false, 600, 40, 300, 0.5f, 0.f},
                        Case{false, false, 64, 1024, 512, 1.f, 0.f},
                        Case{true, true, 2048, 300, 64, -1.f, 0.5f}}) {
    const Operands in(t, 11);
    for (int threads : {1, 2, 3, 8}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, m=" + std::to_string(t.m));
      const std::vector<float> first = RunGemm(pool, threads, t, in);
      std::atomic<bool> done{false};
      std::thread other([&] {
        while (!done) RunGemm(pool, 3, t, in);
      });
      for (int i = 0; i < 5; ++i) EXPECT_EQ(RunGemm(pool, threads, t, in), first);
      done = true;
      other.join();
      if (!Bf16GemmFast()) {
        std::vector<float> a(in.a.size()), b(in.b.size());
        for (size_t i = 0; i < a.size(); ++i) a[i] = BFloat16BitsToFloat(in.a[i]);
        for (size_t i = 0; i < b.size(); ++i) b[i] = BFloat16BitsToFloat(in.b[i]);
        EXPECT_EQ(test::RunOnCopyOfC(t, in.c,
                                     [&](float* c) {
                                       Gemm(GemmLibraryFromEnvironment(), pool, threads,
                                            t.trans_a, t.trans_b, t.m, t.n, t.k, t.alpha,
                                            a.data(), b.data(), t.beta, c);
                                     }),
                  first);
      }
    }
  }
}

// Which path: oneDNN's bfloat16 kernels where the CPU has them, unless
// DNNL_MAX_CPU_ISA caps oneDNN below them.
TEST(CpuGemmBf16Test, PathFollowsTheCpu) {
  const std::string described = DescribeBf16Gemm();
  std::cout << "bfloat16 GEMM: " << described << "\n";
  if (WidenedPathForced()) {
    EXPECT_FALSE(Bf16GemmFast()) << "DNNL_MAX_CPU_ISA=" << std::getenv("DNNL_MAX_CPU_ISA");
  }
#if defined(__x86_64__)
  if (!WidenedPathForced()) {
    EXPECT_EQ(Bf16GemmFast(), __builtin_cpu_supports("avx512bf16") != 0);
  }
#endif
  EXPECT_NE(described.find(Bf16GemmFast() ? "oneDNN" : "widened"), std::string::npos)
      << described;
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
