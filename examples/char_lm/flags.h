// The char_lm example's command line (CLI11), grouped as --help lists it:
// data, model, optimisation, parallelism, output.
//
//   CharLmConfig config;
//   if (std::optional<int> exit_code = ParseCharLmFlags(argc, argv, config, std::cout, std::cerr)) {
//     return *exit_code;  // --help, or a usage error (printed, exit 2)
//   }
//
// Under mpirun with more than one process the mode is mpi unless --mode
// says otherwise.
#ifndef TANDEM_EXAMPLES_CHAR_LM_FLAGS_H_
#define TANDEM_EXAMPLES_CHAR_LM_FLAGS_H_

#include <optional>
#include <ostream>

#include "examples/char_lm/train.h"

namespace tandem {
namespace char_lm {

std::optional<int> ParseCharLmFlags(int argc, const char* const* argv, CharLmConfig& config,
                                    std::ostream& out, std::ostream& err);

}  // namespace char_lm
}  // namespace tandem

#endif  // TANDEM_EXAMPLES_CHAR_LM_FLAGS_H_
