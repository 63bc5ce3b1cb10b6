#include "trainer/config_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/backend_registry.h"
#include "parallel/checkpointer.h"

namespace tandem {

namespace {

// Throws UsageError with its arguments streamed into the message.
template <typename... Args>
[[noreturn]] void Fail(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  throw UsageError(out.str());
}

bool OneOf(const std::string& value, std::initializer_list<const char*> choices) {
  for (const char* choice : choices) {
    if (value == choice) return true;
  }
  return false;
}

void CheckRanges(const TrainConfig& c) {
  if (c.epochs < 1) Fail("--epochs must be at least 1, got ", c.epochs);
  if (c.batch_size < 1) Fail("--batch_size must be at least 1, got ", c.batch_size);
  if (!(c.bucket_mb > 0)) Fail("--bucket_mb must be positive, got ", c.bucket_mb);
  if (c.steps < 0) Fail("--steps must not be negative, got ", c.steps);
  if (c.accumulate < 1) Fail("--accumulate must be at least 1, got ", c.accumulate);
  if (c.warmup_steps < 0) Fail("--warmup must not be negative, got ", c.warmup_steps);
  if (!(c.clip_grad_norm >= 0)) {
    Fail("--clip_grad_norm must be a non-negative number (0: off), got ", c.clip_grad_norm);
  }
  if (c.eval_every < 0) Fail("--eval_every must not be negative, got ", c.eval_every);
  if (c.max_steps < 0) Fail("--max_steps must not be negative, got ", c.max_steps);
  if (c.trace_steps < 1) Fail("--trace_steps must be at least 1, got ", c.trace_steps);
  if (c.log_every < 0) Fail("--log_every must not be negative, got ", c.log_every);
  if (c.log_every > 0 && c.metrics_path.empty()) {
    Fail("--log_every writes its rows to the --metrics file: give --metrics=FILE too");
  }
  if (c.checkpoint_every < 0) {
    Fail("--checkpoint_every must not be negative, got ", c.checkpoint_every);
  }
  if (c.resume && c.checkpoint_dir.empty()) Fail("--resume needs --checkpoint_dir");
  if (c.checkpoint_every > 0 && c.checkpoint_dir.empty()) {
    Fail("--checkpoint_every needs --checkpoint_dir");
  }
}

void CheckChoices(const TrainConfig& c) {
  if (!OneOf(c.lr_schedule, {"constant", "cosine"})) {
    Fail("--lr_schedule=", c.lr_schedule, " is not a schedule: use constant or cosine");
  }
  const OptimizerConfig& o = c.optimizer;
  if (!OneOf(o.name, {"sgd", "adamw"})) {
    Fail("unknown optimizer '", o.name, "' (--optimizer): use sgd or adamw");
  }
  if (!(std::isfinite(o.lr) && o.lr >= 0)) Fail("--lr must be a non-negative number, got ", o.lr);
  if (o.name == "sgd" && !(o.momentum >= 0 && o.momentum < 1)) {
    Fail("--momentum must be in [0, 1), got ", o.momentum);
  }
}

// "cuda" is 0, "cuda:N" is N, anything else nullopt.
std::optional<int> CudaIndex(const std::string& text) {
  if (text == "cuda") return 0;
  // Up to four digits: no machine has more GPUs, and atoi cannot overflow.
  if (text.rfind("cuda:", 0) != 0 || text.size() == 5 || text.size() > 9) return std::nullopt;
  for (size_t i = 5; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
  }
  return std::atoi(text.c_str() + 5);
}

// `workers`: threads mode's worker count, one GPU each; 0 under mpirun,
// where the launcher checks GPUs per node once the ranks can agree.
void CheckDevice(const std::string& text, int workers) {
  if (text == "cpu" || text == "auto") return;
  const std::optional<int> index = CudaIndex(text);
  if (!index) Fail("--device=", text, " is not a device: use cpu, cuda, cuda:N or auto");
  const int count = CudaDeviceCount();
  if (count == 0) {
    Fail("--device=", text, " cannot be used: ", CudaUnavailableReason(),
         "; use --device=cpu, or --device=auto to use a GPU when there is one");
  }
  if (*index >= count) {
    Fail("--device=", text, " but only ", count, " CUDA device(s) are visible");
  }
  if (workers > count) {
    Fail("--workers=", workers, " but only ", count,
         " CUDA device(s) are visible: each worker needs a GPU of its own");
  }
}

void CheckLaunch(const TrainConfig& c) {
  const bool mpi = c.launch.mode == LaunchMode::kMpi;
  if (mpi && c.launch.workers.has_value()) {
    Fail("--workers cannot be used with --mode=mpi (the mode under mpirun): "
         "the number of workers is mpirun's -np");
  }
  const int workers = c.launch.workers.value_or(1);
  if (workers < 1) Fail("--workers must be at least 1, got ", workers);
  if (c.batch_size < workers) {
    Fail("--batch_size=", c.batch_size, " is smaller than --workers=", workers,
         ": every worker needs at least one example");
  }
  if (c.batch_size < static_cast<int64_t>(workers) * c.accumulate) {
    Fail("--batch_size=", c.batch_size, " cannot give each of ", workers, " worker(s) ",
         c.accumulate, " micro-batches (--accumulate): every micro-batch needs an example");
  }
  if (!(c.launch.collective_timeout_s > 0)) {
    Fail("--collective_timeout must be a positive number of seconds, got ",
         c.launch.collective_timeout_s);
  }
  if (c.launch.cpu_threads < 0) {
    Fail("--cpu_threads must be 0 (cores / workers) or more, got ", c.launch.cpu_threads);
  }
  if (c.launch.gradient_lanes < 1) {
    Fail("--gradient_lanes must be at least 1, got ", c.launch.gradient_lanes);
  }
  CheckDevice(c.launch.device, mpi ? 0 : workers);
}

}  // namespace

bool IsDirectory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

void CheckOutputFile(const char* flag, const std::string& path) {
  if (path.empty()) return;
  if (IsDirectory(path)) Fail(flag, "=", path, " is a directory: give a file name");
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (!IsDirectory(dir)) {
    Fail(flag, "=", path, ": directory ", dir, " does not exist; create it or choose another path");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    Fail(flag, "=", path, ": directory ", dir, " is not writable");
  }
}

void CheckConfig(const TrainConfig& config) {
  CheckRanges(config);
  CheckChoices(config);
  CheckLaunch(config);
  CheckOutputFile("--metrics", config.metrics_path);
  CheckOutputFile("--plot", config.plot_path);
  CheckOutputFile("--trace", config.trace_path);
  CheckOutputFile("--export_safetensors", config.export_safetensors);
  struct stat info;
  if (!config.checkpoint_dir.empty() && ::stat(config.checkpoint_dir.c_str(), &info) == 0 &&
      !S_ISDIR(info.st_mode)) {
    Fail("--checkpoint_dir=", config.checkpoint_dir, " is a file, not a directory");
  }
}

std::vector<uint64_t> RunKey(const TrainConfig& config, int64_t train_examples) {
  return {config.seed, static_cast<uint64_t>(config.batch_size),
          static_cast<uint64_t>(train_examples)};
}

void CheckRunKey(const CheckpointState& state, const std::vector<uint64_t>& key,
                 const TrainConfig& config) {
  const std::string path = CheckpointPath(config.checkpoint_dir);
  const auto saved = state.extra_u64.find(kRunKey);
  if (saved == state.extra_u64.end() || saved->second.size() != key.size()) {
    Fail(path, " does not record the --seed, --batch_size and training set of the run that "
               "saved it, so it cannot be resumed safely; start afresh with another "
               "--checkpoint_dir");
  }
  if (saved->second == key) return;
  const char* const names[] = {"--seed", "--batch_size", "training examples"};
  std::ostringstream differences;
  for (size_t i = 0; i < key.size(); ++i) {
    if (saved->second[i] == key[i]) continue;
    if (differences.tellp() > 0) differences << "; ";
    differences << names[i] << ": " << saved->second[i] << " there, " << key[i] << " here";
  }
  Fail(path, " was saved by another run (", differences.str(),
       "): resuming would change the data order; resume with the flags it was saved with, "
       "or start afresh with another --checkpoint_dir");
}

void CheckResumable(const TrainConfig& config, int64_t train_examples) {
  if (!config.resume) return;
  const std::optional<CheckpointState> state = LoadLatestCheckpoint(config.checkpoint_dir);
  if (state) CheckRunKey(*state, RunKey(config, train_examples), config);
}

}  // namespace tandem
