// A float32's bit pattern and back, for tests that build special values
// (NaN payloads, ties, subnormals) bit by bit.
//
//   const float nan = test::FloatFromBits(0x7f800001u);  // a signalling NaN
//   EXPECT_EQ(test::BitsOfFloat(1.f), 0x3f800000u);
#ifndef TANDEM_TESTS_SUPPORT_FLOAT_BITS_H_
#define TANDEM_TESTS_SUPPORT_FLOAT_BITS_H_

#include <cstdint>
#include <cstring>

namespace tandem {
namespace test {

inline float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline uint32_t BitsOfFloat(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

}  // namespace test
}  // namespace tandem

#endif  // TANDEM_TESTS_SUPPORT_FLOAT_BITS_H_
