#include "core/device.h"

#include <cstdlib>

#include "core/check.h"

namespace tandem {

std::string Device::ToString() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& out, const Device& device) {
  return out << device.ToString();
}

Device ParseDevice(const std::string& text) {
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::Cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    char* end = nullptr;
    long index = std::strtol(text.c_str() + 5, &end, 10);
    if (*end == '\0' && index >= 0) return Device::Cuda(static_cast<int>(index));
  }
  TANDEM_CHECK(false) << "unknown device '" << text
                      << "': expected cpu, cuda or cuda:N";
  return Device::Cpu();
}

}  // namespace tandem
