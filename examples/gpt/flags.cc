#include "examples/gpt/flags.h"

#include <string>

#include "trainer/flags.h"

namespace tandem {
namespace gpt {

std::optional<int> ParseGptFlags(int argc, const char* const* argv, GptConfig& config,
                                 std::ostream& out, std::ostream& err) {
  TrainerCommandLine cli("Tandem: a character-level GPT trained on Debian's fortunes", config);
  CLI::App& app = cli.app();
  app.footer(
      "Examples:\n"
      "  gpt                              1 worker on /usr/share/games/fortunes\n"
      "  gpt --workers=2                  2 worker threads\n"
      "  mpirun -np 2 gpt                 2 processes (mode mpi)\n"
      "  gpt --device=cuda --precision=bf16\n"
      "  gpt --corpus=input.txt --prompt='ROMEO:'\n"
      "Exit status: 0 when training ends, 1 when it fails, 2 for a usage error.");
  app.option_defaults()->group("Data");
  app.add_option("--corpus", config.corpus,
                 "a folder of text files (read in name order, .dat and .u8 skipped), or one "
                 "file");
  app.add_option("--val_windows", config.val_windows,
                 "validation windows, spread evenly over the validation text; 0: every "
                 "non-overlapping window")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.option_defaults()->group("Model");
  // Ranges past which a model cannot be what was meant: each out of range is
  // a usage error (exit 2) before anything is allocated.
  ModelConfig& m = config.model;
  app.add_option("--context", m.context, "bytes the model sees (positions)")
      ->check(CLI::Range(1, 8192));
  app.add_option("--layers", m.layers, "transformer blocks")->check(CLI::Range(0, 1000));
  app.add_option("--heads", m.heads, "attention heads; they must divide --width")
      ->check(CLI::Range(1, 1024));
  app.add_option("--width", m.width, "features per position (the residual stream)")
      ->check(CLI::Range(1, 65536));
  app.option_defaults()->group("Output");
  app.add_option("--sample_length", config.sample_length, "bytes sampled at the end; 0: none")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app.add_option("--temperature", config.temperature,
                 "of the sampling; 0: the most likely byte each time")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--prompt", config.prompt, "text the sample starts from (default: a newline)");
  return cli.Parse(argc, argv, out, err, [&] {
    // --epochs alone means passes over the windows rather than the default --steps.
    if (app.count("--epochs") > 0 && app.count("--steps") == 0) config.steps = 0;
    if (m.width % m.heads != 0) {
      throw UsageError("--width=" + std::to_string(m.width) + " is not a multiple of --heads=" +
                       std::to_string(m.heads) + ": each head attends over width / heads features");
    }
  });
}

}  // namespace gpt
}  // namespace tandem
