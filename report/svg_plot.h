// Training curves as a self-contained SVG: loss on the left, accuracy on the
// right, one line per series, with axes, ticks, a shared legend and a title.
// No scripts, external fonts or CSS, so any browser, image viewer or GitHub
// page shows it as it is.
//
//   std::vector<Series> loss = {{"train", {}, train_losses}};
//   std::vector<Series> accuracy = {{"train", {}, train_accuracies},
//                                   {"test", {}, test_accuracies}};
//   WritePlot(config.plot_path, loss, accuracy, "MLP 784-512-256-10, 2 workers");
//
// The title is drawn in bold 18 px, or smaller (down to 12 px) where it would
// not fit the width, and cut with "…" where even 12 px is too wide; the
// whole title stays the document's <title> (a viewer's tooltip).
//
// A series with no x values is plotted against 1, 2, 3, ... (epochs). Series
// with the same name share a colour and a legend entry across both panels.
// NaN and infinite points are left out (the line breaks there); a single point
// shows as a marker; a constant series gets a small range around its value.
#ifndef TANDEM_REPORT_SVG_PLOT_H_
#define TANDEM_REPORT_SVG_PLOT_H_

#include <string>
#include <vector>

namespace tandem {

struct Series {
  std::string name;       // legend label, e.g. "train" or "test"
  std::vector<double> x;  // empty: 1, 2, ..., y.size()
  std::vector<double> y;
};

struct PlotOptions {
  int width = 960;   // pixels; the SVG's viewBox matches
  int height = 420;
  std::string loss_x_label = "epoch";  // e.g. "step" for per-step losses
  std::string accuracy_x_label = "epoch";
};

// The SVG document. Throws tandem::Error naming the series if a series has x
// values but not as many as y values.
std::string RenderTrainingCurves(const std::vector<Series>& loss_series,
                                 const std::vector<Series>& accuracy_series,
                                 const std::string& title,
                                 const PlotOptions& options = {});

// Renders and writes to `path` (atomically: a viewer never sees half a plot,
// so rewriting after every epoch is safe). Errors name the path and `flag`.
void WritePlot(const std::string& path, const std::vector<Series>& loss_series,
               const std::vector<Series>& accuracy_series, const std::string& title,
               const PlotOptions& options = {}, const std::string& flag = "--plot");

// The drawn title: `title` in a font size that fits `width` pixels with a
// margin each side, or cut to fit with "…" at the smallest size. Widths are
// estimated from the character count (generously, for bold DejaVu Sans).
// Exposed for tests.
struct TitleLayout {
  std::string text;
  int font_size;
  double estimated_width;  // pixels
};
TitleLayout FitTitle(const std::string& title, int width);

// An axis: its range and where its ticks fall. Exposed for tests.
struct AxisScale {
  double lo;          // the range shown: the data plus a 5% margin each side,
  double hi;          // so no point sits on the frame
  double first_tick;  // the ticks: first_tick + i * step, i < num_ticks,
  double step;        // all inside [lo, hi]; step is 1, 2 or 5 x 10^k
  int num_ticks;
};
// The axis for data in [min, max] (min > max or not finite: no data) with at
// most `max_ticks` ticks. `integer`: ticks fall on whole numbers (epochs).
AxisScale NiceScale(double min, double max, int max_ticks, bool integer);

}  // namespace tandem

#endif  // TANDEM_REPORT_SVG_PLOT_H_
