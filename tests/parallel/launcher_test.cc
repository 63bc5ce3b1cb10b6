// Tests parallel/launcher.h in threads mode, and the option checks of both
// modes. Mpi mode under mpirun is tested by mpi_launcher_test.
#include "parallel/launcher.h"

#include "core/backend_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/error_text.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

using testing::ErrorText;

LaunchOptions Threads(int workers) {
  LaunchOptions options;
  options.workers = workers;
  return options;
}

TEST(LauncherTest, ThreadsModeRunsEveryRank) {
  for (int n = 1; n <= 4; ++n) {
    std::mutex mu;
    std::vector<int> calls(n, 0);
    std::atomic<int> roots{0};
    std::atomic<int> wrong{0};
    Launch(Threads(n), [&](Worker& w) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++calls.at(w.rank);
      }
      if (w.size != n || w.comm.size() != n || w.comm.rank() != w.rank ||
          w.device != Device::Cpu()) {
        wrong.fetch_add(1);
      }
      if (w.is_root()) roots.fetch_add(1);
      float rank = w.rank;
      w.comm.AllReduce(&rank, 1, ReduceOp::kSum)->Wait();
      if (rank != n * (n - 1) / 2) wrong.fetch_add(1);
    });
    EXPECT_EQ(calls, std::vector<int>(n, 1)) << n << " workers";
    EXPECT_EQ(roots.load(), 1);
    EXPECT_EQ(wrong.load(), 0);
  }
}

TEST(LauncherTest, DefaultsToOneCpuWorkerInThreads) {
  std::atomic<int> calls{0};
  Launch(LaunchOptions(), [&](Worker& w) {
    EXPECT_EQ(w.size, 1);
    EXPECT_TRUE(w.device.is_cpu());
    calls.fetch_add(1);
  });
  EXPECT_EQ(calls.load(), 1);
}

TEST(LauncherTest, FailingWorkerAbortsTheOthersAndIsReported) {
  const Clock::time_point start = Clock::now();
  const std::string error = ErrorText([] {
    Launch(Threads(4), [](Worker& w) {
      if (w.rank == 2) {
        // Let the others settle into the all-reduce before failing.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        throw std::runtime_error("loss is NaN at step 7");
      }
      std::vector<float> grads(1000, 1.0f);
      w.comm.AllReduce(grads.data(), grads.size(), ReduceOp::kSum)->Wait();
    });
  });
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  // The original failure, not the other workers' "collective aborted".
  EXPECT_EQ(error, "worker 2 failed: loss is NaN at step 7");
  EXPECT_LT(seconds, 1.0);
}

