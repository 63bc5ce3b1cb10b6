#include "report/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "core/check.h"

namespace tandem {
namespace {

// A bar on a fake clock that the test moves by hand.
struct Fixture {
  double now = 0;
  std::ostringstream out;

  ProgressOptions Options(int columns = 200) {
    ProgressOptions options;
    options.clock = [this] { return now; };
    options.columns = columns;
    return options;
  }
};

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(FormatClockTest, MinutesSecondsAndHours) {
  EXPECT_EQ(FormatClock(0), "00:00");
  EXPECT_EQ(FormatClock(7.4), "00:07");
  EXPECT_EQ(FormatClock(59.6), "01:00");  // rounded, not truncated
  EXPECT_EQ(FormatClock(754), "12:34");
  EXPECT_EQ(FormatClock(3725), "1:02:05");
  EXPECT_EQ(FormatClock(-1), "--:--");
  EXPECT_EQ(FormatClock(std::nan("")), "--:--");
  EXPECT_EQ(FormatClock(INFINITY), "--:--");
}

TEST(ProgressBarTest, InteractiveLineShowsBarRateEtaAndLoss) {
  Fixture f;
  ProgressBar bar(f.out, "epoch 3/12", 400, /*interactive=*/true, f.Options());
  f.now = 2.0;
  bar.Update(100, 12800, 0.5);
  // 12800 samples in 2 s; 100 steps in 2 s leave 300 steps: 6 s.
  EXPECT_EQ(f.out.str(),
            "\repoch 3/12   25% [=====>..............] 100/400   6400 samples/s  ETA 00:06"
            "  loss 0.5000\x1b[K");
}

TEST(ProgressBarTest, InteractiveRedrawsAtMostTenTimesASecond) {
  Fixture f;
  ProgressBar bar(f.out, "e", 1000, true, f.Options());
  // 1000 steps 1 ms apart: 1 s of updates.
  for (int step = 1; step <= 1000; ++step) {
    f.now = step * 0.001;
    bar.Update(step, step * 64, 1.0);
  }
  // The first update draws, then one per 0.1 s: at 0.001, 0.101, ..., 0.901.
  EXPECT_EQ(Count(f.out.str(), "\r"), 10);
  EXPECT_EQ(Count(f.out.str(), "\x1b[K"), 10);
  EXPECT_EQ(Count(f.out.str(), "\n"), 0);  // one live line, never a new one
}

TEST(ProgressBarTest, UnknownRateAndEtaBeforeProgress) {
  Fixture f;
  ProgressBar bar(f.out, "e", 10, true, f.Options());
  bar.Update(0, 0, std::nan(""));
  EXPECT_EQ(f.out.str(), "\re    0% [....................]  0/10     -- samples/s  ETA --:--"
                         "  loss nan\x1b[K");
}

TEST(ProgressBarTest, RatesAboveTenThousandUseK) {
  Fixture f;
  ProgressBar bar(f.out, "e", 10, true, f.Options());
  f.now = 1.0;
  bar.Update(5, 15234, 0.25);
  EXPECT_NE(f.out.str().find("  15.2k samples/s  ETA 00:01"), std::string::npos)
      << f.out.str();
}

TEST(ProgressBarTest, FinishEndsTheLiveLineAndIgnoresLaterUpdates) {
  Fixture f;
  ProgressBar bar(f.out, "epoch 1/2", 4, true, f.Options());
  f.now = 1.0;
  bar.Update(4, 512, 0.3);
  f.out.str("");
  f.now = 3.3;
  bar.Finish("loss 0.3000  test_acc 0.8500");
  EXPECT_EQ(f.out.str(), "\repoch 1/2  loss 0.3000  test_acc 0.8500  [3.3s]\x1b[K\n");
  f.out.str("");
  bar.Update(4, 512, 0.3);
  bar.Finish("again");
  EXPECT_EQ(f.out.str(), "");
}

TEST(ProgressBarTest, LongEpochsShowMinutesInTheFinalLine) {
  Fixture f;
  ProgressBar bar(f.out, "epoch 1/2", 4, false, f.Options());
  f.now = 125;
  bar.Finish("");
  EXPECT_EQ(f.out.str(), "epoch 1/2  [02:05]\n");
}

TEST(ProgressBarTest, PlainOutputWritesALineEveryTenSeconds) {
  Fixture f;
  ProgressBar bar(f.out, "epoch 3/12", 400, /*interactive=*/false, f.Options());
  for (int step = 1; step <= 250; ++step) {  // 0.1 s a step: 25 s
    f.now = step * 0.1;
    bar.Update(step, step * 128, 0.5);
  }
  f.now = 25.04;
  bar.Finish("loss 0.5000");
  const std::string text = f.out.str();
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  // Lines at 10 s (step 100) and 20 s (step 200), then the summary.
  EXPECT_EQ(text,
            "epoch 3/12  step 100/400 (25%)   1280 samples/s  ETA 00:30  loss 0.5000\n"
            "epoch 3/12  step 200/400 (50%)   1280 samples/s  ETA 00:20  loss 0.5000\n"
            "epoch 3/12  loss 0.5000  [25.0s]\n");
}

TEST(ProgressBarTest, PlainShortEpochWritesOnlyTheSummary) {
  Fixture f;
  ProgressBar bar(f.out, "epoch 1/1", 50, false, f.Options());
  for (int step = 1; step <= 50; ++step) {
    f.now = step * 0.05;
    bar.Update(step, step * 32, 1.0);
  }
  bar.Finish("done");
  EXPECT_EQ(f.out.str(), "epoch 1/1  done  [2.5s]\n");
}

TEST(ProgressBarTest, PlainIntervalIsConfigurable) {
  Fixture f;
  ProgressOptions options = f.Options();
  options.plain_interval_seconds = 1.0;
  ProgressBar bar(f.out, "e", 100, false, options);
  for (int step = 1; step <= 30; ++step) {
    f.now = step * 0.1;
    bar.Update(step, step, 1.0);
  }
  EXPECT_EQ(Count(f.out.str(), "\n"), 3);  // at 1, 2 and 3 s
}

TEST(ProgressBarTest, LiveLineFitsTheTerminal) {
  for (const int columns : {80, 60, 40, 20}) {
    Fixture f;
    ProgressBar bar(f.out, "epoch 12/12", 1875, true, f.Options(columns));
    f.now = 3;
    bar.Update(700, 700 * 64, 0.4321);
    std::string line = f.out.str();
    ASSERT_EQ(line.front(), '\r');
    ASSERT_EQ(line.substr(line.size() - 3), "\x1b[K");
    line = line.substr(1, line.size() - 4);
    EXPECT_LE(static_cast<int>(line.size()), columns - 1) << columns << ": " << line;
    EXPECT_EQ(line.rfind("epoch 12/12", 0), 0u) << line;
  }
  // At 80 columns only the bar gives way; every figure still shows.
  Fixture f;
  ProgressBar bar(f.out, "epoch 12/12", 1875, true, f.Options(80));
  f.now = 3;
  bar.Update(700, 700 * 64, 0.4321);
  EXPECT_NE(f.out.str().find("]  700/1875  14.9k samples/s  ETA 00:05  loss 0.4321"),
            std::string::npos)
      << f.out.str();
}

TEST(ProgressBarTest, LayoutIsSteadyAcrossRedraws) {
  Fixture f;
  ProgressBar bar(f.out, "e", 400, true, f.Options(80));
  std::vector<size_t> bar_ends, rate_ends;
  // Steps of 1 to 3 digits and rates of 3 to 5 characters.
  for (const auto& [step, samples] : std::vector<std::pair<int, int>>{
           {1, 8}, {50, 950}, {400, 15234}}) {
    f.out.str("");
    f.now += 1;
    bar.Update(step, samples * static_cast<int>(f.now), 0.5);
    bar_ends.push_back(f.out.str().find(']'));
    rate_ends.push_back(f.out.str().find(" samples/s"));
  }
  EXPECT_EQ(bar_ends, std::vector<size_t>(3, bar_ends[0]));
  EXPECT_EQ(rate_ends, std::vector<size_t>(3, rate_ends[0]));
}

TEST(ProgressBarTest, DestructorEndsAnUnfinishedLiveLine) {
  Fixture f;
  {
    ProgressBar bar(f.out, "e", 10, true, f.Options());
    bar.Update(1, 1, 1.0);
  }  // e.g. an exception unwound the training loop
  EXPECT_EQ(f.out.str().back(), '\n');

  Fixture quiet;
  { ProgressBar bar(quiet.out, "e", 10, true, quiet.Options()); }
  EXPECT_EQ(quiet.out.str(), "");  // nothing drawn, nothing to end
}

TEST(ProgressBarTest, StepsBeyondTheTotalAreClamped) {
  Fixture f;
  ProgressBar bar(f.out, "e", 10, true, f.Options());
  f.now = 1;
  bar.Update(12, 100, 1.0);
  EXPECT_NE(f.out.str().find("100% [====================] 10/10"), std::string::npos)
      << f.out.str();
}

TEST(ProgressBarTest, RejectsNegativeTotal) {
  std::ostringstream out;
  EXPECT_THROW(ProgressBar(out, "e", -1, false), Error);
}

TEST(IsTerminalTest, StringStreamsAreNotTerminals) {
  std::ostringstream out;
  EXPECT_FALSE(IsTerminal(out));
  EXPECT_FALSE(IsInteractive(out));
  EXPECT_EQ(TerminalColumns(out), 0);
}

// Puts a pseudo-terminal on stdout for the test's lifetime, as mpirun does
// for each rank, and sets or clears one environment variable.
class PtyOnStdout {
 public:
  PtyOnStdout() {
    std::cout.flush();
    master_ = posix_openpt(O_RDWR | O_NOCTTY);
    if (master_ < 0 || grantpt(master_) != 0 || unlockpt(master_) != 0) return;
    const int slave = open(ptsname(master_), O_RDWR | O_NOCTTY);
    if (slave < 0) return;
    saved_ = dup(STDOUT_FILENO);
    dup2(slave, STDOUT_FILENO);
    close(slave);
  }
  ~PtyOnStdout() {
    if (saved_ >= 0) {
      dup2(saved_, STDOUT_FILENO);
      close(saved_);
    }
    if (master_ >= 0) close(master_);
  }
  bool ok() const { return saved_ >= 0; }

