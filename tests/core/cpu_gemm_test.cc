// Tests core/cpu/cpu_gemm.h and cpu_threads.h: the CPU backend's GEMM
// against a naive double-precision reference for many shapes, transposes,
// alpha and beta; the rule of Note [Blocked GEMM] (the threads only decide
// who computes which block); that oneDNN leaves the caller's OpenMP thread
// count alone; the thread-count setting; which library is the default and
// what TANDEM_CPU_GEMM accepts. //tests/core:cpu_gemm_avx2_test runs this
// same file with DNNL_MAX_CPU_ISA=AVX2 (oneDNN capped below AVX-512), so
// that a machine with AVX-512 tests the Eigen path too.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/cpu/cpu_gemm.h"
#include "core/cpu/cpu_thread_pool.h"
#include "core/cpu/cpu_threads.h"
#include "core/cpu/onednn_matmul.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "tests/support/gemm_reference.h"

namespace tandem {
namespace cpu {
namespace {

using test::GemmCase;
using Case = GemmCase;

std::vector<float> Random(int64_t size, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(size));
  for (float& x : v) x = dist(gen);
  return v;
}

// Row-major a [m, k] (or [k, m]) and b [k, n] (or [n, k]) as the test holds them.
struct Operands {
  std::vector<float> a, b, c;
  explicit Operands(const Case& t, uint32_t seed)
      : a(Random(t.m * t.k, seed)), b(Random(t.k * t.n, seed + 1)),
        c(Random(t.m * t.n, seed + 2)) {}
};

void ExpectNearReference(const Case& t, const Operands& in, const std::vector<float>& got) {
  auto same = [](float x) { return x; };
  test::ExpectGemmNearReference(t, test::StoredElement(in.a, t.trans_a, t.m, t.k, same),
                                test::StoredElement(in.b, t.trans_b, t.k, t.n, same), in.c,
                                got);
}

std::vector<float> RunGemm(GemmLibrary library, ThreadPool& pool, int threads, const Case& t,
                           const Operands& in) {
  return test::RunOnCopyOfC(t, in.c, [&](float* c) {
    Gemm(library, pool, threads, t.trans_a, t.trans_b, t.m, t.n, t.k, t.alpha, in.a.data(),
         in.b.data(), t.beta, c);
  });
}

std::vector<Case> Cases() {
  return test::GemmCases({{1, 1, 1},
                          {3, 5, 7},
                          {17, 33, 65},
                          {64, 64, 64},
                          {1, 300, 9},
                          {300, 1, 9},
                          {31, 513, 130},
                          {513, 31, 130},
                          {40, 600, 0},
                          {256, 784, 37}});
}

class GemmLibraryTest : public ::testing::TestWithParam<GemmLibrary> {
 protected:
  void SetUp() override {
    if (GetParam() == GemmLibrary::kOneDnn && !OneDnnHasAvx512()) {
      GTEST_SKIP() << "oneDNN's float32 GEMMs run on CPUs with AVX-512 only, and it has none "
                      "here (or DNNL_MAX_CPU_ISA caps it)";
    }
  }
};

TEST_P(GemmLibraryTest, MatchesNaiveReference) {
  ThreadPool pool;
  uint32_t seed = 1;
  for (const Case& t : Cases()) {
    const Operands in(t, seed += 3);
    for (int threads : {1, 3}) ExpectNearReference(t, in, RunGemm(GetParam(), pool, threads, t, in));
  }
}

// See Note [Blocked GEMM]: with the blocks run in parallel, each output
// element has the bits of its block's call made alone on this thread, and
// one thread makes one call over the whole product.
TEST_P(GemmLibraryTest, ThreadsOnlyDecideWhoComputesEachBlock) {
  ThreadPool pool;
  const Case shapes[] = {{false, true, 256, 1024, 784, 1.f, 0.f},
                         {true, false, 1024, 784, 256, 1.f, 1.f},
                         {false, false, 300, 1100, 129, -0.5f, 0.5f},
                         {true, true, 1100, 300, 129, 2.f, 0.f}};
  for (const Case& t : shapes) {
    const Operands in(t, 7);
    const GemmOperands<float> whole =
        WholeGemm(t.trans_a, t.trans_b, t.m, t.n, t.k, in.a.data(), in.b.data(), nullptr);
    for (int threads : {1, 2, 3, 8}) {
      const GemmPlan plan = PlanGemm(t.m, t.n, t.k, threads);
      ASSERT_EQ(plan.count > 1, threads > 1) << "the shape must split into blocks";
      const std::vector<float> alone = test::RunOnCopyOfC(t, in.c, [&](float* c) {
        GemmOperands<float> g = whole;
        g.c = c;
        for (int64_t i = 0; i < plan.count; ++i) {
          GemmBlock(GetParam(), plan.count == 1 ? g : SliceGemm(g, plan, i), t.alpha, t.beta);
        }
      });
      const std::vector<float> parallel = RunGemm(GetParam(), pool, threads, t, in);
      ASSERT_EQ(0, std::memcmp(alone.data(), parallel.data(), alone.size() * sizeof(float)))
          << threads << " threads changed the bits of m=" << t.m << " n=" << t.n
          << " k=" << t.k;
    }
  }
}

// Several threads calling at once (the workers of threads mode), each with
// beta = 1 so that a block computed twice or a buffer shared between calls
// shows in the bits. Many small GEMMs make calls overlap often: a library
// whose calls share a packing buffer fails this.
TEST_P(GemmLibraryTest, ConcurrentCallersGetTheirOwnResults) {
  ThreadPool pool;
  const Case t{true, false, 64, 64, 64, 1.f, 1.f};
  const Operands in(t, 11);
  const std::vector<float> want = RunGemm(GetParam(), pool, 1, t, in);
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&, c] {
      for (int i = 0; i < 3000; ++i) {
        if (RunGemm(GetParam(), pool, 1 + (c + i) % 3, t, in) != want) wrong++;
      }
    });
  }
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0) << "of 9000 concurrent GEMMs";
}

