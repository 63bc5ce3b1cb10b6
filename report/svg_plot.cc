#include "report/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "core/check.h"
#include "report/write_file.h"

namespace tandem {

namespace {

// tab10, the matplotlib default: distinct, and readable on white.
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
// Every other series is dashed, so train and test differ without colour too.
const char* const kDashes[] = {"", "7 4"};
constexpr int kMaxMarkers = 50;  // beyond this many points markers are clutter
constexpr double kCharWidth = 7.2;  // DejaVu Sans at 13 px, about; for layout only
// Bold DejaVu Sans advances about 0.7 em for digits and capitals, less for
// most lower case: an upper bound for a title's width, per character.
constexpr double kBoldEm = 0.72;
constexpr int kTitleSize = 18;     // px, the title's font when it fits
constexpr int kMinTitleSize = 12;  // px, the smallest it shrinks to
constexpr double kTitleMargin = 12;  // px each side

std::string Escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 forbids most control characters, even escaped.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string Num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

std::string TickLabel(double value, double step) {
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  if (std::abs(value) < step * 1e-6) value = 0;  // no "-0.00"
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

// The points of one series, x filled in where the caller left it empty.
struct Points {
  std::vector<double> x, y;
};

Points PointsOf(const Series& s, const char* panel) {
  TANDEM_CHECK(s.x.empty() || s.x.size() == s.y.size())
      << panel << " series '" << s.name << "' has " << s.x.size() << " x values but "
      << s.y.size() << " y values; give as many of each, or no x (1, 2, 3, ...)";
  Points p;
  p.y = s.y;
  p.x = s.x;
  if (p.x.empty()) {
    for (size_t i = 0; i < s.y.size(); ++i) p.x.push_back(static_cast<double>(i + 1));
  }
  return p;
}

bool Finite(double x, double y) { return std::isfinite(x) && std::isfinite(y); }

// Characters, not bytes: a UTF-8 continuation byte starts no character.
size_t Utf8Length(const std::string& text) {
  size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// The first `chars` characters of `text`.
std::string Utf8Prefix(const std::string& text, size_t chars) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && seen++ == chars) {
      return text.substr(0, i);
    }
  }
  return text;
}

struct Style {
  const char* color;
  const char* dash;
};

struct Box {
  double left, top, right, bottom;
};

class Panel {
 public:
  Panel(Box box, const std::vector<Points>& points, const std::string& x_label,
        const std::string& y_label)
      : box_(box), x_label_(x_label), y_label_(y_label) {
    double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min;
    double y_min = x_min, y_max = -x_min;
    bool integer_x = true;
    for (const Points& p : points) {
      for (size_t i = 0; i < p.x.size(); ++i) {
        if (!Finite(p.x[i], p.y[i])) continue;
        has_data_ = true;
        x_min = std::min(x_min, p.x[i]);
        x_max = std::max(x_max, p.x[i]);
        y_min = std::min(y_min, p.y[i]);
        y_max = std::max(y_max, p.y[i]);
        integer_x = integer_x && p.x[i] == std::floor(p.x[i]);
      }
    }
    // Ticks at least ~55 px apart across, ~40 px up.
    const int x_ticks = std::max(2, static_cast<int>((box.right - box.left) / 55));
    const int y_ticks = std::max(2, static_cast<int>((box.bottom - box.top) / 40));
    x_ = NiceScale(x_min, x_max, x_ticks, integer_x);
    y_ = NiceScale(y_min, y_max, y_ticks, false);
  }

  double X(double x) const {
    return box_.left + (x - x_.lo) / (x_.hi - x_.lo) * (box_.right - box_.left);
  }
  double Y(double y) const {
    return box_.bottom - (y - y_.lo) / (y_.hi - y_.lo) * (box_.bottom - box_.top);
  }

  void DrawAxes(std::string& svg) const {
    const Box& b = box_;
    svg += "<g font-size=\"12\" fill=\"#333333\">\n";
    // Grid lines and tick labels, counted from the first tick rather than
    // accumulated, so rounding cannot add or lose one.
    for (int i = 0; i < x_.num_ticks; ++i) {
      const double v = x_.first_tick + i * x_.step;
      const std::string px = Num(X(v));
      svg += "<line x1=\"" + px + "\" y1=\"" + Num(b.top) + "\" x2=\"" + px + "\" y2=\"" +
             Num(b.bottom + 5) + "\" stroke=\"#e6e6e6\"/>\n";
      svg += "<text x=\"" + px + "\" y=\"" + Num(b.bottom + 19) +
             "\" text-anchor=\"middle\">" + TickLabel(v, x_.step) + "</text>\n";
    }
    for (int i = 0; i < y_.num_ticks; ++i) {
      const double v = y_.first_tick + i * y_.step;
      const std::string py = Num(Y(v));
      svg += "<line x1=\"" + Num(b.left - 5) + "\" y1=\"" + py + "\" x2=\"" +
             Num(b.right) + "\" y2=\"" + py + "\" stroke=\"#e6e6e6\"/>\n";
      svg += "<text x=\"" + Num(b.left - 8) + "\" y=\"" + py +
             "\" dy=\"0.35em\" text-anchor=\"end\">" + TickLabel(v, y_.step) +
             "</text>\n";
    }
    svg += "<rect x=\"" + Num(b.left) + "\" y=\"" + Num(b.top) + "\" width=\"" +
           Num(b.right - b.left) + "\" height=\"" + Num(b.bottom - b.top) +
           "\" fill=\"none\" stroke=\"#333333\"/>\n";
    svg += "<text x=\"" + Num((b.left + b.right) / 2) + "\" y=\"" + Num(b.bottom + 40) +
           "\" text-anchor=\"middle\" font-size=\"14\">" + Escape(x_label_) + "</text>\n";
    svg += "<text transform=\"translate(" + Num(b.left - 46) + "," +
           Num((b.top + b.bottom) / 2) +
           ") rotate(-90)\" text-anchor=\"middle\" font-size=\"14\">" +
           Escape(y_label_) + "</text>\n";
    if (!has_data_) {
      svg += "<text x=\"" + Num((b.left + b.right) / 2) + "\" y=\"" +
             Num((b.top + b.bottom) / 2) +
             "\" text-anchor=\"middle\" font-size=\"14\" fill=\"#999999\">no data</text>\n";
    }
    svg += "</g>\n";
  }

