// What every program built on the Trainer does around its work, so that
// each main() holds only what is its own (examples/*/main.cc):
//
//   int main(int argc, char** argv) {
//     return tandem::RunProgram([&]() -> int {
//       MyConfig config;
//       if (auto exit_code = ParseMyFlags(argc, argv, config, std::cout, std::cerr)) {
//         return *exit_code;
//       }
//       const MyResult result = TrainMine(config, std::cout);
//       return result.stop_signal != 0 ? tandem::kPreemptedExitCode : 0;
//     });
//   }
//
// RunProgram enters the user's folder under `bazel run` (which starts a
// program in its runfiles folder and names the user's in
// BUILD_WORKING_DIRECTORY), so relative paths in flags mean what they say;
// installs StopSignals (trainer/stop_signal.h) for the body; and returns the
// body's exit status, kUsageExitCode for a UsageError, 1 for any other
// error or a folder it cannot enter, each printed as "error: ..." on
// stderr.
#ifndef TANDEM_TRAINER_PROGRAM_H_
#define TANDEM_TRAINER_PROGRAM_H_

#include <functional>

namespace tandem {

int RunProgram(const std::function<int()>& body);

}  // namespace tandem

#endif  // TANDEM_TRAINER_PROGRAM_H_
