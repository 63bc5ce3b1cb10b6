// The gpt example's command line (CLI11), grouped as --help lists it:
// data, model, output, then the Trainer's.
//
//   GptConfig config;
//   if (std::optional<int> exit_code = ParseGptFlags(argc, argv, config, std::cout, std::cerr)) {
//     return *exit_code;  // --help, or a usage error (printed, exit 2)
//   }
//
// Under mpirun with more than one process the mode is mpi unless --mode
// says otherwise.
#ifndef TANDEM_EXAMPLES_GPT_FLAGS_H_
#define TANDEM_EXAMPLES_GPT_FLAGS_H_

#include <optional>
#include <ostream>

#include "examples/gpt/train.h"

namespace tandem {
namespace gpt {

std::optional<int> ParseGptFlags(int argc, const char* const* argv, GptConfig& config,
                                 std::ostream& out, std::ostream& err);

}  // namespace gpt
}  // namespace tandem

#endif  // TANDEM_EXAMPLES_GPT_FLAGS_H_
