// The Fashion-MNIST example's command line: flags in groups (--help lists
// them by group: data, model, optimisation, parallelism, output,
// reliability), choices checked by CLI11, and the launch mode's rules.
//
//   TrainConfig config;
//   if (std::optional<int> exit_code =
//           ParseCommandLine(argc, argv, config, std::cout, std::cerr)) {
//     return *exit_code;  // --help, --version, or a usage error (printed)
//   }
//
// A flag given twice takes its last value, so `tools/train.sh --workers=4`
// overrides the script's own --workers=2. Under mpirun with more than one
// process the mode is mpi unless --mode says otherwise, and --mode=threads
// there is a usage error: every process would train alone.
//
// Exit status, as Unix tools have it: 0 after --help or --version,
// kUsageExitCode for a usage error (this parser's, or TrainFashionMnist's
// UsageError), 1 when training fails.
#ifndef TANDEM_EXAMPLES_FASHION_MNIST_FLAGS_H_
#define TANDEM_EXAMPLES_FASHION_MNIST_FLAGS_H_

#include <optional>
#include <ostream>

#include "examples/fashion_mnist/train.h"

namespace tandem {

inline constexpr int kUsageExitCode = 2;

// Fills `config` from the command line. Returns nullopt to go on and train,
// or the exit code to end with: --help and --version print to `out`, usage
// errors to `err` ("error: <what was wrong and what to do>").
std::optional<int> ParseCommandLine(int argc, const char* const* argv, TrainConfig& config,
                                    std::ostream& out, std::ostream& err);

// How many processes the launcher started, from its environment
// (OMPI_COMM_WORLD_SIZE for Open MPI, PMI_SIZE for MPICH and Slurm); 1
// without a launcher.
int LauncherWorldSize();

}  // namespace tandem

#endif  // TANDEM_EXAMPLES_FASHION_MNIST_FLAGS_H_
