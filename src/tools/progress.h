// A training progress bar: epoch, loss, samples/s and ETA, redrawn in place on a terminal and
// printed as plain lines otherwise (CI logs, pipes).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace smelt::tools {

class ProgressBar {
 public:
  // `total_steps` over the whole run (all epochs), for the ETA.
  ProgressBar(int64_t total_steps, FILE* out = stdout);

  // After each step: `samples` processed in this step, the step's loss.
  void step(int epoch, int epochs, int64_t samples, double loss);
  // Ends the current epoch's line (on a terminal) or prints its summary (otherwise).
  void end_epoch(int epoch, int epochs, const std::string& extra);

 private:
  using Clock = std::chrono::steady_clock;
  double elapsed() const;

  int64_t total_steps_;
  int64_t done_steps_ = 0;
  int64_t samples_ = 0;
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
  FILE* out_;
  bool tty_;
  Clock::time_point start_;
  Clock::time_point last_draw_;
};

}  // namespace smelt::tools
