#include "examples/char_lm/flags.h"

#include <string>

#include "trainer/flags.h"

namespace tandem {
namespace char_lm {

std::optional<int> ParseCharLmFlags(int argc, const char* const* argv, CharLmConfig& config,
                                    std::ostream& out, std::ostream& err) {
  TrainerCommandLine cli("Tandem: a character-level MLP language model trained on a word list",
                         config);
  CLI::App& app = cli.app();
  app.footer(
      "Examples:\n"
      "  char_lm                          1 worker on wamerican's word list\n"
      "  char_lm --workers=2              2 worker threads\n"
      "  mpirun -np 2 char_lm             2 processes (mode mpi)\n"
      "  char_lm --device=cuda --precision=bf16\n"
      "Exit status: 0 when training ends, 1 when it fails, 2 for a usage error.");
  app.option_defaults()->group("Data");
  app.add_option("--words", config.words_path, "word list, UTF-8, one word per line");
  app.option_defaults()->group("Model");
  // Ranges past which a model cannot be what was meant: each out of range is
  // a usage error (exit 2) before anything is allocated.
  ModelConfig& m = config.model;
  app.add_option("--context", m.context, "previous characters the model sees")
      ->check(CLI::Range(1, 1024));
  app.add_option("--embed", m.embed, "embedding features per character")
      ->check(CLI::Range(1, 4096));
  app.add_option("--hidden", m.hidden, "width of the residual MLP blocks")
      ->check(CLI::Range(1, 65536));
  app.add_option("--blocks", m.blocks, "residual blocks")->check(CLI::Range(0, 1000));
  std::string activation = "gelu";
  app.add_option("--activation", activation, "inside each block")
      ->check(CLI::IsMember({"relu", "gelu", "tanh"}));
  app.add_option("--dropout", m.dropout, "in each block, after its last Linear; 0 <= p < 1")
      ->check(CLI::Range(0.0, 0.999999));
  app.option_defaults()->group("Output");
  app.add_option("--samples", config.samples, "words sampled at the end")
      ->check(CLI::Range(0, 10000));
  return cli.Parse(argc, argv, out, err, [&] {
    m.activation = ParseActivation(activation);
    // --epochs alone means passes over the words rather than the default --steps.
    if (app.count("--epochs") > 0 && app.count("--steps") == 0) config.steps = 0;
  });
}

}  // namespace char_lm
}  // namespace tandem
