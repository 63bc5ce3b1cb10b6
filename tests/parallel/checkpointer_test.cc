// Tests parallel/checkpointer.h over a ThreadGroup (threads mode without the
// launcher): three ranks save, one file is written (rank 0's state), and
// every rank returns only once it is complete; a failed save fails every
// rank, rank 0 with its own error; loading finds nothing, the checkpoint, or
// a clear error.
#include "parallel/checkpointer.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <exception>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "io/atomic_file.h"
#include "parallel/thread_communicator.h"

namespace tandem {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

std::set<std::string> ListDirectory(const std::string& dir) {
  std::set<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* entry = ::readdir(d)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.insert(name);
    }
    ::closedir(d);
  }
  return names;
}

// A state that says which rank made it and at which step.
CheckpointState StateOf(int rank, int64_t step) {
  CheckpointState s;
  s.step = step;
  s.epoch = step / 10;
  s.batch_in_epoch = step % 10;
  s.seed = 42;
  s.extra_u64["made_by_rank"] = {static_cast<uint64_t>(rank)};
  s.tensors.push_back({"w", {2, 2}, {1.f * rank, 2.f, 3.f, float(step)}});
  return s;
}

// Runs fn(rank, comm) on `workers` threads of one ThreadGroup, as threads
// mode does, and returns what each rank threw (null: returned).
std::vector<std::exception_ptr> RunRanks(
    int workers, const std::function<void(int, Communicator&)>& fn) {
  ThreadGroup group(workers);
  std::vector<std::exception_ptr> errors(workers);
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r, group.communicator(r));
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

// What `error` says, and whether it is a CollectiveAbortedError.
std::string Text(const std::exception_ptr& error, bool* aborted = nullptr) {
  if (aborted != nullptr) *aborted = false;
  if (!error) return "";
  try {
    std::rethrow_exception(error);
  } catch (const CollectiveAbortedError& e) {
    if (aborted != nullptr) *aborted = true;
    return e.what();
  } catch (const std::exception& e) {
    return e.what();
  }
}