 private:
  int master_ = -1;
  int saved_ = -1;
};

void SetEnv(const char* name, const char* value) {
  if (value == nullptr) {
    unsetenv(name);
  } else {
    setenv(name, value, 1);
  }
}

// A terminal is interactive only for a process that is alone: under mpirun
// every rank has a pseudo-terminal, and a live line would fill the job's log.
TEST(IsInteractiveTest, ATerminalOfOneProcessOnly) {
  PtyOnStdout pty;
  if (!pty.ok()) GTEST_SKIP() << "no pseudo-terminal here (posix_openpt failed)";
  SetEnv("TERM", "xterm");
  SetEnv("PMI_SIZE", nullptr);
  SetEnv("OMPI_COMM_WORLD_SIZE", nullptr);
  EXPECT_TRUE(IsTerminal(std::cout));
  EXPECT_TRUE(IsInteractive(std::cout));
  SetEnv("OMPI_COMM_WORLD_SIZE", "1");  // mpirun -np 1: still one process
  EXPECT_TRUE(IsInteractive(std::cout));
  SetEnv("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_TRUE(IsTerminal(std::cout));
  EXPECT_FALSE(IsInteractive(std::cout));
  SetEnv("OMPI_COMM_WORLD_SIZE", nullptr);
  SetEnv("PMI_SIZE", "4");  // MPICH, Slurm
  EXPECT_FALSE(IsInteractive(std::cout));
  SetEnv("PMI_SIZE", nullptr);
  SetEnv("TERM", "dumb");
  EXPECT_FALSE(IsInteractive(std::cout));
}

}  // namespace
}  // namespace tandem
