// Tandem's version: the one place it is written. A program's `--version` (trainer/flags.h)
// prints "tandem " followed by it.
#ifndef TANDEM_TRAINER_VERSION_H_
#define TANDEM_TRAINER_VERSION_H_

namespace tandem {

inline constexpr char kTandemVersion[] = "0.1.0";

}  // namespace tandem

#endif  // TANDEM_TRAINER_VERSION_H_
