#include "trainer/flags.h"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "trainer/version.h"

namespace tandem {

namespace {

// CLI11's layout in 80 columns: names in the first 40, descriptions wrapped
// into the other 40, one blank line between groups.
class HelpFormatter : public CLI::Formatter {
 public:
  static constexpr size_t kNameColumns = 40;
  static constexpr size_t kDescriptionColumns = 40;

  HelpFormatter() { column_width(kNameColumns); }

  std::string make_usage(const CLI::App* app, std::string name) const override {
    return CLI::Formatter::make_usage(app, std::move(name)) + "\n";
  }
  // Without the group's leading newline: CLI11 already puts one after each.
  std::string make_group(std::string group, bool is_positional,
                         std::vector<const CLI::Option*> opts) const override {
    return CLI::Formatter::make_group(std::move(group), is_positional, std::move(opts)).substr(1);
  }
  // CLI11 indents each line after a newline in a description to its column.
  std::string make_option_desc(const CLI::Option* opt) const override {
    std::istringstream words(CLI::Formatter::make_option_desc(opt));
    std::string wrapped, line, word;
    while (words >> word) {
      if (!line.empty() && line.size() + 1 + word.size() > kDescriptionColumns) {
        wrapped += line + "\n";
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
    }
    return wrapped + line;
  }
};

// --device: cpu, cuda, cuda:N or auto.
CLI::Validator DeviceValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text == "cpu" || text == "cuda" || text == "auto") return "";
        if (text.rfind("cuda:", 0) == 0 && text.size() > 5 &&
            text.find_first_not_of("0123456789", 5) == std::string::npos) {
          return "";
        }
        return text + " is not a device: use cpu, cuda, cuda:N or auto";
      },
      "{cpu,cuda,cuda:N,auto}");
}

// An unsigned flag (--seed): digits only. CLI11 alone would read "-1" into
// an unsigned as 2^64 - 1.
CLI::Validator WholeNumberValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) return "";
        return text + " is not a whole number from 0 up";
      },
      "");
}

void AddPrecisionFlag(CLI::App& app, TrainerCommandLine::Raw& raw) {
  app.option_defaults()->group("Model");
  app.add_option("--precision", raw.precision,
                 "tf32: TF32 GEMMs (GPUs); bf16: bfloat16 activations and GEMMs, "
                 "float32 weights")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}));
}

void AddOptimisationFlags(CLI::App& app, TrainConfig& c) {
  app.option_defaults()->group("Optimisation");
  app.add_option("--epochs", c.epochs, "passes over the training set");
  app.add_option("--steps", c.steps,
                 "train exactly N steps instead, over as many epochs as that takes (0: by epochs)");
  app.add_option("--batch_size", c.batch_size, "global batch size, split across workers");
  app.add_option("--optimizer", c.optimizer.name, "the optimizer")->check(CLI::IsMember({"sgd", "adamw"}));
  app.add_option("--lr", c.optimizer.lr, "learning rate (the peak, with --lr_schedule=cosine)");
  app.add_option("--lr_schedule", c.lr_schedule, "cosine: decays to 0 over the run")
      ->check(CLI::IsMember({"constant", "cosine"}));
  app.add_option("--warmup", c.warmup_steps, "steps of linear learning-rate warm-up");
  app.add_option("--accumulate", c.accumulate,
                 "split each worker's batch into N micro-batches, gradients accumulated");
  app.add_option("--clip_grad_norm", c.clip_grad_norm,
                 "clip the gradient's global L2 norm to this (0: off)");
  app.add_option("--momentum", c.optimizer.momentum, "SGD momentum, in [0, 1)");
  app.add_flag("--nesterov", c.optimizer.nesterov, "Nesterov momentum (SGD)");
  app.add_option("--weight_decay", c.optimizer.weight_decay,
                 "L2 (SGD) or decoupled (AdamW) weight decay");
  app.add_option("--seed", c.seed, "seed for initialisation, shuffling and dropout")
      ->check(WholeNumberValidator());
  app.add_option("--max_steps", c.max_steps,
                 "stop after N steps in all, a resumed run's earlier ones included (0: none)");
}

void AddParallelismFlags(CLI::App& app, TrainConfig& c, TrainerCommandLine::Raw& raw) {
  app.option_defaults()->group("Parallelism");
  app.add_option("--mode", raw.mode,
                 "threads: workers are threads of one process; mpi: one process per worker, "
                 "started by mpirun (the default there)")
      ->check(CLI::IsMember({"threads", "mpi"}));
  app.add_option("--workers", raw.workers,
                 "worker threads (threads mode); under mpirun, -np sets the count");
  app.add_option("--device", c.launch.device,
                 "auto: cuda if a GPU is visible, else cpu; worker i uses GPU i (under "
                 "mpirun: the node-local rank's)")
      ->check(DeviceValidator());
  app.add_option("--bucket_mb", c.bucket_mb, "gradient bucket size in MiB");
  app.add_flag("--no_overlap", [&c](int64_t) { c.overlap = false; },
               "all-reduce after backward instead of during it");
  app.add_flag("--bf16_allreduce", c.bf16_allreduce,
               "all-reduce gradients as bfloat16 (half the bytes), back into float32");
  app.add_flag("--shard_optimizer", c.shard_optimizer,
               "each worker keeps and updates the optimizer state of 1/N of the parameters "
               "(ZeRO-1), which are all-gathered after backward");
  app.add_flag("--deterministic", c.deterministic,
               "bitwise the same parameters for any power-of-two number of workers (CPU): "
               "gradients summed over --micro_shards pieces of each batch in one fixed order");
  app.add_option("--micro_shards", c.micro_shards,
                 "with --deterministic: pieces each batch is cut into (a power of two, at "
                 "least the workers)");
  app.add_option("--gradient_comms", c.launch.gradient_comms,
                 "GPUs: NCCL communicators the gradient buckets are spread over");
  app.add_option("--cpu_threads", c.launch.cpu_threads,
                 "CPU workers: intra-op threads each (0: cores / workers on this machine)");
  app.add_flag("--no_prefetch", [&c](int64_t) { c.prefetch = false; },
               "prepare each batch on the training thread, not in the background");
}