TEST(CheckpointerTest, ThreeRanksWriteOneFileAndEveryoneReturns) {
  // Nested and not yet there: rank 0 creates it.
  const std::string dir = TempPath("three_ranks/run1");
  std::atomic<int> returned{0};
  std::mutex mutex;
  std::vector<std::string> failures;
  auto fail = [&](int rank, int64_t step, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    failures.push_back("rank " + std::to_string(rank) + " after save " +
                       std::to_string(step) + ": " + what);
  };
  const auto errors = RunRanks(3, [&](int rank, Communicator& comm) {
    for (int64_t step = 1; step <= 5; ++step) {
      SaveCheckpoint(comm, dir, StateOf(rank, step));
      // Every rank, once back, sees the complete checkpoint of this step:
      // nobody returns before rank 0 has renamed the file into place.
      const std::optional<CheckpointState> loaded = LoadLatestCheckpoint(dir);
      if (!loaded.has_value()) {
        fail(rank, step, "no checkpoint");
      } else if (!(*loaded == StateOf(0, step))) {
        fail(rank, step,
             "loaded step " + std::to_string(loaded->step) + " made by rank " +
                 std::to_string(loaded->extra_u64.at("made_by_rank")[0]));
      }
      // Keep ranks from racing ahead into the next save while others read.
      comm.Barrier()->Wait();
    }
    ++returned;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(Text(errors[r]), "") << "rank " << r;
  EXPECT_EQ(returned.load(), 3);
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_EQ(ListDirectory(dir), std::set<std::string>{"checkpoint.tnd"});
  EXPECT_EQ(CheckpointPath(dir), dir + "/checkpoint.tnd");
  EXPECT_EQ(CheckpointPath(dir + "/"), dir + "/checkpoint.tnd");
}

TEST(CheckpointerTest, OneWorkerSaves) {
  const std::string dir = TempPath("one_worker");
  const auto errors =
      RunRanks(1, [&](int, Communicator& comm) { SaveCheckpoint(comm, dir, StateOf(0, 3)); });
  EXPECT_EQ(Text(errors[0]), "");
  ASSERT_TRUE(LoadLatestCheckpoint(dir).has_value());
  EXPECT_TRUE(*LoadLatestCheckpoint(dir) == StateOf(0, 3));
}

TEST(CheckpointerTest, FailedSaveFailsEveryRankWithRankZerosError) {
  // The "directory" is a file, so rank 0 cannot create it.
  const std::string dir = TempPath("i_am_a_file");
  std::ofstream(dir) << "not a directory";
  const auto errors = RunRanks(3, [&](int rank, Communicator& comm) {
    SaveCheckpoint(comm, dir, StateOf(rank, 1));
  });
  // Rank 0 throws its own error, the cause ...
  bool aborted = true;
  const std::string error = Text(errors[0], &aborted);
  EXPECT_FALSE(aborted) << error;
  EXPECT_NE(error.find("cannot create checkpoint directory " + dir), std::string::npos)
      << error;
  EXPECT_NE(error.find("exists and is not a directory"), std::string::npos) << error;
  // ... and every other rank fails too, with its consequence, rather than
  // training on.
  for (int r = 1; r < 3; ++r) {
    const std::string consequence = Text(errors[r], &aborted);
    EXPECT_TRUE(aborted) << "rank " << r << ": " << consequence;
    EXPECT_NE(consequence.find("rank 0 failed to save checkpoint " + dir + "/checkpoint.tnd"),
              std::string::npos)
        << "rank " << r << ": " << consequence;
  }
}

// What LoadLatestCheckpoint(dir) throws, or "<no error>".
std::string LoadError(const std::string& dir) {
  try {
    LoadLatestCheckpoint(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(CheckpointerTest, LoadLatestFindsNothingInAFreshDirectory) {
  EXPECT_FALSE(LoadLatestCheckpoint(TempPath("never_created")).has_value());
  const std::string empty = TempPath("empty_dir");
  ASSERT_EQ(::mkdir(empty.c_str(), 0755), 0);
  EXPECT_FALSE(LoadLatestCheckpoint(empty).has_value());
  // A save killed while writing leaves only a partial temporary file.
  std::ofstream(TemporaryPathFor(empty + "/checkpoint.tnd", 4242)) << "TANDEMCK partial";
  EXPECT_FALSE(LoadLatestCheckpoint(empty).has_value());
}

// A save killed between its fsync and its rename leaves a complete
// checkpoint under its temporary name: reported with what to do, never
// silently passed over for an older checkpoint or a fresh start.
TEST(CheckpointerTest, ACompleteTemporaryLaterThanTheCheckpointIsReported) {
  const std::string dir = TempPath("complete_tmp");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  const std::string path = dir + "/checkpoint.tnd";
  const std::string tmp = TemporaryPathFor(path, 4242);
  WriteCheckpoint(dir + "/staging.tnd", StateOf(0, 5));  // as the killed save left it
  ASSERT_EQ(::rename((dir + "/staging.tnd").c_str(), tmp.c_str()), 0);
  std::string error = LoadError(dir);
  EXPECT_NE(error.find(tmp + " is a complete checkpoint (step 5) with no checkpoint.tnd beside "
                             "it: a save was stopped before it put the file in place. To resume "
                             "from it: mv " + tmp + " " + path),
            std::string::npos)
      << error;
  WriteCheckpoint(path, StateOf(0, 3));  // an older checkpoint
  error = LoadError(dir);
  EXPECT_NE(error.find("(step 5) later than " + path + " (step 3)"), std::string::npos) << error;
  WriteCheckpoint(path, StateOf(0, 7));  // a later one: the temporary is stale
  ASSERT_TRUE(LoadLatestCheckpoint(dir).has_value());
  EXPECT_EQ(LoadLatestCheckpoint(dir)->step, 7);
}

// A FIFO where the checkpoint should be is refused at once (a plain open
// would block until a writer came), and a symbolic link to nothing is
// reported rather than taken for "no checkpoint".
TEST(CheckpointerTest, LoadLatestRefusesAFifoAndADanglingLink) {
  const std::string fifo_dir = TempPath("fifo_dir");
  ASSERT_EQ(::mkdir(fifo_dir.c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo((fifo_dir + "/checkpoint.tnd").c_str(), 0644), 0);
  std::string error = LoadError(fifo_dir);
  EXPECT_NE(error.find(fifo_dir + "/checkpoint.tnd: not a regular file, expected a checkpoint"),
            std::string::npos)
      << error;

  const std::string link_dir = TempPath("link_dir");
  ASSERT_EQ(::mkdir(link_dir.c_str(), 0755), 0);
  ASSERT_EQ(::symlink((link_dir + "/gone.tnd").c_str(), (link_dir + "/checkpoint.tnd").c_str()),
            0);
  error = LoadError(link_dir);
  EXPECT_NE(error.find(link_dir + "/checkpoint.tnd: a symbolic link to a file that does not "
                       "exist"),
            std::string::npos)
      << error;
}

TEST(CheckpointerTest, LoadLatestRejectsACorruptCheckpoint) {
  const std::string dir = TempPath("corrupt");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::ofstream(dir + "/checkpoint.tnd") << "TANDEMCK";
  std::string error = LoadError(dir);
  EXPECT_NE(error.find(dir + "/checkpoint.tnd: truncated checkpoint"),
            std::string::npos)
      << error;
}

TEST(CheckpointerTest, LoadLatestRejectsAFileAsDirectory) {
  const std::string file = TempPath("plain_file");
  std::ofstream(file) << "x";
  std::string error = LoadError(file);
  EXPECT_NE(error.find("the checkpoint directory is a file?"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace tandem
