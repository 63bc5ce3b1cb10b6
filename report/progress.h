// A tqdm-like progress bar for one epoch (or any counted loop).
//
//   ProgressBar bar(std::cout, "epoch 3/12", steps_per_epoch, IsInteractive(std::cout));
//   for (int64_t step = 1; step <= steps_per_epoch; ++step) {
//     ...train one step...
//     bar.Update(step, samples_so_far, running_loss);
//   }
//   bar.Finish("loss 0.4123  train_acc 0.8512  test_acc 0.8401");
//
// On a terminal it keeps one live line, rewritten in place with '\r' and
// cleared to the end with "\x1b[K", at most 10 times a second:
//
//   epoch 3/12   37% [=======>............] 174/469  15.2k samples/s  ETA 00:07  loss 0.5321
//
// The bar shrinks (or goes) to keep the line narrower than the terminal: a
// wrapped line can no longer be rewritten by '\r'. Into a file or a pipe,
// carriage returns would leave a log of partial lines, so it writes a plain
// line every 10 s instead (none at all for a short epoch):
//
//   epoch 3/12  step 174/469 (37%)  15.2k samples/s  ETA 00:07  loss 0.5321
//
// Both end with the same line from Finish:
//
//   epoch 3/12  loss 0.4123  train_acc 0.8512  test_acc 0.8401  [3.1s]
//
// Pass `interactive` = IsInteractive(out): a terminal of a single process.
// One of several processes started by mpirun gets a pseudo-terminal from
// the launcher, which then merges every rank's output into one stream (often
// a log file): a live line there would be garbage.
//
// The caller handles --quiet by not constructing a bar. Not thread-safe:
// drive it from one thread (rank 0's).
#ifndef TANDEM_REPORT_PROGRESS_H_
#define TANDEM_REPORT_PROGRESS_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace tandem {

struct ProgressOptions {
  // Seconds since any fixed origin. Empty: std::chrono::steady_clock. Tests
  // inject a fake clock to make throttling and ETAs deterministic.
  std::function<double()> clock;
  // Interactive: the live line is redrawn at most once per this many seconds
  // (0.1: 10 redraws a second; faster only costs terminal bandwidth).
  double min_redraw_seconds = 0.1;
  // Non-interactive: one plain line per this many seconds (infinity: none
  // but Finish's).
  double plain_interval_seconds = 10.0;
  // Characters inside the bar's brackets, at most: the bar gives way first
  // when the line would not fit the terminal.
  int bar_width = 20;
  // Terminal width for the live line. 0: ask the terminal (80 if it can't say).
  int columns = 0;
};

class ProgressBar {
 public:
  // `total_steps` is the number of Update steps that make 100%.
  // `interactive`: pass IsInteractive(out).
  ProgressBar(std::ostream& out, std::string label, int64_t total_steps,
              bool interactive, ProgressOptions options = {});
  // Ends a live line left unfinished (an exception unwound the loop), so the
  // error that follows starts on a line of its own. Never throws.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `step` steps (of total_steps) and `samples_done` samples are done, this
  // epoch; `running_loss` is the mean loss so far (NaN prints as "nan").
  // Cheap when throttled: one clock read.
  void Update(int64_t step, int64_t samples_done, double running_loss);

  // Writes the final line: the label, `summary` and the elapsed time. Later
  // Updates are ignored.
  void Finish(const std::string& summary);

 private:
  std::string StatusText(int64_t step, int64_t samples_done, double running_loss,
                         double elapsed) const;

  std::ostream& out_;
  std::string label_;
  int64_t total_steps_;
  bool interactive_;
  ProgressOptions options_;
  double start_;
  double last_draw_;        // interactive: last redraw; plain: last line
  bool live_line_ = false;  // interactive: a partial line is on screen
  bool finished_ = false;
};

// True when `out` is std::cout or std::cerr/std::clog and that stream's file
// descriptor is a terminal (and TERM is not "dumb", which lacks "\x1b[K").
bool IsTerminal(const std::ostream& out);

// True when `out` is a terminal (IsTerminal) and this process is not one of
// several started by a launcher: OMPI_COMM_WORLD_SIZE (Open MPI) or PMI_SIZE
// (MPICH, Slurm) above 1.
bool IsInteractive(const std::ostream& out);

// Columns of the terminal behind `out` (see IsTerminal); 0 when unknown.
int TerminalColumns(const std::ostream& out);

// "mm:ss" (or "h:mm:ss" from an hour on); "--:--" for a negative or
// non-finite number of seconds. Exposed for tests.
std::string FormatClock(double seconds);

}  // namespace tandem

#endif  // TANDEM_REPORT_PROGRESS_H_