INSTANTIATE_TEST_SUITE_P(Libraries, GemmLibraryTest,
                         ::testing::Values(GemmLibrary::kOneDnn, GemmLibrary::kEigen),
                         [](const auto& info) {
                           return info.param == GemmLibrary::kOneDnn ? "OneDnn" : "Eigen";
                         });

TEST(CpuGemmTest, PlanHasABlockPerThreadAndCoversTheOutput) {
  for (int threads : {1, 2, 3, 8, 16}) {
    for (int64_t n : {1, 63, 64, 255, 256, 511, 512, 784, 1024, 1025, 5000, 100000}) {
      const GemmPlan plan = PlanGemm(64, n, 512, threads);
      EXPECT_EQ(plan.by_columns, n > 64) << "the longer side is split (rows if square), n=" << n;
      const int64_t split = plan.by_columns ? n : 64;
      EXPECT_LE(plan.count, threads);
      EXPECT_GE(plan.count * plan.width, split);
      EXPECT_LT((plan.count - 1) * plan.width, split) << "an empty block for n=" << n;
      if (plan.count > 1) {
        EXPECT_GE(plan.width, kMinBlockWidth);
      }
    }
  }
  // Note [How many blocks], on dp_cpu_bench's MLP.
  EXPECT_FALSE(PlanGemm(1024, 784, 256, 8).by_columns);
  EXPECT_FALSE(PlanGemm(1024, 1024, 256, 8).by_columns) << "a square output is split by rows";
  EXPECT_EQ(PlanGemm(1024, 1024, 256, 8).count, 8);
  EXPECT_EQ(PlanGemm(1024, 784, 256, 8).count, 8);
  EXPECT_EQ(PlanGemm(256, 1024, 1024, 16).count, 8) << "blocks of 128 columns at the least";
  EXPECT_EQ(PlanGemm(256, 1024, 1024, 2).count, 2);
  EXPECT_EQ(PlanGemm(256, 1024, 1024, 1).count, 1) << "one thread makes one call";
  EXPECT_EQ(PlanGemm(256, 1024, 1024, 3).count, 3);
  EXPECT_EQ(PlanGemm(64, 1024, 1024, 8).count, 8);
  EXPECT_EQ(PlanGemm(64, 1024, 48, 8).count, 1) << "two blocks would be under 4 MFLOP";
  EXPECT_EQ(PlanGemm(64, 1024, 64, 8).count, 2);
  EXPECT_EQ(PlanGemm(10, 1024, 256, 8).count, 1) << "too few flops to split";
  // examples/gpt's projections (768 rows: batch 12 x context 64, width 128)
  // on 2 threads: each has a block per thread.
  EXPECT_EQ(PlanGemm(768, 384, 128, 2).count, 2) << "qkv, 75 MFLOP";
  EXPECT_EQ(PlanGemm(768, 128, 128, 2).count, 2) << "proj, 25 MFLOP";
}

