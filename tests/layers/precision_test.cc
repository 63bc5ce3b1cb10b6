#include "layers/precision.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/backend_registry.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace {

using testing::ErrorText;

TEST(PrecisionTest, ParsesNamesAndNamesTheFlagOnError) {
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16}) {
    EXPECT_EQ(ParsePrecision(PrecisionName(p)), p);
  }
  EXPECT_NE(ErrorText([] { ParsePrecision("fp16"); })
                .find("--precision=fp16 is not a precision: use fp32, tf32 or bf16"),
            std::string::npos);
}

// Note [bf16 where the device does not multiply bfloat16]: bf16 computes in
// bfloat16 only where the backend multiplies it (precision_widen_test runs
// this on a CPU capped below AVX-512 BF16); fp32 and tf32 always in float32.
TEST(PrecisionTest, Bf16ComputesInBFloat16OnlyWhereTheBackendMultipliesIt) {
  const Backend& cpu = GetBackend(Device::Cpu());
  const bool multiplies = cpu.MultipliesBFloat16();
  // The _widen_ run caps oneDNN below AVX-512 BF16: its CPU must not multiply.
  if (const char* isa = std::getenv("DNNL_MAX_CPU_ISA")) {
    EXPECT_FALSE(multiplies) << "DNNL_MAX_CPU_ISA=" << isa;
  }
  const PrecisionPolicy fp32{Precision::kFp32}, tf32{Precision::kTf32}, bf16{Precision::kBf16};
  EXPECT_EQ(fp32.compute_dtype(cpu), DType::kFloat32);
  EXPECT_EQ(tf32.compute_dtype(cpu), DType::kFloat32);
  EXPECT_FALSE(fp32.has_working_copies(cpu) || tf32.has_working_copies(cpu));
  EXPECT_TRUE(tf32.tf32());
  EXPECT_TRUE(bf16.bf16());
  EXPECT_EQ(bf16.compute_dtype(cpu), multiplies ? DType::kBFloat16 : DType::kFloat32);
  EXPECT_EQ(bf16.has_working_copies(cpu), multiplies);
  EXPECT_EQ(fp32.Describe(cpu), "fp32");
  EXPECT_EQ(bf16.Describe(cpu),
            multiplies ? "bf16"
                       : "bf16 (computed in float32: the device does not multiply bfloat16)");
  if (CudaDeviceCount() > 0) {
    const Backend& gpu = GetBackend(Device::Cuda(0));
    EXPECT_EQ(bf16.compute_dtype(gpu), DType::kBFloat16);
    EXPECT_EQ(bf16.Describe(gpu), "bf16");
  }
}

}  // namespace
}  // namespace tandem
