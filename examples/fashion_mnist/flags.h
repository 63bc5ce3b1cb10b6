// The Fashion-MNIST example's command line: its data and model flags, then
// the Trainer's (trainer/flags.h says how they parse and what the exit
// statuses are).
//
//   FashionMnistConfig config;
//   if (std::optional<int> exit_code =
//           ParseCommandLine(argc, argv, config, std::cout, std::cerr)) {
//     return *exit_code;  // --help, --version, or a usage error (printed)
//   }
#ifndef TANDEM_EXAMPLES_FASHION_MNIST_FLAGS_H_
#define TANDEM_EXAMPLES_FASHION_MNIST_FLAGS_H_

#include <optional>
#include <ostream>

#include "examples/fashion_mnist/train.h"

namespace tandem {

std::optional<int> ParseCommandLine(int argc, const char* const* argv,
                                    FashionMnistConfig& config, std::ostream& out,
                                    std::ostream& err);

}  // namespace tandem

#endif  // TANDEM_EXAMPLES_FASHION_MNIST_FLAGS_H_
