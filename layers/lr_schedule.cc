#include "layers/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace tandem {

LrSchedule ParseLrSchedule(const std::string& name) {
  if (name == "constant") return LrSchedule::kConstant;
  if (name == "cosine") return LrSchedule::kCosine;
  TANDEM_CHECK(false) << "unknown --lr_schedule '" << name
                      << "': expected constant or cosine";
  return LrSchedule::kConstant;
}

float ScheduledLr(LrSchedule schedule, float base_lr, int64_t step,
                  int64_t total_steps) {
  if (schedule == LrSchedule::kConstant || total_steps <= 0) return base_lr;
  const double t = std::clamp(static_cast<double>(step) / total_steps, 0.0, 1.0);
  return static_cast<float>(base_lr * 0.5 * (1.0 + std::cos(M_PI * t)));
}

float WarmedUpLr(LrSchedule schedule, float base_lr, int64_t step, int64_t total_steps,
                 int64_t warmup) {
  const float ramp = warmup > 0 ? std::min(1.f, static_cast<float>(step + 1) / warmup) : 1.f;
  return ramp * ScheduledLr(schedule, base_lr, step, total_steps);
}

}  // namespace tandem
