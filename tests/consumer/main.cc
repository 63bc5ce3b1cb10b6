// Trains a tiny MLP on synthetic data on 2 worker threads with Tandem's
// Trainer and prints the test loss after each epoch; exits 1 unless the loss
// went down and the test accuracy reached 0.8.
//
//   bazel run //:train_tiny                     # on the CPU
//   bazel run //:train_tiny -- --device=cuda    # a GPU per worker
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "tiny_training.h"

int main(int argc, char** argv) {
  consumer::TinyTrainingOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--device=", 0) == 0) {
      options.device = arg.substr(9);
    } else if (arg.rfind("--workers=", 0) == 0) {
      options.workers = std::atoi(arg.c_str() + 10);
    } else {
      std::cerr << "unknown argument '" << arg << "': expected --device=cpu|cuda|auto "
                << "or --workers=N\n";
      return 2;
    }
  }
  try {
    const consumer::TinyResult result = consumer::TrainTinyMlp(options);
    const std::vector<float>& losses = result.test_losses;
    for (size_t epoch = 0; epoch < losses.size(); ++epoch) {
      std::cout << "epoch " << epoch + 1 << " test loss " << losses[epoch] << "\n";
    }
    std::cout << "test accuracy " << result.test_accuracy << "\n";
    if (losses.size() < 2 || !(losses.back() < losses.front()) || result.test_accuracy < 0.8) {
      std::cerr << "FAIL: the loss did not go down, or the accuracy stayed below 0.8\n";
      return 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "FAIL: " << e.what() << "\n";
    return 1;
  }
  std::cout << "OK: the loss went down and the accuracy reached 0.8" << std::endl;
  return 0;
}