// TANDEM_CPU_GEMM set to `value` for the scope, as it was before after it.
class ScopedGemmLibrary {
 public:
  explicit ScopedGemmLibrary(const char* value) {
    const char* before = std::getenv("TANDEM_CPU_GEMM");
    had_ = before != nullptr;
    if (had_) before_ = before;
    setenv("TANDEM_CPU_GEMM", value, 1);
  }
  ~ScopedGemmLibrary() {
    if (had_) {
      setenv("TANDEM_CPU_GEMM", before_.c_str(), 1);
    } else {
      unsetenv("TANDEM_CPU_GEMM");
    }
  }

 private:
  bool had_ = false;
  std::string before_;
};

// The error text of GemmLibraryFromEnvironment() with TANDEM_CPU_GEMM=value;
// "" if it was accepted.
std::string RefusalOf(const char* value) {
  const ScopedGemmLibrary set(value);
  try {
    GemmLibraryFromEnvironment();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Unset, the library is oneDNN where it has AVX-512 kernels, else Eigen
// (cpu_gemm_avx2_test caps oneDNN at AVX2). See Note [Which float32 GEMM
// library].
TEST(CpuGemmTest, TheDefaultLibraryFollowsTheInstructionSet) {
  if (std::getenv("TANDEM_CPU_GEMM") != nullptr) GTEST_SKIP() << "TANDEM_CPU_GEMM is set";
  const GemmLibrary expected = OneDnnHasAvx512() ? GemmLibrary::kOneDnn : GemmLibrary::kEigen;
  EXPECT_EQ(GemmLibraryFromEnvironment(), expected);
  const char* cap = std::getenv("DNNL_MAX_CPU_ISA");
  if (cap != nullptr && std::strcmp(cap, "AVX2") == 0) {
    EXPECT_FALSE(OneDnnHasAvx512()) << "DNNL_MAX_CPU_ISA=AVX2 must keep oneDNN off AVX-512";
    EXPECT_EQ(GemmLibraryFromEnvironment(), GemmLibrary::kEigen);
  }
  const std::string described = Describe(GemmLibraryFromEnvironment());
  std::cout << "float32 GEMM: " << described << "\n";
  EXPECT_EQ(described.rfind(expected == GemmLibrary::kOneDnn ? "oneDNN " : "Eigen 3.", 0), 0u)
      << described;
}

TEST(CpuGemmTest, TheNamedLibraryIsTaken) {
  {
    const ScopedGemmLibrary set("eigen");
    EXPECT_EQ(GemmLibraryFromEnvironment(), GemmLibrary::kEigen);
  }
  if (OneDnnHasAvx512()) {
    const ScopedGemmLibrary set("onednn");
    EXPECT_EQ(GemmLibraryFromEnvironment(), GemmLibrary::kOneDnn);
  }
}

// Asked for where it has no AVX-512 kernels (cpu_gemm_avx2_test caps it),
// oneDNN is refused with the reason and what to set instead.
TEST(CpuGemmTest, OneDnnWithoutAvx512IsRefusedWithTheReason) {
  if (OneDnnHasAvx512()) GTEST_SKIP() << "oneDNN has AVX-512 kernels here";
  const std::string error = RefusalOf("onednn");
  EXPECT_NE(error.find("AVX-512"), std::string::npos) << error;
  EXPECT_NE(error.find("TANDEM_CPU_GEMM=onednn"), std::string::npos) << error;
  EXPECT_NE(error.find("TANDEM_CPU_GEMM=eigen"), std::string::npos) << error;
}

// A library the backend does not have (openblas, say) is refused, the
// error naming the value and the valid ones.
TEST(CpuGemmTest, AnUnknownLibraryIsRefusedNamingTheValidOnes) {
  for (const char* value : {"openblas", "mkl", "Eigen"}) {
    const std::string error = RefusalOf(value);
    EXPECT_NE(error.find(std::string("TANDEM_CPU_GEMM=") + value + " "), std::string::npos)
        << error;
    EXPECT_NE(error.find("onednn"), std::string::npos) << error;
    EXPECT_NE(error.find("eigen"), std::string::npos) << error;
  }
}

// oneDNN runs one OpenMP thread per call, and the caller's own OpenMP
// setting survives the call.
TEST(CpuGemmTest, OneDnnLeavesTheCallersOpenMpThreadCountAlone) {
  if (!OneDnnHasAvx512()) GTEST_SKIP() << "oneDNN's float32 GEMMs need AVX-512 here";
  omp_set_num_threads(3);
  const std::vector<float> a(64 * 32, 1.f), b(32 * 48, 2.f);
  std::vector<float> c(64 * 48, 0.f);
  ThreadPool pool;
  Gemm(GemmLibrary::kOneDnn, pool, 1, false, false, 64, 48, 32, 1.f, a.data(), b.data(), 0.f,
       c.data());
  EXPECT_EQ(c[0], 64.f);
  EXPECT_EQ(omp_get_max_threads(), 3);
}

TEST(CpuThreadsTest, FlagThenEnvironmentThenLauncherThenHardware) {
  unsetenv("TANDEM_CPU_THREADS");
  SetCpuThreads(0);
  SizeCpuThreadsForWorkers(1);
  EXPECT_EQ(CpuThreads(), HardwareThreads());
  SizeCpuThreadsForWorkers(4 * HardwareThreads());
  EXPECT_EQ(CpuThreads(), 1) << "more workers than cores: one thread each";
  setenv("TANDEM_CPU_THREADS", "3", 1);
  EXPECT_EQ(CpuThreads(), 3);
  SetCpuThreads(5);
  EXPECT_EQ(CpuThreads(), 5);
  SetCpuThreads(0);
  setenv("TANDEM_CPU_THREADS", "two", 1);
  EXPECT_THROW(CpuThreads(), Error);
  unsetenv("TANDEM_CPU_THREADS");
  EXPECT_THROW(SetCpuThreads(-1), Error);
}

// Through the backend: ops::Gemm on the CPU plans its float32 blocks for the
// thread setting (Note [Blocked GEMM]): with 1 and 4 threads it gives the
// bits of the library's GEMM on that many threads, whose results agree to
// rounding.
TEST(CpuGemmTest, BackendGemmPlansForTheThreadSetting) {
  const std::vector<float> xv = Random(256 * 600, 3), wv = Random(1024 * 600, 4);
  const Tensor x = Tensor::FromVector(xv, {256, 600}, Device::Cpu());
  const Tensor w = Tensor::FromVector(wv, {1024, 600}, Device::Cpu());
  ThreadPool pool;
  std::vector<float> results[2];
  for (int i = 0; i < 2; ++i) {
    const int threads = i == 0 ? 1 : 4;
    SetCpuThreads(threads);
    Tensor y = Tensor::Empty({256, 1024}, Device::Cpu());
    ops::Gemm(x, false, w, true, y);
    results[i] = y.ToVector();
    std::vector<float> direct(256 * 1024);
    Gemm(GemmLibraryFromEnvironment(), pool, threads, false, true, 256, 1024, 600, 1.f,
         xv.data(), wv.data(), 0.f, direct.data());
    EXPECT_EQ(results[i], direct) << threads << " threads";
  }
  SetCpuThreads(0);
  for (size_t j = 0; j < results[0].size(); ++j) {
    ASSERT_NEAR(results[0][j], results[1][j], 1e-4f * (1.f + std::abs(results[0][j])))
        << "element " << j;
  }
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
