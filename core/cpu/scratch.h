// Float32 scratch memory, uninitialised, for the CPU backend's conversions:
// taken from the calling thread's buffers freed by earlier uses when one is
// large enough, so that a step's ops do not allocate (and fault in) fresh
// pages for every bfloat16 operand; handed back on destruction. A thread
// keeps its 8 largest freed buffers.
//
//   cpu::Scratch wide(n);                        // n floats
//   WidenBFloat16(bits, wide.data(), n);
#ifndef TANDEM_CORE_CPU_SCRATCH_H_
#define TANDEM_CORE_CPU_SCRATCH_H_

#include <cstdint>
#include <memory>
#include <vector>

namespace tandem {
namespace cpu {

class Scratch {
 public:
  explicit Scratch(int64_t n);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* data() { return buffer_.data.get(); }

 private:
  struct Buffer {
    int64_t capacity = 0;
    std::unique_ptr<float[]> data;
  };
  static constexpr size_t kKeep = 8;  // an op's operands, and then some
  static std::vector<Buffer>& FreeBuffers();
  Buffer buffer_;
};

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_SCRATCH_H_
