// Trains a character-level MLP language model on a word list (Debian's
// wamerican by default) and prints its validation loss beside a bigram
// baseline's, then a few sampled words.
//
//   bazel run -c opt //examples:char_lm -- --workers=2
//   mpirun -np 2 bazel-bin/examples/char_lm
//
// The last line printed is `val_loss=1.xxxx` (nats per character). Exit
// status: 0 when training ends, 1 when it fails, 2 for a usage error, 75
// when SIGTERM, SIGINT or SIGUSR1 stopped it (after saving in
// --checkpoint_dir, if given; trainer/stop_signal.h).
#include <iomanip>
#include <iostream>

#include "examples/char_lm/flags.h"
#include "examples/char_lm/train.h"
#include "trainer/program.h"
#include "trainer/stop_signal.h"

int main(int argc, char** argv) {
  return tandem::RunProgram([&]() -> int {
    tandem::char_lm::CharLmConfig config;
    if (const std::optional<int> exit_code =
            tandem::char_lm::ParseCharLmFlags(argc, argv, config, std::cout, std::cerr)) {
      return *exit_code;
    }
    const tandem::char_lm::CharLmResult result = tandem::char_lm::TrainCharLm(config, std::cout);
    if (result.stop_signal != 0) return tandem::kPreemptedExitCode;
    if (result.is_root) {
      std::cout << "trained in " << std::fixed << std::setprecision(1) << result.seconds << " s\n"
                << "val_loss=" << std::setprecision(4) << result.val_loss << std::endl;
    }
    return 0;
  });
}
