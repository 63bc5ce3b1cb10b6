// A tiny data-parallel training run written against Tandem's public API, as
// a user's project would write it: the Trainer fits an MLP to a synthetic
// 4-class problem on worker threads of this process.
//
//   TinyTrainingOptions options;
//   options.device = "cuda";  // one GPU per worker, where Tandem has CUDA
//   TinyResult result = TrainTinyMlp(options);
#ifndef TANDEM_CONSUMER_TINY_TRAINING_H_
#define TANDEM_CONSUMER_TINY_TRAINING_H_

#include <string>
#include <vector>

namespace consumer {

struct TinyTrainingOptions {
  std::string device = "cpu";  // "cpu", "cuda" or "auto" (LaunchOptions::device)
  int workers = 2;
  int epochs = 10;
};

struct TinyResult {
  std::vector<float> test_losses;  // after each epoch
  double test_accuracy = 0.0;      // after the last
  std::vector<float> parameters;   // the final ones, flattened
};

TinyResult TrainTinyMlp(const TinyTrainingOptions& options);

}  // namespace consumer

#endif  // TANDEM_CONSUMER_TINY_TRAINING_H_
