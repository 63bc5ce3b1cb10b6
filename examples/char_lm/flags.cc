#include "examples/char_lm/flags.h"

#include <CLI/CLI.hpp>

#include <string>

#include "examples/fashion_mnist/flags.h"  // kUsageExitCode, LauncherWorldSize

namespace tandem {
namespace char_lm {

namespace {

struct RawFlags {
  std::string activation = "gelu";
  std::string precision = "fp32";
  std::string mode;  // empty: threads, or mpi under mpirun
  int workers = 1;
};

void AddModelFlags(CLI::App& app, CharLmConfig& c, RawFlags& raw) {
  app.option_defaults()->group("Model");
  const auto positive = CLI::PositiveNumber;
  app.add_option("--context", c.model.context, "previous characters the model sees")->check(positive);
  app.add_option("--embed", c.model.embed, "embedding features per character")->check(positive);
  app.add_option("--hidden", c.model.hidden, "width of the residual MLP blocks")->check(positive);
  app.add_option("--blocks", c.model.blocks, "residual blocks")->check(CLI::NonNegativeNumber);
  app.add_option("--activation", raw.activation, "inside each block")
      ->check(CLI::IsMember({"relu", "gelu", "tanh"}));
  app.add_option("--precision", raw.precision,
                 "bf16: bfloat16 activations and GEMMs, float32 weights")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}));
}

void AddTrainingFlags(CLI::App& app, CharLmConfig& c) {
  app.option_defaults()->group("Optimisation");
  app.add_option("--steps", c.steps, "optimizer steps")->check(CLI::PositiveNumber);
  app.add_option("--epochs", c.epochs, "passes over the training words instead of --steps (0: use --steps)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch_size", c.batch_size, "global batch, split across workers")
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", c.lr, "AdamW's peak learning rate")->check(CLI::PositiveNumber);
  app.add_option("--weight_decay", c.weight_decay, "AdamW's decoupled weight decay")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--warmup", c.warmup, "steps of linear warm-up before the cosine decay")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", c.seed, "initialisation, shuffling and sampling (not the split)");
}

void AddRunFlags(CLI::App& app, CharLmConfig& c, RawFlags& raw) {
  app.option_defaults()->group("Data");
  app.add_option("--words", c.words_path, "word list, UTF-8, one word per line");
  app.option_defaults()->group("Parallelism");
  app.add_option("--mode", raw.mode, "threads, or mpi under mpirun (the default there)")
      ->check(CLI::IsMember({"threads", "mpi"}));
  app.add_option("--workers", raw.workers, "worker threads (threads mode)")
      ->check(CLI::PositiveNumber);
  app.add_option("--device", c.launch.device, "cpu, cuda, cuda:N or auto");
  app.option_defaults()->group("Output");
  app.add_option("--eval_every", c.eval_every, "steps between validation lines (0: at the end)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--samples", c.samples, "words sampled at the end")->check(CLI::NonNegativeNumber);
}

}  // namespace

std::optional<int> ParseCharLmFlags(int argc, const char* const* argv, CharLmConfig& config,
                                    std::ostream& out, std::ostream& err) {
  CLI::App app{"Tandem: a character-level MLP language model trained on a word list"};
  app.footer(
      "Examples:\n"
      "  char_lm                          1 worker on wamerican's word list\n"
      "  char_lm --workers=2              2 worker threads\n"
      "  mpirun -np 2 char_lm             2 processes (mode mpi)\n"
      "  char_lm --device=cuda --precision=bf16");
  app.set_help_flag("-h,--help", "print this help and exit");
  app.option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
  RawFlags raw;
  AddModelFlags(app, config, raw);
  AddTrainingFlags(app, config);
  AddRunFlags(app, config, raw);
  try {
    app.parse(argc, argv);
    config.model.activation = ParseActivation(raw.activation);
    config.model.precision = ParsePrecision(raw.precision);
    const int world = LauncherWorldSize();
    config.launch.mode = raw.mode.empty() ? (world > 1 ? LaunchMode::kMpi : LaunchMode::kThreads)
                                          : ParseLaunchMode(raw.mode);
    if (config.launch.mode == LaunchMode::kThreads && world > 1) {
      throw UsageError("--mode=threads under mpirun would run " + std::to_string(world) +
                       " separate trainings: leave --mode out, or run without mpirun and use "
                       "--workers=N");
    }
    if (app.count("--workers") > 0) config.launch.workers = raw.workers;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);  // --help
    err << "error: " << e.what() << "\nRun with --help for the flags.\n";
    return kUsageExitCode;
  } catch (const UsageError& e) {
    err << "error: " << e.what() << "\n";
    return kUsageExitCode;
  }
  return std::nullopt;
}

}  // namespace char_lm
}  // namespace tandem
