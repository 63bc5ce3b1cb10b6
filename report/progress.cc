#include "report/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <utility>

#include "core/check.h"

namespace tandem {

namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The file descriptor behind std::cout / std::cerr / std::clog, else -1.
int StreamFd(const std::ostream& out) {
  if (out.rdbuf() == std::cout.rdbuf()) return STDOUT_FILENO;
  if (out.rdbuf() == std::cerr.rdbuf() || out.rdbuf() == std::clog.rdbuf()) {
    return STDERR_FILENO;
  }
  return -1;
}

// Elapsed time on the final line: tenths of a second for short epochs
// (Fashion-MNIST epochs take seconds), mm:ss beyond a minute.
std::string FormatElapsed(double seconds) {
  if (seconds < 60) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.1fs", std::max(0.0, seconds));
    return buffer;
  }
  return FormatClock(seconds);
}

// "8.5", "950", "4321", "15.2k", "1.3M": at most 6 characters.
std::string FormatRate(double rate) {
  char buffer[32];
  if (rate < 100) {
    std::snprintf(buffer, sizeof buffer, "%.1f", rate);
  } else if (rate < 1e4) {
    std::snprintf(buffer, sizeof buffer, "%.0f", rate);
  } else if (rate < 1e6) {
    std::snprintf(buffer, sizeof buffer, "%.1fk", rate / 1e3);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1fM", rate / 1e6);
  }
  return buffer;
}

}  // namespace

std::string FormatClock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const long long total = std::llround(seconds);
  char buffer[48];
  if (total >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", total / 3600,
                  total / 60 % 60, total % 60);
  } else {
    std::snprintf(buffer, sizeof buffer, "%02lld:%02lld", total / 60, total % 60);
  }
  return buffer;
}

ProgressBar::ProgressBar(std::ostream& out, std::string label, int64_t total_steps,
                         bool interactive, ProgressOptions options)
    : out_(out),
      label_(std::move(label)),
      total_steps_(total_steps),
      interactive_(interactive),
      options_(std::move(options)) {
  TANDEM_CHECK(total_steps_ >= 0)
      << "progress bar '" << label_ << "': total_steps must be >= 0, got "
      << total_steps_;
  TANDEM_CHECK(options_.bar_width >= 0)
      << "progress bar '" << label_ << "': bar_width must be >= 0, got "
      << options_.bar_width;
  if (!options_.clock) options_.clock = SteadySeconds;
  if (options_.columns <= 0) options_.columns = TerminalColumns(out_);
  if (options_.columns <= 0) options_.columns = 80;
  start_ = options_.clock();
  last_draw_ = start_;
}

ProgressBar::~ProgressBar() {
  if (!live_line_ || finished_) return;
  try {
    out_ << '\n' << std::flush;
  } catch (...) {
    // A stream set to throw must not escape a destructor.
  }
}

std::string ProgressBar::StatusText(int64_t step, int64_t samples_done,
                                    double running_loss, double elapsed) const {
  const int64_t shown = std::clamp<int64_t>(step, 0, total_steps_);
  const double fraction =
      total_steps_ > 0 ? static_cast<double>(shown) / total_steps_ : 1.0;
  const int percent = static_cast<int>(fraction * 100);
  char buffer[96];

  // Everything after the bar.
  std::string tail;
  // Fixed-width step count and rate keep the bar's width (and every field's
  // place) steady from one redraw to the next.
  const int digits = static_cast<int>(std::to_string(total_steps_).size());
  std::snprintf(buffer, sizeof buffer, "%*lld/%lld", digits, static_cast<long long>(shown),
                static_cast<long long>(total_steps_));
  const std::string steps = buffer;
  const std::string rate = elapsed > 0 ? FormatRate(samples_done / elapsed) : "--";
  std::snprintf(buffer, sizeof buffer, "  %5s samples/s", rate.c_str());
  tail += buffer;
  // ETA from the mean time per step so far: the steps of an epoch cost the
  // same, so the mean is as accurate as tqdm's smoothed rate and steadier.
  const double eta = shown > 0 ? elapsed * (total_steps_ - shown) / shown : -1.0;
  tail += "  ETA " + FormatClock(eta);
  std::snprintf(buffer, sizeof buffer, "  loss %.4f", running_loss);
  tail += buffer;

  if (!interactive_) {
    std::snprintf(buffer, sizeof buffer, "  step %s (%d%%)", steps.c_str(), percent);
    return label_ + buffer + tail;
  }

  std::snprintf(buffer, sizeof buffer, "  %3d%%", percent);
  const std::string head = label_ + buffer;
  tail = " " + steps + tail;
  // One column spare: writing the last column makes some terminals wrap.
  const int room = options_.columns - 1;
  const int fixed = static_cast<int>(head.size() + tail.size()) + 3;  // " []"
  const int width = std::min(options_.bar_width, room - fixed);
  std::string text = head;
  if (width >= 5) {  // a narrower bar says nothing the percentage doesn't
    // [=====>......]: '=' for whole cells done, '>' for the head.
    const int filled = static_cast<int>(fraction * width);
    std::string bar(width, '.');
    std::fill(bar.begin(), bar.begin() + filled, '=');
    if (filled < width && shown > 0) bar[filled] = '>';
    text += " [" + bar + "]";
  }
  text += tail;
  if (static_cast<int>(text.size()) > room) text.resize(std::max(room, 0));
  return text;
}

void ProgressBar::Update(int64_t step, int64_t samples_done, double running_loss) {
  if (finished_) return;
  const double now = options_.clock();
  const double elapsed = now - start_;
  if (interactive_) {
    if (live_line_ && now - last_draw_ < options_.min_redraw_seconds) return;
    out_ << '\r' << StatusText(step, samples_done, running_loss, elapsed) << "\x1b[K"
         << std::flush;
    live_line_ = true;
  } else {
    if (now - last_draw_ < options_.plain_interval_seconds) return;
    out_ << StatusText(step, samples_done, running_loss, elapsed) << std::endl;
  }
  last_draw_ = now;
}

void ProgressBar::Finish(const std::string& summary) {
  if (finished_) return;
  finished_ = true;
  const double elapsed = options_.clock() - start_;
  std::string line = label_ + "  ";
  if (!summary.empty()) line += summary + "  ";
  line += "[" + FormatElapsed(elapsed) + "]";
  // The final line may be wider than the terminal: it is never rewritten.
  if (interactive_) {
    out_ << '\r' << line << "\x1b[K" << std::endl;
  } else {
    out_ << line << std::endl;
  }
}

bool IsTerminal(const std::ostream& out) {
  const int fd = StreamFd(out);
  if (fd < 0 || isatty(fd) == 0) return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

bool IsInteractive(const std::ostream& out) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* size = std::getenv(name);
    if (size != nullptr && std::atoi(size) > 1) return false;
  }
  return IsTerminal(out);
}

int TerminalColumns(const std::ostream& out) {
  const int fd = StreamFd(out);
  if (fd < 0) return 0;
  struct winsize size {};
  if (ioctl(fd, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

}  // namespace tandem
