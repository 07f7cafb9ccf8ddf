// The memory plan as text (for `smelt compile` and SMELT_DEBUG) and as an arena timeline SVG.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "runtime/memory_plan.h"
#include "smelt/error.h"

namespace smelt::runtime {
namespace {

// "3.25 MiB", "512 B".
std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string ratio(int64_t num, int64_t den) {
  if (den == 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", double(num) / double(den));
  return buf;
}

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string buffer_name(const std::vector<BufferRequest>& requests, size_t i) {
  if (!requests[i].label.empty()) return requests[i].label;
  std::string name = "#";  // appended, not "#" + ...: GCC 12 warns falsely (-Wrestrict) on that
  name += std::to_string(i);
  return name;
}

const char* const kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                               "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

}  // namespace

std::string memory_plan_report(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  std::ostringstream o;
  auto row = [&](const char* name, int64_t bytes) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "  %-14s %14lld bytes  %11s", name, (long long)bytes,
                  human_bytes(bytes).c_str());
    o << buf;
  };
  o << "memory plan: " << requests.size() << " buffers over " << plan.num_steps << " steps, "
    << plan.inplace.size() << " in-place reuses, strategy " << memory_strategy_name(plan.strategy)
    << (plan.strategy == MemoryStrategy::None ? " (planning off: one region per buffer)" : "")
    << "\n";
  row("naive total", plan.naive_bytes);
  o << "  (one allocation per buffer)\n";
  row("planned arena", plan.arena_bytes);
  o << "  " << ratio(plan.arena_bytes, plan.naive_bytes) << " of naive";
  if (plan.strategy != MemoryStrategy::None) {
    o << " (";
    if (plan.by_size_bytes > 0) o << "by-size " << human_bytes(plan.by_size_bytes) << ", ";
    if (plan.by_order_bytes > 0) o << "by-order " << human_bytes(plan.by_order_bytes) << ", ";
    o << plan.perturbed_tries << " perturbed";
    if (plan.perturbed_tries > 0) o << " best " << human_bytes(plan.perturbed_bytes);
    o << ")";
  }
  o << "\n";
  row("lower bound", plan.lower_bound_bytes);
  o << "  most live at one step";
  if (plan.lower_bound_step >= 0) o << " (step " << plan.lower_bound_step << ")";
  o << "; arena / lower bound = " << ratio(plan.arena_bytes, plan.lower_bound_bytes) << "\n";
  return o.str();
}

std::string memory_plan_svg(const std::vector<BufferRequest>& requests, const MemoryPlan& plan,
                            std::string_view title) {
  constexpr double kWidth = 960, kHeight = 560;
  constexpr double kLeft = 90, kRight = 20, kTop = 40, kBottom = 50;
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  const double steps = double(std::max<int64_t>(plan.num_steps, 1));
  const double top = double(std::max({plan.arena_bytes, plan.lower_bound_bytes, int64_t(1)}));
  auto px = [&](double step) { return kLeft + step / steps * pw; };
  auto py = [&](double offset) { return kTop + ph - offset / top * ph; };  // offset 0 at bottom

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kWidth / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
    << xml_escape(title) << " (" << memory_strategy_name(plan.strategy) << ", arena "
    << human_bytes(plan.arena_bytes) << ", lower bound " << human_bytes(plan.lower_bound_bytes)
    << ", naive " << human_bytes(plan.naive_bytes) << ")</text>\n";
  // Axes with 5 ticks each: steps along x, offsets along y.
  o << "<g stroke=\"#888\"><line x1=\"" << kLeft << "\" y1=\"" << kTop + ph << "\" x2=\""
    << kLeft + pw << "\" y2=\"" << kTop + ph << "\"/><line x1=\"" << kLeft << "\" y1=\"" << kTop
    << "\" x2=\"" << kLeft << "\" y2=\"" << kTop + ph << "\"/></g>\n";
  for (int k = 0; k <= 4; ++k) {
    const int64_t step = int64_t(steps * k / 4);
    const double offset = top * k / 4;
    o << "<text x=\"" << px(double(step)) << "\" y=\"" << kTop + ph + 16
      << "\" text-anchor=\"middle\">" << step << "</text>\n"
      << "<text x=\"" << kLeft - 6 << "\" y=\"" << py(offset) + 4 << "\" text-anchor=\"end\">"
      << human_bytes(int64_t(offset)) << "</text>\n";
  }
  o << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kHeight - 12
    << "\" text-anchor=\"middle\">step</text>\n"
    << "<text transform=\"translate(16," << kTop + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\">arena offset</text>\n";
  // One rectangle per buffer over [first_step, last_step + 1) x [offset, offset + bytes).
  for (size_t i = 0; i < requests.size() && i < plan.offsets.size(); ++i) {
    const BufferRequest& r = requests[i];
    if (r.bytes == 0) continue;
    const double x0 = px(double(r.first_step)), x1 = px(double(r.last_step + 1));
    const double y1 = py(double(plan.offsets[i])), y0 = py(double(plan.offsets[i] + r.bytes));
    const std::string name = xml_escape(buffer_name(requests, i));
    o << "<g><title>" << name << ": " << r.bytes << " bytes at offset " << plan.offsets[i]
      << ", steps " << r.first_step << ".." << r.last_step << "</title><rect x=\"" << x0
      << "\" y=\"" << y0 << "\" width=\"" << std::max(x1 - x0, 0.5) << "\" height=\""
      << std::max(y1 - y0, 0.5) << "\" fill=\"" << kColors[i % std::size(kColors)]
      << "\" fill-opacity=\"0.75\" stroke=\"white\" stroke-width=\"0.5\"/>";
    // A label only where it fits (about 6 px per character, 11 px high).
    if (x1 - x0 >= 6.0 * double(name.size()) + 4 && y1 - y0 >= 12) {
      o << "<text x=\"" << (x0 + x1) / 2 << "\" y=\"" << (y0 + y1) / 2 + 4
        << "\" text-anchor=\"middle\">" << name << "</text>";
    }
    o << "</g>\n";
  }
  o << "<line x1=\"" << kLeft << "\" y1=\"" << py(double(plan.lower_bound_bytes)) << "\" x2=\""
    << kLeft + pw << "\" y2=\"" << py(double(plan.lower_bound_bytes))
    << "\" stroke=\"#333\" stroke-dasharray=\"6,4\"><title>lower bound</title></line>\n"
    << "</svg>\n";
  return o.str();
}

void write_memory_plan_svg(const std::string& path, const std::vector<BufferRequest>& requests,
                           const MemoryPlan& plan, std::string_view title) {
  const std::string svg = memory_plan_svg(requests, plan, title);
  std::ofstream f(path, std::ios::binary);
  SMELT_CHECK(f.good()) << "cannot open '" << path << "' to write the arena timeline";
  f << svg;
  f.close();
  SMELT_CHECK(f.good()) << "writing the arena timeline to '" << path << "' failed";
}

}  // namespace smelt::runtime
