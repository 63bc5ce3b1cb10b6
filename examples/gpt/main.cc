// Trains a character-level GPT on a text corpus (Debian's fortunes by
// default) and prints its validation loss beside a bigram baseline's, then
// text sampled from it.
//
//   bazel run -c opt //examples:gpt -- --workers=2
//   mpirun -np 2 bazel-bin/examples/gpt
//
// The last lines printed are `step_ms=x.xx` (the mean training step; none
// when nothing was trained) and `val_loss=1.xxxx` (nats per byte). Exit
// status: 0 when training ends, 1 when it fails, 2 for a usage error, 75
// when SIGTERM, SIGINT or SIGUSR1 stopped it (after saving in
// --checkpoint_dir, if given; trainer/stop_signal.h).
#include <iomanip>
#include <iostream>

#include "examples/gpt/flags.h"
#include "examples/gpt/train.h"
#include "trainer/program.h"
#include "trainer/stop_signal.h"

int main(int argc, char** argv) {
  return tandem::RunProgram([&]() -> int {
    tandem::gpt::GptConfig config;
    if (const std::optional<int> exit_code =
            tandem::gpt::ParseGptFlags(argc, argv, config, std::cout, std::cerr)) {
      return *exit_code;
    }
    const tandem::gpt::GptResult result = tandem::gpt::TrainGpt(config, std::cout);
    if (result.stop_signal != 0) return tandem::kPreemptedExitCode;
    if (result.is_root) {
      std::cout << "trained in " << std::fixed << std::setprecision(1) << result.seconds << " s\n";
      // None when a finished run was resumed only to sample again.
      if (result.step_ms > 0) {
        std::cout << "step_ms=" << std::setprecision(2) << result.step_ms << "\n";
      }
      std::cout << "val_loss=" << std::setprecision(4) << result.val_loss << std::endl;
    }
    return 0;
  });
}
