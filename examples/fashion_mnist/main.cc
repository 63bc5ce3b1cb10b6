// Trains an MLP on Fashion-MNIST, on one worker or many.
//
//   bazel run -c opt //examples:fashion_mnist -- --mode=threads --workers=2
//   mpirun -np 4 bazel-bin/examples/fashion_mnist --mode=mpi
//
// The last line printed is `test_accuracy=0.xxxx`.
#include <CLI/CLI.hpp>
#include <iomanip>
#include <iostream>

#include "core/check.h"
#include "examples/fashion_mnist/train.h"

int main(int argc, char** argv) {
  tandem::TrainConfig config;
  std::string hidden = "512,256";
  std::string mode = "threads";
  std::string precision = "fp32";
  int workers = 0;

  CLI::App app{"Tandem: train an MLP on Fashion-MNIST with data parallelism"};
  app.option_defaults()->always_capture_default();
  app.add_option("--data_dir", config.data_dir,
                 "directory holding the four Fashion-MNIST .gz files");
  app.add_option("--epochs", config.epochs, "passes over the training set");
  app.add_option("--batch_size", config.batch_size,
                 "global batch size, split across workers");
  app.add_option("--lr", config.optimizer.lr, "learning rate");
  app.add_option("--lr_schedule", config.lr_schedule,
                 "constant or cosine (decay to 0 over the run)");
  app.add_option("--hidden", hidden, "hidden layer sizes, comma-separated");
  app.add_option("--activation", config.activation, "relu, gelu or tanh");
  app.add_option("--dropout", config.dropout, "dropout after each hidden layer");
  app.add_option("--precision", precision,
                 "fp32, tf32 (TF32 GEMMs) or bf16 (bfloat16 activations and GEMMs, "
                 "float32 master weights)");
  app.add_option("--optimizer", config.optimizer.name, "sgd or adamw");
  app.add_option("--momentum", config.optimizer.momentum, "SGD momentum");
  app.add_flag("--nesterov", config.optimizer.nesterov, "Nesterov momentum (SGD)");
  app.add_option("--weight_decay", config.optimizer.weight_decay,
                 "L2 (SGD) or decoupled (AdamW) weight decay");
  app.add_option("--seed", config.seed, "seed for initialisation and shuffling");
  app.add_option("--mode", mode,
                 "threads (one process) or mpi (started by mpirun)");
  app.add_option("--workers", workers,
                 "worker threads in threads mode (default 1); not with --mode=mpi");
  app.add_option("--device", config.launch.device, "cpu");
  app.add_option("--collective_timeout", config.launch.collective_timeout_s,
                 "seconds after which a hung collective fails the run (MPI: aborts the job)");
  app.add_flag("--check_collectives", config.launch.check_collectives,
               "debug: compare every collective across ranks (MPI, NCCL) before running it");
  app.add_option("--bucket_mb", config.bucket_mb, "gradient bucket size in MiB");
  app.add_flag("--bf16_allreduce", config.bf16_allreduce,
               "all-reduce gradients as bfloat16 (half the bytes), back into float32");
  app.add_option("--gradient_lanes", config.launch.gradient_lanes,
                 "GPUs: NCCL communicators the gradient buckets are spread over");
  app.add_flag("--no_overlap", [&](int64_t) { config.overlap = false; },
               "all-reduce after backward instead of during it");
  app.add_option("--max_train", config.max_train,
                 "use only the first N training examples (-1: all)");
  app.add_option("--max_test", config.max_test,
                 "use only the first N test examples (-1: all)");
  app.add_flag("--quiet", config.quiet, "print only the final line");
  app.add_option("--metrics", config.metrics_path,
                 "write per-epoch metrics as JSON Lines to this file");
  app.add_option("--plot", config.plot_path,
                 "write an SVG of the loss and accuracy curves to this file");
  app.add_option("--trace", config.trace_path,
                 "write a Chrome trace (chrome://tracing, Perfetto) of a few steps");
  app.add_option("--trace_steps", config.trace_steps, "how many steps --trace records");
  app.add_option("--checkpoint_dir", config.checkpoint_dir,
                 "directory for checkpoint.tnd (rank 0 writes it atomically)");
  app.add_option("--checkpoint_every", config.checkpoint_every,
                 "save every N steps (0: only at the end)");
  app.add_flag("--resume", config.resume,
               "continue from --checkpoint_dir's checkpoint, if there is one");
  app.add_option("--max_steps", config.max_steps, "stop after N steps in all (0: no limit)");
  app.add_flag("--skip_nonfinite", config.skip_nonfinite,
               "skip steps whose loss is NaN/Inf instead of stopping");
  CLI11_PARSE(app, argc, argv);

  try {
    config.hidden = tandem::ParseSizes(hidden);
    config.launch.mode = tandem::ParseLaunchMode(mode);
    config.precision = tandem::ParsePrecision(precision);
    if (app.count("--workers") > 0) config.launch.workers = workers;
    const tandem::TrainResult result = tandem::TrainFashionMnist(config, std::cout);
    if (result.is_root) {
      std::cout << "trained in " << std::fixed << std::setprecision(1)
                << result.seconds << " s\n"
                << "test_accuracy=" << std::setprecision(4) << result.test_accuracy
                << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
