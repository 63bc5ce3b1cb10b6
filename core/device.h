// Where a tensor lives and where its ops run.
//
//   Device d = ParseDevice("cuda:1");   // {kCuda, 1}
//   Device c = Device::Cpu();
//   std::cout << d.ToString();          // "cuda:1"
#ifndef TANDEM_CORE_DEVICE_H_
#define TANDEM_CORE_DEVICE_H_

#include <ostream>
#include <string>

namespace tandem {

enum class DeviceKind { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;

  static Device Cpu() { return Device{DeviceKind::kCpu, 0}; }
  static Device Cuda(int index) { return Device{DeviceKind::kCuda, index}; }

  bool is_cpu() const { return kind == DeviceKind::kCpu; }
  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  std::string ToString() const;

  friend bool operator==(const Device& a, const Device& b) {
    return a.kind == b.kind && a.index == b.index;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

std::ostream& operator<<(std::ostream& out, const Device& device);

// Parses "cpu", "cuda" (= cuda:0) or "cuda:N"; throws tandem::Error naming
// the text otherwise.
Device ParseDevice(const std::string& text);

}  // namespace tandem

#endif  // TANDEM_CORE_DEVICE_H_
