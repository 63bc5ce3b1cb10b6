// Trains an MLP on Fashion-MNIST, on one worker or many.
//
//   bazel run -c opt //examples:fashion_mnist -- --workers=2
//   mpirun -np 4 bazel-bin/examples/fashion_mnist
//
// The last line printed is `test_accuracy=0.xxxx`. Exit status: 0 when
// training ends, 1 when it fails, 2 for a usage error (examples/
// fashion_mnist/flags.h), 75 when SIGTERM, SIGINT or SIGUSR1 stopped it
// (after saving in --checkpoint_dir, if given; trainer/stop_signal.h).
#include <unistd.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>

#include "examples/fashion_mnist/flags.h"
#include "examples/fashion_mnist/train.h"
#include "trainer/stop_signal.h"

int main(int argc, char** argv) {
  // `bazel run` starts the program in its runfiles folder and names the
  // user's folder here: relative paths in flags then mean what they say.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY")) {
    if (chdir(dir) != 0) {
      std::cerr << "error: cannot enter " << dir << " (BUILD_WORKING_DIRECTORY, set by bazel run)"
                << std::endl;
      return 1;
    }
  }
  tandem::FashionMnistConfig config;
  if (const std::optional<int> exit_code =
          tandem::ParseCommandLine(argc, argv, config, std::cout, std::cerr)) {
    return *exit_code;
  }
  try {
    tandem::StopSignals stop_signals;
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
      std::cout << "trained in " << std::fixed << std::setprecision(1)
                << result.seconds << " s\n"
                << "test_accuracy=" << std::setprecision(4) << result.test_accuracy
                << std::endl;
    }
  } catch (const tandem::UsageError& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return tandem::kUsageExitCode;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