  void DrawSeries(std::string& svg, const Points& p, const Style& style,
                  const std::string& name) const {
    const size_t n = p.x.size();
    int finite = 0;
    for (size_t i = 0; i < n; ++i) finite += Finite(p.x[i], p.y[i]) ? 1 : 0;
    if (finite == 0) return;
    const bool all_markers = finite <= kMaxMarkers;
    std::string path, markers;
    for (size_t i = 0; i < n; ++i) {
      if (!Finite(p.x[i], p.y[i])) continue;  // the line breaks at a gap
      const bool joined = i > 0 && Finite(p.x[i - 1], p.y[i - 1]);
      const bool isolated = !joined && (i + 1 == n || !Finite(p.x[i + 1], p.y[i + 1]));
      const std::string px = Num(X(p.x[i])), py = Num(Y(p.y[i]));
      path += (joined ? " L" : (path.empty() ? "M" : " M")) + px + " " + py;
      // A point with no neighbour has no line: it needs its marker even in a
      // dense series.
      if (all_markers || isolated) {
        markers += "<circle cx=\"" + px + "\" cy=\"" + py + "\" r=\"3\"/>";
      }
    }
    svg += "<g><title>" + Escape(name) + "</title>\n";
    svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + style.color +
           "\" stroke-width=\"" + (all_markers ? "2" : "1.5") +
           "\" stroke-linejoin=\"round\"";
    if (*style.dash != '\0') svg += std::string(" stroke-dasharray=\"") + style.dash + "\"";
    svg += "/>\n";
    if (!markers.empty()) {
      svg += std::string("<g fill=\"") + style.color + "\">" + markers + "</g>\n";
    }
    svg += "</g>\n";
  }

 private:
  Box box_;
  std::string x_label_, y_label_;
  bool has_data_ = false;
  AxisScale x_{}, y_{};
};

}  // namespace

TitleLayout FitTitle(const std::string& title, int width) {
  const double room = width - 2 * kTitleMargin;
  const size_t chars = Utf8Length(title);
  for (int size = kTitleSize; size >= kMinTitleSize; --size) {
    const double estimate = chars * size * kBoldEm;
    if (estimate <= room) return {title, size, estimate};
  }
  const int size = kMinTitleSize;
  const size_t fit = static_cast<size_t>(room / (size * kBoldEm));
  // One character's room goes to the ellipsis; trailing spaces and
  // punctuation before it would read as part of the title.
  std::string text = Utf8Prefix(title, fit > 0 ? fit - 1 : 0);
  while (!text.empty() && (text.back() == ' ' || text.back() == ',')) text.pop_back();
  text += "\xE2\x80\xA6";  // U+2026 HORIZONTAL ELLIPSIS, in UTF-8
  return {text, size, Utf8Length(text) * size * kBoldEm};
}

AxisScale NiceScale(double min, double max, int max_ticks, bool integer) {
  max_ticks = std::max(max_ticks, 2);
  if (!(min <= max) || !std::isfinite(min) || !std::isfinite(max)) {  // no data
    min = 0;
    max = 1;
  }
  if (max == min) {  // one point, or a constant: centre it in a small range
    const double pad = integer ? 1.0 : (min != 0 ? std::abs(min) * 0.1 : 1.0);
    min -= pad;
    max += pad;
  }
  const double span = std::min(max - min, std::numeric_limits<double>::max() / 4);
  AxisScale scale;
  scale.lo = min - 0.05 * span;
  scale.hi = max + 0.05 * span;
  // Candidate steps 1, 2, 5 x 10^k from just below span / max_ticks upwards;
  // the first that puts at most max_ticks ticks in the range wins. The
  // epsilons keep 0.3 / 0.1 = 2.9999999999999996 from losing a tick.
  const double raw = span / max_ticks;
  int exponent = static_cast<int>(std::floor(std::log10(raw))) - 1;
  for (int tries = 0; tries < 64; ++tries, ++exponent) {
    for (const double m : {1.0, 2.0, 5.0}) {
      const double step = m * std::pow(10.0, exponent);
      if (integer && step < 1) continue;
      const double first = std::ceil(scale.lo / step - 1e-9);
      const double last = std::floor(scale.hi / step + 1e-9);
      const double count = last - first + 1;
      if (count <= max_ticks) {
        scale.first_tick = first * step;
        scale.step = step;
        scale.num_ticks = static_cast<int>(std::max(count, 0.0));
        return scale;
      }
    }
  }
  scale.first_tick = scale.lo;  // unreachable for finite input
  scale.step = scale.hi - scale.lo;
  scale.num_ticks = 2;
  return scale;
}

