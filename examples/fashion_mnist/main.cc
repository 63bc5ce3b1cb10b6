// Trains an MLP on Fashion-MNIST, on one worker or many.
//
//   bazel run -c opt //examples:fashion_mnist -- --workers=2
//   mpirun -np 4 bazel-bin/examples/fashion_mnist
//
// The last line printed is `test_accuracy=0.xxxx`. Exit status: 0 when
// training ends, 1 when it fails, 2 for a usage error (examples/
// fashion_mnist/flags.h), 75 when SIGTERM, SIGINT or SIGUSR1 stopped it
// (after saving in --checkpoint_dir, if given; trainer/stop_signal.h).
#include <iomanip>
#include <iostream>

#include "examples/fashion_mnist/flags.h"
#include "examples/fashion_mnist/train.h"
#include "trainer/program.h"
#include "trainer/stop_signal.h"

int main(int argc, char** argv) {
  return tandem::RunProgram([&]() -> int {
    tandem::FashionMnistConfig config;
    if (const std::optional<int> exit_code =
            tandem::ParseCommandLine(argc, argv, config, std::cout, std::cerr)) {
      return *exit_code;
    }
    const tandem::TrainResult result = tandem::TrainFashionMnist(config, std::cout);
    if (result.stop_signal != 0) {
      if (result.is_root) {
        std::cout << "stopped by " << tandem::StopSignals::Name(result.stop_signal)
                  << (config.checkpoint_dir.empty()
                          ? "; nothing saved (no --checkpoint_dir)"
                          : "; continue with the same flags and --resume")
                  << std::endl;
      }
      return tandem::kPreemptedExitCode;
    }
    if (result.is_root) {
      std::cout << "trained in " << std::fixed << std::setprecision(1) << result.seconds << " s\n"
                << "test_accuracy=" << std::setprecision(4) << result.test_accuracy << std::endl;
    }
    return 0;
  });
}
