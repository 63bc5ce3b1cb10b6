#include "trainer/config_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/backend_registry.h"
#include "parallel/checkpointer.h"
#include "parallel/deterministic_sum.h"
#include "parallel/launcher.h"

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

// The flags' upper limits: past them a run cannot be what was meant (a
// batch or bucket larger than any memory, threads by the hundred thousand,
// a timeout of centuries) and would fail late, or overflow on the way.
constexpr int64_t kMaxCount = 1'000'000'000;   // epochs, steps and step intervals
constexpr int64_t kMaxBatch = int64_t{1} << 24;
constexpr double kMaxBucketMb = 4096;
constexpr int64_t kMaxTraceSteps = 1000;
constexpr int kMaxThreads = 1024;               // --workers, --cpu_threads
constexpr int kMaxGradientComms = 64;
constexpr double kMaxTimeoutS = 7 * 24 * 3600;  // a week

// Throws unless lo <= value <= hi, naming the flag and its range.
template <typename T>
void CheckIn(const char* flag, T value, T lo, T hi) {
  if (!(value >= lo && value <= hi)) Fail(flag, " must be in [", lo, ", ", hi, "], got ", value);
}

// Throws unless 0 < value <= hi (NaN and infinities fail too).
void CheckPositive(const char* flag, double value, double hi, const char* unit = "") {
  if (!(value > 0 && value <= hi)) {
    Fail(flag, " must be a positive number", unit, " up to ", hi, ", got ", value);
  }
}

// Throws unless value is finite and not negative.
void CheckNonNegative(const char* flag, double value, const char* meaning = "") {
  if (!(std::isfinite(value) && value >= 0)) {
    Fail(flag, " must be a non-negative number", meaning, ", got ", value);
  }
}

void CheckRanges(const TrainConfig& c) {
  CheckIn<int64_t>("--epochs", c.epochs, 1, kMaxCount);
  CheckIn<int64_t>("--batch_size", c.batch_size, 1, kMaxBatch);
  CheckPositive("--bucket_mb", c.bucket_mb, kMaxBucketMb);
  CheckIn<int64_t>("--steps", c.steps, 0, kMaxCount);
  CheckIn<int64_t>("--accumulate", c.accumulate, 1, kMaxBatch);
  CheckIn<int64_t>("--warmup", c.warmup_steps, 0, kMaxCount);
  CheckNonNegative("--clip_grad_norm", c.clip_grad_norm, " (0: off)");
  CheckIn<int64_t>("--eval_every", c.eval_every, 0, kMaxCount);
  CheckIn<int64_t>("--max_steps", c.max_steps, 0, kMaxCount);
  CheckIn<int64_t>("--trace_steps", c.trace_steps, 1, kMaxTraceSteps);
  CheckIn<int64_t>("--log_every", c.log_every, 0, kMaxCount);
  if (c.log_every > 0 && c.metrics_path.empty()) {
    Fail("--log_every writes its rows to the --metrics file: give --metrics=FILE too");
  }
  CheckIn<int64_t>("--checkpoint_every", c.checkpoint_every, 0, kMaxCount);
  if (c.resume && c.checkpoint_dir.empty()) Fail("--resume needs --checkpoint_dir");
  if (c.checkpoint_every > 0 && c.checkpoint_dir.empty()) {
    Fail("--checkpoint_every needs --checkpoint_dir");
  }
}

