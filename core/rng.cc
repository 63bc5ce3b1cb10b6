#include "core/rng.h"

#include <cmath>
#include <utility>

#include "core/check.h"

namespace tandem {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t RotateLeft(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed) : seed_(seed) {
  uint64_t x = seed;
  for (uint64_t& word : state_) word = SplitMix64(x);
}

uint64_t Rng::NextU64() {
  const uint64_t result = RotateLeft(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = RotateLeft(state_[3], 45);
  return result;
}

float Rng::Uniform() {
  return static_cast<float>(NextU64() >> 40) * (1.0f / 16777216.0f);
}

float Rng::Uniform(float low, float high) {
  return low + (high - low) * Uniform();
}

float Rng::Normal(float mean, float stddev) {
  // 1 - Uniform() is in (0, 1], so the log is finite.
  const double u1 = 1.0 - static_cast<double>(NextU64() >> 11) * 0x1.0p-53;
  const double u2 = static_cast<double>(NextU64() >> 11) * 0x1.0p-53;
  const double radius = std::sqrt(-2.0 * std::log(u1));
  return mean + stddev * static_cast<float>(radius * std::cos(2.0 * M_PI * u2));
}

uint64_t Rng::UniformInt(uint64_t n) {
  TANDEM_CHECK(n > 0, "UniformInt needs a positive bound");
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = NextU64();
  } while (x >= limit);
  return x % n;
}

void Rng::Shuffle(std::vector<int64_t>& values) {
  for (size_t i = values.size(); i > 1; --i) {
    std::swap(values[i - 1], values[UniformInt(i)]);
  }
}

Rng Rng::Fork(uint64_t stream) const {
  return Rng(HashU64(seed_, stream ^ 0xA5A5A5A5DEADBEEFull));
}

}  // namespace tandem