void AddOutputFlags(CLI::App& app, TrainConfig& c) {
  app.option_defaults()->group("Output");
  app.add_flag("--quiet", c.quiet, "print only the final lines");
  app.add_option("--metrics", c.metrics_path,
                 "metrics of each evaluation as JSON Lines (appended to on --resume)");
  app.add_option("--eval_every", c.eval_every,
                 "also evaluate every N steps (0: at each epoch's end; with --steps, at the "
                 "end)");
  app.add_option("--log_every", c.log_every,
                 "also a --metrics row every N steps: loss, learning rate, samples/s, "
                 "gradient norm (0: none)");
  app.add_option("--plot", c.plot_path,
                 "SVG of the loss and accuracy curves, redrawn at each evaluation (on "
                 "--resume: the whole run, from --metrics)");
  app.add_option("--trace", c.trace_path,
                 "Chrome trace (chrome://tracing, Perfetto) of a few steps");
  app.add_option("--trace_steps", c.trace_steps, "how many steps --trace records");
  app.add_option("--export_safetensors", c.export_safetensors,
                 "write the final parameters to this .safetensors file (for PyTorch or numpy)");
}

void AddReliabilityFlags(CLI::App& app, TrainConfig& c) {
  app.option_defaults()->group("Reliability");
  app.add_option("--checkpoint_dir", c.checkpoint_dir,
                 "where checkpoint.tnd is saved when the run ends: its last step, "
                 "--max_steps, or SIGTERM/SIGINT/SIGUSR1 (which exit 75)");
  app.add_option("--checkpoint_every", c.checkpoint_every, "also save every N steps (0: never)");
  app.add_flag("--resume", c.resume,
               "continue from --checkpoint_dir's checkpoint, if there is one");
  app.add_flag("--skip_nonfinite", c.skip_nonfinite,
               "skip steps whose loss is NaN/Inf instead of stopping");
  app.add_option("--collective_timeout", c.launch.collective_timeout_s,
                 "seconds after which a hung collective fails the run (MPI: ends the job)");
  app.add_flag("--check_collectives", c.launch.check_collectives,
               "debug: compare every collective across ranks before running it");
}

// Launchers that start one process per rank; any of these set means mpirun
// (or srun) started this process.
bool StartedByLauncher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

// The parsed strings into `c`; throws UsageError.
void Resolve(const CLI::App& app, const TrainerCommandLine::Raw& raw, TrainConfig& c) {
  c.precision = ParsePrecision(raw.precision);  // one of CLI11's choices
  const int world = LauncherWorldSize();
  if (raw.mode.empty()) {
    c.launch.mode = world > 1 ? LaunchMode::kMpi : LaunchMode::kThreads;
  } else {
    c.launch.mode = ParseLaunchMode(raw.mode);
  }
  if (c.launch.mode == LaunchMode::kThreads && world > 1) {
    throw UsageError("--mode=threads under mpirun would run " + std::to_string(world) +
                     " separate trainings, one per process: leave --mode out (under mpirun "
                     "it is mpi), or run without mpirun and use --workers=N");
  }
  if (c.launch.mode == LaunchMode::kMpi && !StartedByLauncher()) {
    throw UsageError(
        "--mode=mpi needs the program started by mpirun (e.g. mpirun -np 4 " + app.get_name() +
        "); "
        "for workers as threads of one process use --workers=N");
  }
  if (app.count("--workers") > 0) c.launch.workers = raw.workers;
}

}  // namespace

int LauncherWorldSize() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* size = std::getenv(name);
    if (size != nullptr && std::atoi(size) > 0) return std::atoi(size);
  }
  return 1;
}

TrainerCommandLine::TrainerCommandLine(const std::string& description, TrainConfig& config)
    : app_(description), config_(config) {
  app_.formatter(std::make_shared<HelpFormatter>());
  app_.set_help_flag("-h,--help", "print this help and exit");
  app_.set_version_flag("--version", std::string("tandem ") + kTandemVersion,
                        "print the version and exit");
  app_.option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);  // the last copy of a flag wins
  raw_.precision = PrecisionName(config.precision);
}

std::optional<int> TrainerCommandLine::Parse(int argc, const char* const* argv,
                                             std::ostream& out, std::ostream& err,
                                             const std::function<void()>& resolve) {
  AddPrecisionFlag(app_, raw_);
  AddOptimisationFlags(app_, config_);
  AddParallelismFlags(app_, config_, raw_);
  AddOutputFlags(app_, config_);
  AddReliabilityFlags(app_, config_);
  // The program's file name, not the path it was started by (under `bazel
  // run` that is a path deep in Bazel's cache), in usage lines and messages.
  if (argc > 0) app_.name(std::filesystem::path(argv[0]).filename().string());
  try {
    app_.parse(argc, argv);
    Resolve(app_, raw_, config_);
    if (resolve) resolve();
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app_.exit(e, out, err);  // --help, --version
    err << "error: " << e.what() << "\nRun with --help for the flags.\n";
    return kUsageExitCode;
  } catch (const UsageError& e) {
    err << "error: " << e.what() << "\n";
    return kUsageExitCode;
  }
  return std::nullopt;
}

}  // namespace tandem
