// A seeded, deterministic random number generator (xoshiro256**, seeded by
// splitmix64). The same seed gives the same stream on every platform and
// compiler: unlike std:: distributions, every draw here is our own code.
//
//   Rng rng(42);
//   float u = rng.Uniform();          // [0, 1)
//   float n = rng.Normal(0.f, 1.f);
//   rng.Shuffle(indices);             // Fisher-Yates
//   Rng child = rng.Fork(7);          // an independent stream
#ifndef TANDEM_CORE_RNG_H_
#define TANDEM_CORE_RNG_H_

#include <array>
#include <cstdint>
#include <vector>

#include "core/host_device.h"

namespace tandem {

class Rng {
 public:
  using State = std::array<uint64_t, 4>;

  explicit Rng(uint64_t seed = 0);

  uint64_t NextU64();
  // Uniform in [0, 1), 24 random bits.
  float Uniform();
  // Uniform in [low, high).
  float Uniform(float low, float high);
  // Normal by Box-Muller (no cached second value, so the state alone
  // determines the future stream).
  float Normal(float mean = 0.f, float stddev = 1.f);
  // Uniform integer in [0, n), unbiased (rejection sampling).
  uint64_t UniformInt(uint64_t n);
  void Shuffle(std::vector<int64_t>& values);
  // A generator seeded from this one's seed and `stream`; does not advance
  // this one.
  Rng Fork(uint64_t stream) const;

  // For checkpoints: the whole state, and restoring it.
  State state() const { return state_; }
  void set_state(const State& state) { state_ = state; }
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  State state_;
};

// Stateless counter-based hash: the same (seed, counter) gives the same bits
// on CPU and GPU, which is what dropout masks need to match across backends.
TANDEM_HOST_DEVICE uint64_t HashU64(uint64_t seed, uint64_t counter) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + counter + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace tandem

#endif  // TANDEM_CORE_RNG_H_
