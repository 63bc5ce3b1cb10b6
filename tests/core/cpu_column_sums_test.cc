// Tests core/cpu/cpu_column_sums.h: the column sums add in the order of
// Note [Column sum order], bit for bit Eigen's colwise sum (for every
// alignment of the output, float32 and bfloat16 inputs, on 1 and 4
// threads), and to float rounding the sums themselves.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu/cpu_column_sums.h"
#include "core/cpu/cpu_thread_pool.h"
#include "core/dtype.h"
#include "tests/support/intra_op_runs.h"

namespace tandem {
namespace cpu {
namespace {

using testing_support::OnOneAndFour;
using testing_support::RandomNormals;

// Eigen's colwise sum, whose order the column sums keep (Note [Column sum
// order]).
void EigenColumnSums(const float* x, int64_t rows, int64_t cols, float alpha, float beta,
                     float* out) {
  using Matrix = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic,
                                                Eigen::RowMajor>>;
  Eigen::Map<Eigen::VectorXf> o(out, cols);
  if (beta == 0.f) o.setZero(); else o *= beta;
  if (rows == 0) return;
  o += alpha * Matrix(x, rows, cols).colwise().sum().transpose();
}

// `cols` floats at `offset` floats past a 64-byte boundary, holding `start`.
class OutputAt {
 public:
  OutputAt(int64_t offset, const std::vector<float>& start)
      : memory_(start.size() + 32), offset_(offset) {
    float* p = data();
    std::memcpy(p, start.data(), start.size() * sizeof(float));
    size_ = start.size();
  }
  float* data() {
    const auto address = reinterpret_cast<uintptr_t>(memory_.data());
    const auto aligned = (address + 63) & ~uintptr_t{63};
    return reinterpret_cast<float*>(aligned) + offset_;
  }
  std::vector<float> values() { return std::vector<float>(data(), data() + size_); }

 private:
  std::vector<float> memory_;
  int64_t offset_;
  size_t size_ = 0;
};

TEST(CpuColumnSumsTest, AddInEigensOrderForEveryShapeAndAlignment) {
  const std::vector<int64_t> row_counts = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 256, 301};
  const std::vector<int64_t> col_counts = {1, 7, 8, 9, 10, 17, 128, 129, 333, 1024};
  for (int64_t rows : row_counts) {
    for (int64_t cols : col_counts) {
      const std::vector<float> x = RandomNormals(rows * cols, 7);
      const std::vector<float> start = RandomNormals(cols, 8);
      std::vector<uint16_t> bits(x.size());
      std::vector<float> rounded(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        bits[i] = FloatToBFloat16Bits(x[i]);
        rounded[i] = BFloat16BitsToFloat(bits[i]);
      }
      for (int64_t offset : {0, 1, 3, 7, 8}) {
        for (auto [alpha, beta] : {std::pair<float, float>{1.f, 0.f}, {0.5f, 2.f}}) {
          SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + ", output at +" +
                       std::to_string(offset) + ", beta " + std::to_string(beta));
          OutputAt eigen(offset, start), eigen_rounded(offset, start);
          EigenColumnSums(x.data(), rows, cols, alpha, beta, eigen.data());
          EigenColumnSums(rounded.data(), rows, cols, alpha, beta, eigen_rounded.data());
          const auto sums = OnOneAndFour("ColumnSums", [&](const IntraOp& intra) {
            OutputAt out(offset, start);
            ColumnSums(intra, CPtr{x.data(), DType::kFloat32}, rows, cols, alpha, beta,
                       out.data());
            return out.values();
          });
          const auto bf16_sums = OnOneAndFour("ColumnSums bf16", [&](const IntraOp& intra) {
            OutputAt out(offset, start);
            ColumnSums(intra, CPtr{bits.data(), DType::kBFloat16}, rows, cols, alpha, beta,
                       out.data());
            return out.values();
          });
          ASSERT_EQ(std::memcmp(sums.data(), eigen.values().data(), cols * sizeof(float)), 0);
          ASSERT_EQ(std::memcmp(bf16_sums.data(), eigen_rounded.values().data(),
                                cols * sizeof(float)),
                    0);
        }
      }
    }
  }
}

TEST(CpuColumnSumsTest, MatchADoublePrecisionSum) {
  constexpr int64_t kRows = 300, kCols = 333;
  const std::vector<float> x = RandomNormals(kRows * kCols, 1), start = RandomNormals(kCols, 3);
  ThreadPool pool;
  std::vector<float> sums = start;
  ColumnSums(IntraOp{&pool, 4}, CPtr{x.data(), DType::kFloat32}, kRows, kCols, 0.5f, 2.f,
             sums.data());
  for (int64_t c = 0; c < kCols; ++c) {
    double s = 0.0, magnitude = 0.0;
    for (int64_t r = 0; r < kRows; ++r) {
      s += x[r * kCols + c];
      magnitude += std::abs(x[r * kCols + c]);
    }
    ASSERT_NEAR(sums[c], 2.0 * start[c] + 0.5 * s, 1e-6 * (magnitude + 4.0)) << "column " << c;
  }
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