std::string RenderTrainingCurves(const std::vector<Series>& loss_series,
                                 const std::vector<Series>& accuracy_series,
                                 const std::string& title, const PlotOptions& options) {
  TANDEM_CHECK(options.width >= 200 && options.height >= 150)
      << "plot size " << options.width << "x" << options.height
      << " is too small: at least 200x150 pixels";
  std::vector<Points> loss, accuracy;
  for (const Series& s : loss_series) loss.push_back(PointsOf(s, "loss"));
  for (const Series& s : accuracy_series) accuracy.push_back(PointsOf(s, "accuracy"));

  // One style per name, in order of first appearance, shared by both panels.
  std::vector<std::string> names;
  std::map<std::string, Style> styles;
  for (const std::vector<Series>* panel : {&loss_series, &accuracy_series}) {
    for (const Series& s : *panel) {
      if (styles.count(s.name) != 0) continue;
      const size_t i = names.size();
      styles[s.name] = {kColors[i % 10], kDashes[i % 2]};
      names.push_back(s.name);
    }
  }

  const double w = options.width, h = options.height;
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(options.width) +
         "\" height=\"" + std::to_string(options.height) + "\" viewBox=\"0 0 " +
         std::to_string(options.width) + " " + std::to_string(options.height) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  svg += "<title>" + Escape(title) + "</title>\n";
  svg += "<rect width=\"" + Num(w) + "\" height=\"" + Num(h) + "\" fill=\"#ffffff\"/>\n";
  const TitleLayout shown = FitTitle(title, options.width);
  svg += "<text x=\"" + Num(w / 2) + "\" y=\"30\" text-anchor=\"middle\" font-size=\"" +
         std::to_string(shown.font_size) + "\" font-weight=\"bold\" fill=\"#111111\">" +
         Escape(shown.text) + "</text>\n";

  // Legend, centred under the title: a line sample in the series' style,
  // then its name.
  double legend_width = 0;
  for (const std::string& name : names) legend_width += 30 + name.size() * kCharWidth + 24;
  double lx = std::max(8.0, (w - legend_width) / 2);
  svg += "<g font-size=\"13\" fill=\"#222222\">\n";
  for (const std::string& name : names) {
    const Style& style = styles[name];
    svg += "<line x1=\"" + Num(lx) + "\" y1=\"54\" x2=\"" + Num(lx + 24) +
           "\" y2=\"54\" stroke=\"" + style.color + "\" stroke-width=\"2\"";
    if (*style.dash != '\0') svg += std::string(" stroke-dasharray=\"") + style.dash + "\"";
    svg += "/>";
    svg += "<circle cx=\"" + Num(lx + 12) + "\" cy=\"54\" r=\"3\" fill=\"" + style.color +
           "\"/>";
    svg += "<text x=\"" + Num(lx + 30) + "\" y=\"54\" dy=\"0.35em\">" + Escape(name) +
           "</text>\n";
    lx += 30 + name.size() * kCharWidth + 24;
  }
  svg += "</g>\n";

  // Two panels side by side; each keeps room on its left for tick labels
  // and the rotated axis label, and below for tick labels and the x label.
  const double top = 78, bottom = h - 56;
  const Panel panels[2] = {
      Panel({70, top, w / 2 - 24, bottom}, loss, options.loss_x_label, "loss"),
      Panel({w / 2 + 70, top, w - 24, bottom}, accuracy, options.accuracy_x_label,
            "accuracy")};
  const std::vector<Points>* points[2] = {&loss, &accuracy};
  const std::vector<Series>* series[2] = {&loss_series, &accuracy_series};
  for (int p = 0; p < 2; ++p) {
    panels[p].DrawAxes(svg);
    for (size_t i = 0; i < points[p]->size(); ++i) {
      const std::string& name = (*series[p])[i].name;
      panels[p].DrawSeries(svg, (*points[p])[i], styles[name], name);
    }
  }
  svg += "</svg>\n";
  return svg;
}

void WritePlot(const std::string& path, const std::vector<Series>& loss_series,
               const std::vector<Series>& accuracy_series, const std::string& title,
               const PlotOptions& options, const std::string& flag) {
  WriteFileAtomically(path, RenderTrainingCurves(loss_series, accuracy_series, title, options),
                      flag);
}

}  // namespace tandem