// Note [Stuck workers]: worker 1 stops outside any collective; worker 0's
// all-reduce times out; Launch reports that within the grace period instead
// of waiting forever to join worker 1, and names worker 1 as abandoned.
TEST(LauncherTest, StuckWorkerIsAbandonedAfterTheGracePeriod) {
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto finished = std::make_shared<std::atomic<bool>>(false);
  LaunchOptions options = Threads(2);
  options.collective_timeout_s = 0.3;
  options.stop_grace_s = 0.5;
  const Clock::time_point start = Clock::now();
  const std::string error = ErrorText([&] {
    Launch(options, [release, finished](Worker& w) {
      if (w.rank == 1) {
        while (!release->load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        finished->store(true);
        return;
      }
      std::vector<float> grads(10, 1.0f);
      w.comm.AllReduce(grads.data(), grads.size(), ReduceOp::kSum)->Wait();
    });
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(error.rfind("worker 0 failed: ", 0), 0u) << error;
  EXPECT_NE(error.find("AllReduce #1"), std::string::npos) << error;
  EXPECT_NE(error.find("; worker(s) 1 did not stop within 0.5 s of the failure and were "
                       "abandoned"),
            std::string::npos)
      << error;
  EXPECT_GE(seconds, 0.8);
  EXPECT_LT(seconds, 3.0);
  // The abandoned worker may still finish; the state it uses is still there.
  release->store(true);
  for (int i = 0; i < 200 && !finished->load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(finished->load());
}

TEST(LauncherTest, OtherWorkersSeeTheAbortReason) {
  std::mutex mu;
  std::vector<std::string> seen;
  const std::string error = ErrorText([&] {
    Launch(Threads(3), [&](Worker& w) {
      if (w.rank == 0) throw Error("bad batch");
      try {
        w.comm.Barrier()->Wait();
      } catch (const CollectiveAbortedError& e) {
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back(e.what());
        throw;
      }
    });
  });
  EXPECT_EQ(error, "worker 0 failed: bad batch");
  EXPECT_EQ(seen, std::vector<std::string>(
                      2, "collective aborted: worker 0 failed: bad batch"));
}

TEST(LauncherTest, NonStandardExceptionIsReported) {
  const std::string error = ErrorText([] {
    Launch(Threads(2), [](Worker& w) {
      if (w.rank == 1) throw 42;
      w.comm.Barrier()->Wait();
    });
  });
  EXPECT_EQ(error,
            "worker 1 failed: unknown exception (not derived from "
            "std::exception)");
}

TEST(LauncherTest, ParsesTheLaunchModes) {
  EXPECT_EQ(ParseLaunchMode("threads"), LaunchMode::kThreads);
  EXPECT_EQ(ParseLaunchMode("mpi"), LaunchMode::kMpi);
  for (LaunchMode mode : {LaunchMode::kThreads, LaunchMode::kMpi}) {
    EXPECT_EQ(ParseLaunchMode(ToString(mode)), mode) << ToString(mode);
  }
  EXPECT_STREQ(ToString(LaunchMode::kThreads), "threads");
  EXPECT_STREQ(ToString(LaunchMode::kMpi), "mpi");
  EXPECT_EQ(LaunchOptions().mode, LaunchMode::kThreads);
}

TEST(LauncherTest, RejectsUnknownModeNamingTheFlagAndTheValidValues) {
  for (const char* text : {"processes", "", "MPI", "thread"}) {
    const std::string error = ErrorText([&] { ParseLaunchMode(text); });
    EXPECT_NE(error.find(std::string("--mode=") + text +
                         " is not a launch mode: use --mode=threads or --mode=mpi"),
              std::string::npos)
        << error;
  }
}

TEST(LauncherTest, RejectsAModeOutsideTheEnum) {
  LaunchOptions options;
  options.mode = static_cast<LaunchMode>(7);
  bool ran = false;
  const std::string error = ErrorText([&] { Launch(options, [&](Worker&) { ran = true; }); });
  EXPECT_NE(error.find("LaunchOptions::mode holds 7, not a launch mode"), std::string::npos)
      << error;
  EXPECT_FALSE(ran);
}

TEST(LauncherTest, RejectsBadTimeoutsAndLanesNamingTheFlag) {
  LaunchOptions options;
  options.collective_timeout_s = 0;
  std::string error = ErrorText([&] { Launch(options, [](Worker&) {}); });
  EXPECT_NE(error.find("--collective_timeout must be positive, got 0"), std::string::npos)
      << error;
  options = LaunchOptions();
  options.gradient_comms = 0;
  error = ErrorText([&] { Launch(options, [](Worker&) {}); });
  EXPECT_NE(error.find("--gradient_comms must be at least 1, got 0"), std::string::npos)
      << error;
}

TEST(LauncherTest, RejectsTooFewWorkers) {
  for (int workers : {0, -3}) {
    bool ran = false;
    const std::string error = ErrorText(
        [&] { Launch(Threads(workers), [&](Worker&) { ran = true; }); });
    EXPECT_NE(error.find("--workers=" + std::to_string(workers) +
                         ": need at least 1 worker"),
              std::string::npos)
        << error;
    EXPECT_FALSE(ran);
  }
}

TEST(LauncherTest, RejectsWorkersInMpiMode) {
  for (int workers : {1, 4}) {
    LaunchOptions options;
    options.mode = LaunchMode::kMpi;
    options.workers = workers;
    const std::string error =
        ErrorText([&] { Launch(options, [](Worker&) {}); });
    EXPECT_NE(error.find("--workers cannot be used with --mode=mpi; the world "
                         "size comes from mpirun (-np)"),
              std::string::npos)
        << error;
  }
}

TEST(LauncherTest, MpiModeOutsideMpirunSaysHowToStart) {
  LaunchOptions options;
  options.mode = LaunchMode::kMpi;
  const std::string error = ErrorText([&] { Launch(options, [](Worker&) {}); });
  EXPECT_NE(error.find("--mode=mpi needs the program started by mpirun"),
            std::string::npos)
      << error;
}

TEST(LauncherTest, CudaWorkersBeyondVisibleGpusIsAClearError) {
  LaunchOptions options;
  options.device = "cuda";
  options.workers = CudaDeviceCount() + 1;
  const std::string error = ErrorText([&] { Launch(options, [](Worker&) {}); });
  if (CudaDeviceCount() == 0) {
    EXPECT_NE(error.find("--device=cuda but there are no CUDA devices"),
              std::string::npos)
        << error;
  } else {
    EXPECT_NE(error.find("CUDA device(s) are visible"), std::string::npos) << error;
  }
}

TEST(LauncherTest, ThreadsModeGivesEachWorkerItsOwnGpu) {
  if (CudaDeviceCount() < 2) {
    GTEST_SKIP() << "needs 2 GPUs, found " << CudaDeviceCount()
                 << (CudaDeviceCount() == 0 ? " (" + CudaUnavailableReason() + ")" : "");
  }
  LaunchOptions options;
  options.device = "cuda";
  options.workers = 2;
  std::vector<Device> seen(2);
  Launch(options, [&](Worker& w) { seen[w.rank] = w.device; });
  EXPECT_EQ(seen[0], Device::Cuda(0));
  EXPECT_EQ(seen[1], Device::Cuda(1));
}

TEST(LauncherTest, UnknownDeviceNamesTheFlagValue) {
  LaunchOptions options;
  options.device = "tpu";
  const std::string error = ErrorText([&] { Launch(options, [](Worker&) {}); });
  EXPECT_NE(error.find("unknown device 'tpu'"), std::string::npos) << error;
}

}  // namespace
}  // namespace tandem
