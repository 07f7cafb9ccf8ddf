// Line charts as standalone SVG files (no dependencies): the demo's loss curve, benchmark charts.
#pragma once

#include <string>
#include <vector>

namespace smelt::tools {

struct Series {
  std::string label;
  std::vector<double> x;
  std::vector<double> y;
};

struct PlotOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_y = false;
};

// Renders the series to SVG text.
std::string svg_line_chart(const std::vector<Series>& series, const PlotOptions& options);
// Writes the chart to `path` atomically (temp file + rename); throws smelt::Error on failure.
void write_svg_line_chart(const std::string& path, const std::vector<Series>& series,
                          const PlotOptions& options);

}  // namespace smelt::tools
