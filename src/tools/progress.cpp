#include "tools/progress.h"

#include <unistd.h>

#include <algorithm>

namespace smelt::tools {

ProgressBar::ProgressBar(int64_t total_steps, FILE* out)
    : total_steps_(std::max<int64_t>(total_steps, 1)),
      out_(out),
      tty_(isatty(fileno(out)) != 0),
      start_(Clock::now()),
      last_draw_(start_) {}

double ProgressBar::elapsed() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void ProgressBar::step(int epoch, int epochs, int64_t samples, double loss) {
  ++done_steps_;
  samples_ += samples;
  loss_sum_ += loss;
  ++loss_count_;
  if (!tty_) return;
  // Redraw at most ~20 times a second: drawing must not cost training time.
  auto now = Clock::now();
  if (done_steps_ != total_steps_ && now - last_draw_ < std::chrono::milliseconds(50)) return;
  last_draw_ = now;
  const double t = elapsed();
  const double frac = double(done_steps_) / double(total_steps_);
  const double eta = frac > 0 ? t / frac - t : 0;
  constexpr int kWidth = 24;
  const int filled = int(frac * kWidth);
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(out_, "\r\033[Kepoch %d/%d [%s] loss %.4f  %.0f samples/s  ETA %.1fs", epoch, epochs,
               bar.c_str(), loss_sum_ / double(std::max<int64_t>(loss_count_, 1)),
               double(samples_) / std::max(t, 1e-9), eta);
  std::fflush(out_);
}

void ProgressBar::end_epoch(int epoch, int epochs, const std::string& extra) {
  const double t = elapsed();
  const double frac = double(done_steps_) / double(total_steps_);
  const double eta = frac > 0 ? t / frac - t : 0;
  std::fprintf(out_, "%sepoch %d/%d loss %.4f  %.0f samples/s  ETA %.1fs%s%s\n", tty_ ? "\r\033[K" : "",
               epoch, epochs, loss_sum_ / double(std::max<int64_t>(loss_count_, 1)),
               double(samples_) / std::max(t, 1e-9), eta, extra.empty() ? "" : "  ", extra.c_str());
  std::fflush(out_);
  loss_sum_ = 0;
  loss_count_ = 0;
}

}  // namespace smelt::tools
