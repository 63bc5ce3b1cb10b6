// A training program's command line: its own flags, then the Trainer's
// (precision, optimisation, parallelism, output, reliability), in groups
// that --help lists in that order; choices checked by CLI11, and the launch
// mode's rules.
//
//   TrainConfig config;                       // its values are the defaults --help shows
//   TrainerCommandLine cli("Train my model", config);
//   cli.app().option_defaults()->group("Data");
//   cli.app().add_option("--data_dir", data_dir, "where the data is");
//   if (std::optional<int> exit_code = cli.Parse(argc, argv, std::cout, std::cerr)) {
//     return *exit_code;  // --help, --version, or a usage error (printed)
//   }
//
// A flag given twice takes its last value, so `tools/train.sh --workers=4`
// overrides the script's own --workers=2. Under mpirun with more than one
// process the mode is mpi unless --mode says otherwise, and --mode=threads
// there is a usage error: every process would train alone.
//
// Exit status, as Unix tools have it: 0 after --help or --version,
// kUsageExitCode for a usage error (this parser's, or Train's UsageError),
// 1 when training fails.
#ifndef TANDEM_TRAINER_FLAGS_H_
#define TANDEM_TRAINER_FLAGS_H_

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "trainer/train_config.h"

namespace tandem {

class TrainerCommandLine {
 public:
  // Flags whose strings become part of the TrainConfig after parsing.
  struct Raw {
    std::string mode;  // empty: not given
    std::string precision = "fp32";
    int workers = 1;
  };

  TrainerCommandLine(const std::string& description, TrainConfig& config);
  // Where the program adds its own flags, before Parse.
  CLI::App& app() { return app_; }
  // Adds the Trainer's flags and parses into the config. Returns nullopt to
  // go on and train, or the exit code to end with: --help and --version
  // print to `out`, usage errors to `err` ("error: <what was wrong and what
  // to do>"). `resolve`, when given, runs after parsing to turn the
  // program's own strings into values; it may throw UsageError.
  std::optional<int> Parse(int argc, const char* const* argv, std::ostream& out,
                           std::ostream& err, const std::function<void()>& resolve = {});

 private:
  CLI::App app_;
  TrainConfig& config_;
  Raw raw_;
};

// How many processes the launcher started, from its environment
// (OMPI_COMM_WORLD_SIZE for Open MPI, PMI_SIZE for MPICH and Slurm); 1
// without a launcher.
int LauncherWorldSize();

}  // namespace tandem

#endif  // TANDEM_TRAINER_FLAGS_H_
