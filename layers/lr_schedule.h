// Learning-rate schedules, as functions of the step (0-based).
//
//   LrSchedule schedule = ParseLrSchedule("cosine");
//   optimizer.set_lr(ScheduledLr(schedule, base_lr, step, total_steps));
//   optimizer.set_lr(WarmedUpLr(schedule, base_lr, step, total_steps, 100));
#ifndef TANDEM_LAYERS_LR_SCHEDULE_H_
#define TANDEM_LAYERS_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

namespace tandem {

enum class LrSchedule {
  kConstant,  // base_lr throughout
  kCosine,    // base_lr * (1 + cos(pi * step / total)) / 2: from base_lr to 0
};

// Parses "constant" or "cosine"; the error names --lr_schedule.
LrSchedule ParseLrSchedule(const std::string& name);

float ScheduledLr(LrSchedule schedule, float base_lr, int64_t step,
                  int64_t total_steps);

// The schedule times a linear warm-up over the first `warmup` steps:
// ScheduledLr(...) * min(1, (step + 1) / warmup); no warm-up when warmup <= 0.
float WarmedUpLr(LrSchedule schedule, float base_lr, int64_t step, int64_t total_steps,
                 int64_t warmup);

}  // namespace tandem

#endif  // TANDEM_LAYERS_LR_SCHEDULE_H_
