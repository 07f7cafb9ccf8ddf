#include "tools/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "smelt/error.h"

namespace smelt::tools {
namespace {

constexpr double kWidth = 720, kHeight = 420;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

std::string svg_line_chart(const std::vector<Series>& series, const PlotOptions& opt) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  auto ty = [&](double y) { return opt.log_y ? std::log10(std::max(y, 1e-300)) : y; };
  for (const Series& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, ty(s.y[i]));
      y1 = std::max(y1, ty(s.y[i]));
    }
  }
  if (!(x0 < x1)) { x0 = 0; x1 = std::isfinite(x1) ? x1 + 1 : 1; }
  if (!(y0 < y1)) { y0 = std::isfinite(y0) ? y0 - 1 : 0; y1 = y0 + 2; }
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + ph - (ty(y) - y0) / (y1 - y0) * ph; };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kWidth / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
    << escape(opt.title) << "</text>\n";
  // axes, 5 ticks each
  o << "<g stroke=\"#888\"><line x1=\"" << kLeft << "\" y1=\"" << kTop + ph << "\" x2=\"" << kLeft + pw
    << "\" y2=\"" << kTop + ph << "\"/><line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft
    << "\" y2=\"" << kTop + ph << "\"/></g>\n";
  for (int i = 0; i <= 4; ++i) {
    double xv = x0 + (x1 - x0) * i / 4, yv = y0 + (y1 - y0) * i / 4;
    double label_y = opt.log_y ? std::pow(10.0, yv) : yv;
    o << "<text x=\"" << px(xv) << "\" y=\"" << kTop + ph + 16 << "\" text-anchor=\"middle\">" << num(xv)
      << "</text>\n";
    double ypix = kTop + ph - (yv - y0) / (y1 - y0) * ph;
    o << "<text x=\"" << kLeft - 6 << "\" y=\"" << ypix + 4 << "\" text-anchor=\"end\">" << num(label_y)
      << "</text>\n<line x1=\"" << kLeft << "\" y1=\"" << ypix << "\" x2=\"" << kLeft + pw << "\" y2=\""
      << ypix << "\" stroke=\"#eee\"/>\n";
  }
  o << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kHeight - 12 << "\" text-anchor=\"middle\">"
    << escape(opt.x_label) << "</text>\n";
  o << "<text transform=\"translate(16," << kTop + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << escape(opt.y_label) << "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    const char* color = kColors[k % (sizeof kColors / sizeof kColors[0])];
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"";
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (std::isfinite(s.y[i])) o << num(px(s.x[i])) << "," << num(py(s.y[i])) << " ";
    }
    o << "\"/>\n<text x=\"" << kLeft + pw - 4 << "\" y=\"" << kTop + 14 + 16 * double(k)
      << "\" text-anchor=\"end\" fill=\"" << color << "\">" << escape(s.label) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

void write_svg_line_chart(const std::string& path, const std::vector<Series>& series,
                          const PlotOptions& options) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    SMELT_CHECK(f.good()) << "cannot write " << tmp << ": check that the directory exists and is writable";
    f << svg_line_chart(series, options);
    SMELT_CHECK(f.good()) << "writing " << tmp << " failed (disk full?)";
  }
  SMELT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0) << "cannot rename " << tmp << " to " << path;
}

}  // namespace smelt::tools