// --deterministic; the world size under mpirun is checked by the workers.
void CheckDeterministic(const TrainConfig& c) {
  CheckIn<int64_t>("--micro_shards", c.micro_shards, 1, kMaxBatch);
  if (!IsPowerOfTwo(c.micro_shards)) {
    Fail("--micro_shards=", c.micro_shards,
         " is not a power of two: deterministic sums add the pieces in a binary tree");
  }
  if (c.accumulate > 1) {
    Fail("--accumulate cannot be combined with --deterministic: --micro_shards already cuts "
         "each batch into pieces whose gradients are computed one at a time");
  }
  if (c.bf16_allreduce) {
    Fail("--bf16_allreduce cannot be combined with --deterministic: the deterministic sum "
         "adds float32 gradients in a fixed order; drop one of the two flags");
  }
  if (c.launch.device != "cpu" && c.launch.device != "auto") {
    Fail("--deterministic runs on the CPU only (--device=cpu), not --device=", c.launch.device,
         ": GPU kernels are not checked to give the same bits run to run");
  }
  if (c.launch.mode == LaunchMode::kThreads) {
    const int workers = c.launch.workers.value_or(1);
    if (!IsPowerOfTwo(workers) || workers > c.micro_shards) {
      Fail("--deterministic needs a power-of-two number of workers no larger than "
           "--micro_shards=", c.micro_shards, ", not --workers=", workers);
    }
  }
  if (c.batch_size < c.micro_shards) {
    Fail("--batch_size=", c.batch_size, " is smaller than --micro_shards=", c.micro_shards,
         ": every piece of a batch needs an example");
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
  CheckNonNegative("--lr", o.lr);
  CheckNonNegative("--weight_decay", o.weight_decay);
  if (o.name == "sgd" && !(o.momentum >= 0 && o.momentum < 1)) {
    Fail("--momentum must be in [0, 1), got ", o.momentum);
  }
  if (c.deterministic) CheckDeterministic(c);
  if (c.shard_optimizer && c.bf16_allreduce) {
    Fail("--shard_optimizer cannot be combined with --bf16_allreduce: sharding reduce-scatters "
         "the float32 gradients itself; drop one of the two flags");
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
  CheckIn("--workers", workers, 1, kMaxThreads);
  if (c.batch_size < workers) {
    Fail("--batch_size=", c.batch_size, " is smaller than --workers=", workers,
         ": every worker needs at least one example");
  }
  if (c.batch_size < static_cast<int64_t>(workers) * c.accumulate) {
    Fail("--batch_size=", c.batch_size, " cannot give each of ", workers, " worker(s) ",
         c.accumulate, " micro-batches (--accumulate): every micro-batch needs an example");
  }
  CheckPositive("--collective_timeout", c.launch.collective_timeout_s, kMaxTimeoutS,
                " of seconds");
  CheckIn("--cpu_threads", c.launch.cpu_threads, 0, kMaxThreads);  // 0: cores / workers
  CheckIn("--gradient_comms", c.launch.gradient_comms, 1, kMaxGradientComms);
  CheckDevice(c.launch.device, mpi ? 0 : workers);
}

}  // namespace

bool IsDirectory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

std::string ReadableFileProblem(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    struct stat link;
    const int error = errno;
    if (error == ENOENT && ::lstat(path.c_str(), &link) == 0) {
      return "is a symbolic link to a file that does not exist";
    }
    if (error == ENOENT) return "does not exist";
    return std::string("cannot be read (") + std::strerror(error) + ")";
  }
  if (S_ISDIR(info.st_mode)) return "is a directory";
  if (!S_ISREG(info.st_mode)) return "is not a regular file (a FIFO, socket or device)";
  if (::access(path.c_str(), R_OK) != 0) {
    return std::string("cannot be read (") + std::strerror(errno) + ")";
  }
  return "";
}

void CheckOutputFile(const char* flag, const std::string& path) {
  if (path.empty()) return;
  if (IsDirectory(path)) Fail(flag, "=", path, " is a directory: give a file name");
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    Fail(flag, "=", path, " is not a regular file (a FIFO, socket or device): give a file name");
  }
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

std::optional<DirectoryLock> PrepareAndLockCheckpointDir(const TrainConfig& config) {
  const std::string& dir = config.checkpoint_dir;
  if (dir.empty()) return std::nullopt;
  // Under mpirun only rank 0 writes checkpoints; the others may see the
  // directory read-only (another host's mount).
  if (config.launch.mode == LaunchMode::kMpi && LauncherWorldRank() != 0) return std::nullopt;
  const std::string problem = PrepareCheckpointDir(dir);
  if (!problem.empty()) {
    Fail("--checkpoint_dir=", dir, ": ", problem, "; choose a directory you can write to");
  }
  try {
    return std::optional<DirectoryLock>(std::in_place, dir);
  } catch (const Error& e) {
    throw UsageError(e.what());
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
  // Something in the checkpoint's place that is not a file to read (a FIFO,
  // a link to nothing): the user's setup, so a usage error like a missing
  // data set, before the reader refuses it.
  const std::string path = CheckpointPath(config.checkpoint_dir);
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0) {
    const std::string problem = ReadableFileProblem(path);
    if (!problem.empty()) {
      Fail(path, " ", problem, ": remove it, or put there the checkpoint to resume from");
    }
  }
  const std::optional<CheckpointState> state = LoadLatestCheckpoint(config.checkpoint_dir);
  if (state) CheckRunKey(*state, RunKey(config, train_examples), config);
}

}  // namespace tandem
