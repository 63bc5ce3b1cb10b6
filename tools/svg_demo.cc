// Writes a sample training-curves plot with realistic (synthetic) numbers,
// with no training needed: to look at the layout, render its output with
// tools/check_svg.sh (which otherwise plots a short real run).
//
//   bazel run //tools:svg_demo -- /tmp/training_curves.svg
#include <cmath>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "report/svg_plot.h"

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "training_curves.svg";
  // Shaped like 12 epochs of the Fashion-MNIST MLP: train loss keeps
  // falling, test loss flattens and turns up as the model starts to overfit.
  std::vector<double> train_loss, test_loss, train_acc, test_acc;
  for (int e = 1; e <= 12; ++e) {
    const double t = e - 1;
    train_loss.push_back(0.17 + 0.36 * std::exp(-t / 3.5) + 0.004 * std::sin(3.0 * e));
    test_loss.push_back(0.30 + 0.14 * std::exp(-t / 2.5) + 0.0025 * t * t / 6 +
                        0.006 * std::cos(2.0 * e));
    train_acc.push_back(0.935 - 0.125 * std::exp(-t / 3.5) + 0.002 * std::sin(5.0 * e));
    test_acc.push_back(0.888 - 0.046 * std::exp(-t / 2.5) - 0.0004 * t +
                       0.003 * std::sin(2.0 * e));
  }
  const std::vector<tandem::Series> loss = {{"train", {}, train_loss},
                                            {"test", {}, test_loss}};
  const std::vector<tandem::Series> accuracy = {{"train", {}, train_acc},
                                                {"test", {}, test_acc}};
  try {
    tandem::WritePlot(path, loss, accuracy,
                      "Fashion-MNIST MLP 784-512-256-10, 2 workers (sample data)");
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  std::cout << "wrote " << path << std::endl;
  return 0;
}
