#include "report/svg_plot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "tests/report/xml_checker.h"

namespace tandem {
namespace {

using testing::XmlElement;

const double kNaN = std::nan("");

XmlElement Parse(const std::string& svg) {
  XmlElement root;
  std::string error;
  EXPECT_TRUE(testing::ParseXml(svg, &root, &error)) << error;
  return root;
}

// All character data of <text> elements, in document order.
std::vector<std::string> Texts(const XmlElement& root) {
  std::vector<std::string> out;
  for (const XmlElement* t : root.FindAll("text")) out.push_back(t->text);
  return out;
}

int CountOf(const std::vector<std::string>& texts, const std::string& s) {
  return static_cast<int>(std::count(texts.begin(), texts.end(), s));
}

struct Frame {
  double left, top, right, bottom;
  bool Contains(double x, double y) const {
    return x >= left && x <= right && y >= top && y <= bottom;
  }
};

struct Point {
  double x, y;
};

// The points of a path's "M x y L x y M x y" data, and how many pieces.
std::vector<Point> PathPoints(const std::string& d, int* pieces) {
  std::vector<Point> points;
  std::istringstream in(d);
  std::string x, y;
  *pieces = 0;
  while (in >> x >> y) {
    if (x[0] == 'M') ++*pieces;
    EXPECT_TRUE(x[0] == 'M' || x[0] == 'L') << d;
    points.push_back({std::stod(x.substr(1)), std::stod(y)});
  }
  return points;
}

// A series as drawn: its group, which panel's frame it sits in, its path.
struct Drawn {
  std::string name;
  const XmlElement* group;
  int panel;
  std::string d;
};

// Walks the root's children: an axes group holds a frame rect (fill none);
// the series groups after it (those starting with <title>) are that panel's.
std::vector<Drawn> Series(const XmlElement& root, std::vector<Frame>* frames) {
  std::vector<Drawn> out;
  for (const XmlElement& child : root.children) {
    if (child.name != "g") continue;
    for (const XmlElement* rect : child.FindAll("rect")) {
      if (*rect->Attribute("fill") != "none") continue;
      const double x = std::stod(*rect->Attribute("x"));
      const double y = std::stod(*rect->Attribute("y"));
      frames->push_back({x, y, x + std::stod(*rect->Attribute("width")),
                         y + std::stod(*rect->Attribute("height"))});
    }
    if (!child.children.empty() && child.children[0].name == "title") {
      const std::vector<const XmlElement*> paths = child.FindAll("path");
      EXPECT_EQ(paths.size(), 1u);
      out.push_back({child.children[0].text, &child, static_cast<int>(frames->size()) - 1,
                     *paths.at(0)->Attribute("d")});
    }
  }
  return out;
}

std::vector<tandem::Series> TwelveEpochs(double start, double rate) {
  std::vector<double> train, test;
  for (int e = 0; e < 12; ++e) {
    train.push_back(start * std::exp(-rate * e));
    test.push_back(start * std::exp(-0.5 * rate * e) + 0.01);
  }
  return {{"train", {}, train}, {"test", {}, test}};
}

TEST(SvgPlotTest, DocumentIsWellFormedWithSizeAndViewBox) {
  PlotOptions options;
  options.width = 800;
  options.height = 360;
  const std::string svg =
      RenderTrainingCurves(TwelveEpochs(0.6, 0.2), TwelveEpochs(0.8, 0.05), "run", options);
  const XmlElement root = Parse(svg);
  EXPECT_EQ(root.name, "svg");
  EXPECT_EQ(*root.Attribute("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(*root.Attribute("width"), "800");
  EXPECT_EQ(*root.Attribute("height"), "360");
  EXPECT_EQ(*root.Attribute("viewBox"), "0 0 800 360");
  // Self-contained: nothing to fetch, nothing to run, no stylesheet.
  for (const char* external : {"<style", "<script", "href", "@import", "url("}) {
    EXPECT_EQ(svg.find(external), std::string::npos) << external;
  }
}

TEST(SvgPlotTest, HasTitleAxisLabelsTicksAndLegend) {
  PlotOptions options;
  options.loss_x_label = "step";
  const XmlElement root = Parse(RenderTrainingCurves(
      TwelveEpochs(0.6, 0.2), TwelveEpochs(0.8, 0.05), "MLP & friends <2 workers>", options));
  const std::vector<std::string> texts = Texts(root);
  EXPECT_EQ(CountOf(texts, "MLP & friends <2 workers>"), 1);  // escaped, decodes back
  EXPECT_EQ(root.FindAll("title").at(0)->text, "MLP & friends <2 workers>");
  EXPECT_EQ(CountOf(texts, "loss"), 1);
  EXPECT_EQ(CountOf(texts, "accuracy"), 1);
  EXPECT_EQ(CountOf(texts, "step"), 1);
  EXPECT_EQ(CountOf(texts, "epoch"), 1);
  // One legend entry per name, though both panels draw train and test.
  EXPECT_EQ(CountOf(texts, "train"), 1);
  EXPECT_EQ(CountOf(texts, "test"), 1);
  // Epoch ticks fall on whole numbers.
  EXPECT_EQ(CountOf(texts, "2"), 2);
  EXPECT_EQ(CountOf(texts, "12"), 2);
}

TEST(SvgPlotTest, EverySeriesIsDrawnInsideItsPanel) {
  const XmlElement root =
      Parse(RenderTrainingCurves(TwelveEpochs(0.6, 0.2), TwelveEpochs(0.8, 0.05), "run"));
  std::vector<Frame> frames;
  const std::vector<Drawn> drawn = Series(root, &frames);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_LT(frames[0].right, frames[1].left);  // side by side, not overlapping
  ASSERT_EQ(drawn.size(), 4u);
  const char* names[] = {"train", "test", "train", "test"};
  for (size_t i = 0; i < drawn.size(); ++i) {
    EXPECT_EQ(drawn[i].name, names[i]);
    EXPECT_EQ(drawn[i].panel, i < 2 ? 0 : 1);
    int pieces = 0;
    const std::vector<Point> points = PathPoints(drawn[i].d, &pieces);
    EXPECT_EQ(points.size(), 12u);
    EXPECT_EQ(pieces, 1);
    const Frame& frame = frames[drawn[i].panel];
    for (const Point& p : points) {
      EXPECT_TRUE(frame.Contains(p.x, p.y)) << drawn[i].name << " (" << p.x << ", " << p.y
                                            << ") outside its frame";
      // ...and not on its edge: the margin keeps markers off the frame.
      EXPECT_GT(p.x, frame.left + 2);
      EXPECT_LT(p.x, frame.right - 2);
    }
    for (const XmlElement* c : drawn[i].group->FindAll("circle")) {
      EXPECT_TRUE(frame.Contains(std::stod(*c->Attribute("cx")), std::stod(*c->Attribute("cy"))));
    }
    // Decreasing losses are drawn going down the screen (y grows downward).
    if (drawn[i].panel == 0) {
      EXPECT_LT(points.front().y, points.back().y);
    }
  }
}

TEST(SvgPlotTest, SameNameSameColourInBothPanels) {
  const XmlElement root =
      Parse(RenderTrainingCurves(TwelveEpochs(0.6, 0.2), TwelveEpochs(0.8, 0.05), "run"));
  std::vector<Frame> frames;
  const std::vector<Drawn> drawn = Series(root, &frames);
  ASSERT_EQ(drawn.size(), 4u);
  const auto colour = [](const Drawn& d) { return *d.group->FindAll("path")[0]->Attribute("stroke"); };
  EXPECT_EQ(colour(drawn[0]), colour(drawn[2]));
  EXPECT_EQ(colour(drawn[1]), colour(drawn[3]));
  EXPECT_NE(colour(drawn[0]), colour(drawn[1]));
}

TEST(SvgPlotTest, NaNsBreakTheLineAndNeverReachTheDocument) {
  const std::vector<tandem::Series> loss = {
      {"train", {}, {0.9, 0.7, kNaN, 0.5, 0.4, INFINITY, 0.3}}};
  const std::string svg = RenderTrainingCurves(loss, {}, "diverged once");
  for (const char* bad : {"nan", "NaN", "inf"}) {
    EXPECT_EQ(svg.find(bad), std::string::npos) << bad;
  }
  const XmlElement root = Parse(svg);
  std::vector<Frame> frames;
  const std::vector<Drawn> drawn = Series(root, &frames);
  ASSERT_EQ(drawn.size(), 1u);
  int pieces = 0;
  EXPECT_EQ(PathPoints(drawn[0].d, &pieces).size(), 5u);
  EXPECT_EQ(pieces, 3);  // 0.9-0.7 | 0.5-0.4 | 0.3
  // The empty accuracy panel says so.
  EXPECT_EQ(CountOf(Texts(root), "no data"), 1);
}

TEST(SvgPlotTest, OnePointAndConstantSeries) {
  const std::vector<tandem::Series> loss = {{"train", {}, {0.42}}};
  const std::vector<tandem::Series> accuracy = {{"test", {}, {0.5, 0.5, 0.5}}};
  const std::string svg = RenderTrainingCurves(loss, accuracy, "first epoch");
  const XmlElement root = Parse(svg);
  std::vector<Frame> frames;
  const std::vector<Drawn> drawn = Series(root, &frames);
  ASSERT_EQ(drawn.size(), 2u);
  // The single point shows as a marker in the middle of its panel.
  ASSERT_EQ(drawn[0].group->FindAll("circle").size(), 1u);
  const XmlElement& dot = *drawn[0].group->FindAll("circle")[0];
  const Frame& f = frames[0];
  EXPECT_NEAR(std::stod(*dot.Attribute("cx")), (f.left + f.right) / 2, 1.0);
  EXPECT_NEAR(std::stod(*dot.Attribute("cy")), (f.top + f.bottom) / 2, 1.0);
  // The constant is a flat line inside its frame.
  int pieces = 0;
  const std::vector<Point> flat = PathPoints(drawn[1].d, &pieces);
  ASSERT_EQ(flat.size(), 3u);
  for (const Point& p : flat) {
    EXPECT_TRUE(frames[1].Contains(p.x, p.y));
    EXPECT_EQ(p.y, flat[0].y);
  }
}

TEST(SvgPlotTest, DenseSeriesHaveNoMarkersExceptIsolatedPoints) {
  std::vector<double> steps, loss;
  for (int i = 0; i < 500; ++i) {
    steps.push_back(i * 10);
    loss.push_back(2.0 / (1 + i * 0.05));
  }
  loss[300] = kNaN;  // leaves step 3010 alone between two gaps
  loss[302] = kNaN;
  const XmlElement root = Parse(RenderTrainingCurves({{"train", steps, loss}}, {}, "per step"));
  std::vector<Frame> frames;
  const std::vector<Drawn> drawn = Series(root, &frames);
  ASSERT_EQ(drawn.size(), 1u);
  EXPECT_EQ(drawn[0].group->FindAll("circle").size(), 1u);
}

TEST(SvgPlotTest, ExplicitXValuesMustMatchY) {
  try {
    RenderTrainingCurves({{"train", {1, 2, 3}, {0.5, 0.4}}}, {}, "bad");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("loss series 'train' has 3 x values but 2 y values"),
              std::string::npos)
        << msg;
  }
}

TEST(SvgPlotTest, WritePlotWritesTheDocumentOrNamesTheFlag) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string base = dir != nullptr ? dir : "/tmp";
  const auto loss = TwelveEpochs(0.6, 0.2);
  WritePlot(base + "/curves.svg", loss, {}, "run");
  std::ifstream in(base + "/curves.svg");
  std::stringstream contents;
  contents << in.rdbuf();
  EXPECT_EQ(contents.str(), RenderTrainingCurves(loss, {}, "run"));

  try {
    WritePlot(base + "/no_such_dir/curves.svg", loss, {}, "run");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--plot=" + base + "/no_such_dir/curves.svg"),
              std::string::npos)
        << e.what();
  }
}

// The title's <text>: the bold one.
const XmlElement* TitleText(const XmlElement& root) {
  for (const XmlElement* t : root.FindAll("text")) {
    const std::string* weight = t->Attribute("font-weight");
    if (weight != nullptr && *weight == "bold") return t;
  }
  return nullptr;
}

TEST(SvgPlotTest, TitleFitsThePlotWidth) {
  // A default run's title keeps the full 18 px.
  const std::string short_title = "Fashion-MNIST, MLP 784-512-256-10, 2 workers";
  TitleLayout fit = FitTitle(short_title, 960);
  EXPECT_EQ(fit.text, short_title);
  EXPECT_EQ(fit.font_size, 18);
  EXPECT_LE(fit.estimated_width, 960 - 24);
  // What the plot used to show: the model's whole description, 150
  // characters. It shrinks, then is cut, and always fits.
  const std::string long_title =
      "Fashion-MNIST mlp (Sequential: fc1 (Linear 784\u2192512, relu), fc2 (Linear "
      "512\u2192256, relu), fc3 (Linear 256\u219210)), 2 worker(s), precision fp32, run 7";
  for (const int width : {960, 640, 300}) {
    fit = FitTitle(long_title, width);
    EXPECT_LE(fit.estimated_width, width - 24) << width;
    EXPECT_GE(fit.font_size, 12);
    EXPECT_LE(fit.font_size, 18);
  }
  fit = FitTitle(long_title, 640);
  EXPECT_EQ(fit.font_size, 12);
  ASSERT_GE(fit.text.size(), 3u);
  EXPECT_EQ(fit.text.substr(fit.text.size() - 3), "\u2026");
  EXPECT_EQ(long_title.rfind(fit.text.substr(0, fit.text.size() - 3), 0), 0u);  // a prefix
  // Medium titles shrink without losing a character.
  const std::string medium(90, 'x');
  fit = FitTitle(medium, 960);
  EXPECT_EQ(fit.text, medium);
  EXPECT_LT(fit.font_size, 18);
}

TEST(SvgPlotTest, DrawnTitleIsTheFittedOneAndTheWholeTitleStaysInTitle) {
  const std::string title(200, 'y');
  PlotOptions options;
  options.width = 640;
  const XmlElement root =
      Parse(RenderTrainingCurves(TwelveEpochs(0.6, 0.2), TwelveEpochs(0.8, 0.05), title, options));
  const XmlElement* drawn = TitleText(root);
  ASSERT_NE(drawn, nullptr);
  const TitleLayout fit = FitTitle(title, 640);
  EXPECT_EQ(drawn->text, fit.text);
  EXPECT_EQ(*drawn->Attribute("font-size"), std::to_string(fit.font_size));
  EXPECT_EQ(root.FindAll("title").at(0)->text, title);
}

TEST(NiceScaleTest, EpochsGetWholeTicksInsideAMargin) {
  const AxisScale s = NiceScale(1, 12, 7, /*integer=*/true);
  EXPECT_LT(s.lo, 1);
  EXPECT_GT(s.hi, 12);
  EXPECT_EQ(s.step, 2);
  EXPECT_EQ(s.first_tick, 2);
  EXPECT_EQ(s.num_ticks, 6);  // 2 4 6 8 10 12
}

TEST(NiceScaleTest, TicksAreRoundAndInRange) {
  for (const auto& [min, max] : std::vector<std::pair<double, double>>{
           {0.18, 0.53}, {0.8, 0.935}, {0, 1}, {-3, 7}, {1e-9, 3e-9}, {0.3, 0.3 + 1e-12},
           {1234, 98765}, {-1e200, 1e200}}) {
    const AxisScale s = NiceScale(min, max, 8, false);
    EXPECT_LE(s.lo, min);
    EXPECT_GE(s.hi, max);
    EXPECT_GE(s.num_ticks, 2) << min << ".." << max;
    EXPECT_LE(s.num_ticks, 8) << min << ".." << max;
    const double mantissa = s.step / std::pow(10, std::floor(std::log10(s.step)));
    EXPECT_TRUE(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 ||
                std::abs(mantissa - 5) < 1e-9)
        << s.step;
    for (int i = 0; i < s.num_ticks; ++i) {
      const double tick = s.first_tick + i * s.step;
      EXPECT_GE(tick, s.lo - 1e-9 * std::abs(s.step));
      EXPECT_LE(tick, s.hi + 1e-9 * std::abs(s.step));
    }
  }
}

TEST(NiceScaleTest, DegenerateRanges) {
  const AxisScale constant = NiceScale(0.5, 0.5, 8, false);  // no divide by zero
  EXPECT_LT(constant.lo, 0.5);
  EXPECT_GT(constant.hi, 0.5);
  const AxisScale zero = NiceScale(0, 0, 8, false);
  EXPECT_LT(zero.lo, 0);
  EXPECT_GT(zero.hi, 0);
  const AxisScale one_epoch = NiceScale(1, 1, 8, true);
  EXPECT_EQ(one_epoch.step, 1);
  EXPECT_EQ(one_epoch.first_tick, 0);
  EXPECT_EQ(one_epoch.num_ticks, 3);  // 0 1 2
  const AxisScale none = NiceScale(INFINITY, -INFINITY, 8, false);  // no data
  EXPECT_LE(none.lo, 0);
  EXPECT_GE(none.hi, 1);
  EXPECT_GE(none.num_ticks, 2);
}

}  // namespace
}  // namespace tandem
