// WithActivation(activation, body) calls body(std::integral_constant<
// Activation, A>()) for the runtime `activation`, so that a CPU loop is
// compiled (and vectorised) once per activation instead of switching per
// element:
//
//   WithActivation(activation, [&](auto act) {
//     for (int64_t i = 0; i < n; ++i) y[i] = kernel_math::Activate(act(), x[i]);
//   });
#ifndef TANDEM_CORE_CPU_WITH_ACTIVATION_H_
#define TANDEM_CORE_CPU_WITH_ACTIVATION_H_

#include <type_traits>

#include "core/backend.h"
#include "core/check.h"
#include "core/kernel_math.h"

namespace tandem {
namespace cpu {

template <typename Body>
void WithActivation(Activation activation, Body&& body) {
  const bool known = kernel_math::VisitActivation(activation, body);
  TANDEM_CHECK(known) << "unknown activation " << static_cast<int>(activation);
}

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_WITH_ACTIVATION_H_
