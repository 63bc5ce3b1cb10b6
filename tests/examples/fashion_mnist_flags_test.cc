// The example's command line (examples/fashion_mnist/flags.h), parsed as
// main parses it.
#include "examples/fashion_mnist/flags.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "trainer/version.h"

namespace tandem {
namespace {

struct Parsed {
  std::optional<int> exit_code;
  FashionMnistConfig config;
  std::string out, err;
};

Parsed Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fashion_mnist");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  Parsed p;
  std::ostringstream out, err;
  p.exit_code = ParseCommandLine(static_cast<int>(argv.size()), argv.data(), p.config, out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

// Sets an environment variable for one test, as mpirun would.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

bool HasSourceLocation(const std::string& message) {
  return std::regex_search(message, std::regex(R"( at [A-Za-z0-9_/.]+\.(cc|h):[0-9]+\])"));
}

// tools/train.sh passes --workers=2 and then the user's flags.
TEST(FlagsTest, TheLastCopyOfAFlagWins) {
  Parsed p = Parse({"--mode=threads", "--workers=2", "--workers=4"});
  ASSERT_FALSE(p.exit_code) << p.err;
  EXPECT_EQ(p.config.launch.workers, 4);
  p = Parse({"--mode=mpi", "--mode=threads", "--epochs", "3", "--epochs=5", "--lr=0.1",
             "--lr=0.2", "--hidden=8", "--hidden=16,8", "--device=auto", "--device=cpu",
             "--quiet", "--quiet"});
  ASSERT_FALSE(p.exit_code) << p.err;
  EXPECT_EQ(p.config.launch.mode, LaunchMode::kThreads);
  EXPECT_EQ(p.config.epochs, 5);
  EXPECT_FLOAT_EQ(p.config.optimizer.lr, 0.2f);
  EXPECT_EQ(p.config.hidden, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(p.config.launch.device, "cpu");
  EXPECT_TRUE(p.config.quiet);
  EXPECT_FALSE(p.config.launch.workers.has_value());  // not given: 1, or mpirun's -np
}

TEST(FlagsTest, UnderMpirunTheModeIsMpi) {
  {
    ScopedEnv mpirun("OMPI_COMM_WORLD_SIZE", "2");
    Parsed p = Parse({});
    ASSERT_FALSE(p.exit_code) << p.err;
    EXPECT_EQ(p.config.launch.mode, LaunchMode::kMpi);
    p = Parse({"--mode=threads"});
    EXPECT_EQ(p.exit_code, kUsageExitCode);
    EXPECT_EQ(p.err.rfind("error: --mode=threads under mpirun would run 2 separate trainings", 0),
              0u)
        << p.err;
  }
  {
    ScopedEnv mpirun("OMPI_COMM_WORLD_SIZE", "1");  // mpirun -np 1
    EXPECT_EQ(Parse({}).config.launch.mode, LaunchMode::kThreads);
    EXPECT_FALSE(Parse({"--mode=mpi"}).exit_code);
  }
  {
    ScopedEnv slurm("PMI_SIZE", "3");
    EXPECT_EQ(Parse({}).config.launch.mode, LaunchMode::kMpi);
  }
  EXPECT_EQ(Parse({}).config.launch.mode, LaunchMode::kThreads);
  const Parsed alone = Parse({"--mode=mpi"});
  EXPECT_EQ(alone.exit_code, kUsageExitCode);
  EXPECT_NE(alone.err.find("--mode=mpi needs the program started by mpirun"), std::string::npos)
      << alone.err;
}

TEST(FlagsTest, ChoicesAreCheckedByTheParser) {
  for (const char* bad : {"--activation=swish", "--optimizer=adagrad", "--lr_schedule=step",
                          "--precision=fp16", "--mode=bogus", "--device=gpu", "--device=cuda:",
                          "--device=cuda:x"}) {
    const Parsed p = Parse({bad});
    EXPECT_EQ(p.exit_code, kUsageExitCode) << bad;
    EXPECT_EQ(p.err.rfind("error: --", 0), 0u) << bad << ": " << p.err;
  }
  EXPECT_NE(Parse({"--activation=swish"}).err.find("{relu,gelu,tanh,identity}"),
            std::string::npos);
  for (const char* good : {"--device=cpu", "--device=cuda", "--device=cuda:1", "--device=auto",
                           "--activation=gelu", "--precision=bf16", "--optimizer=sgd"}) {
    EXPECT_FALSE(Parse({good}).exit_code) << good;
  }
}

TEST(FlagsTest, HelpListsTheGroupsWithTrueDefaults) {
  const Parsed p = Parse({"--help"});
  EXPECT_EQ(p.exit_code, 0);
  size_t at = 0;
  for (const char* group : {"\nData:\n", "\nModel:\n", "\nOptimisation:\n", "\nParallelism:\n",
                            "\nOutput:\n", "\nReliability:\n"}) {
    const size_t found = p.out.find(group);
    EXPECT_NE(found, std::string::npos) << group;
    EXPECT_GT(found, at) << group << " out of order";
    at = found;
  }
  EXPECT_NE(p.out.find("--workers INT=1 "), std::string::npos) << p.out;
  EXPECT_EQ(p.out.find("default 1"), std::string::npos);
  EXPECT_NE(p.out.find("--device TEXT:{cpu,cuda,cuda:N,auto}=cpu"), std::string::npos);
  EXPECT_NE(p.out.find("--activation TEXT:{relu,gelu,tanh,identity}=relu"), std::string::npos);
  EXPECT_NE(p.out.find("--version"), std::string::npos);
  // Every flag is listed once, under a group.
  for (const char* flag : {"--data_dir", "--max_train", "--hidden", "--precision", "--epochs",
                           "--lr ", "--mode", "--bucket_mb", "--quiet", "--plot",
                           "--checkpoint_dir", "--skip_nonfinite", "--check_collectives"}) {
    EXPECT_NE(p.out.find(std::string("  ") + flag), std::string::npos) << flag;
  }
  std::istringstream lines(p.out);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 80u) << line;
  }
}

TEST(FlagsTest, VersionPrintsTandemAndItsVersion) {
  const Parsed p = Parse({"--version"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_EQ(p.out, std::string("tandem ") + kTandemVersion + "\n");
}

TEST(FlagsTest, UsageErrorsExitTwoWithAMessageAndNoSourceLocation) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--no_such_flag"},
                                             {"--epochs=abc"},
                                             {"--hidden=12,x"},
                                             {"--workers"},
                                             {"extra"}}) {
    const Parsed p = Parse(args);
    EXPECT_EQ(p.exit_code, kUsageExitCode) << args[0];
    EXPECT_EQ(p.err.rfind("error: ", 0), 0u) << p.err;
    EXPECT_FALSE(HasSourceLocation(p.err)) << p.err;
  }
  EXPECT_NE(Parse({"--hidden=12,x"}).err.find("--hidden must be sizes from 1 to 65536"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
