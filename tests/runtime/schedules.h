// Buffer request sets for the memory planner's tests: random intervals, random schedules of ops
// (a toy scheduler over values), and the lifetimes of an MLP training step.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/memory_plan.h"

namespace smelt::testing {

using runtime::BufferRequest;

// Builds requests from a schedule: each step reads some values and writes some. A value's
// lifetime runs from the step that writes it to its last reader (or that step when unread).
// Values marked external (graph inputs, parameters, outputs) are not requests.
class ScheduleBuilder {
 public:
  int value(int64_t bytes, std::string label = "", bool external = false) {
    values_.push_back({bytes, -1, -1, -1, external, std::move(label)});
    return int(values_.size()) - 1;
  }
  // Appends a step that reads `reads` and writes `writes`; `inplace` (a read value, or -1) is
  // offered to the first written value when this step is its last reader.
  void step(const std::vector<int>& reads, const std::vector<int>& writes, int inplace = -1) {
    for (int r : reads) values_[r].last = steps_;
    for (int w : writes) values_[w].first = values_[w].last = steps_;
    if (inplace >= 0 && !writes.empty()) values_[writes[0]].inplace_candidate = inplace;
    ++steps_;
  }
  int64_t steps() const { return steps_; }
  int64_t bytes_of(int v) const { return values_[v].bytes; }

  std::vector<BufferRequest> requests() const {
    std::vector<int> index(values_.size(), -1);
    std::vector<BufferRequest> out;
    for (size_t v = 0; v < values_.size(); ++v) {
      const Value& x = values_[v];
      if (x.external || x.first < 0) continue;
      index[v] = int(out.size());
      out.push_back({x.bytes, x.first, std::max(x.first, x.last), -1, x.label});
    }
    // An offer holds only where the writing step really is the candidate's last reader.
    for (size_t v = 0; v < values_.size(); ++v) {
      const int c = values_[v].inplace_candidate;
      if (index[v] < 0 || c < 0 || index[c] < 0) continue;
      if (values_[c].last == values_[v].first && values_[c].bytes == values_[v].bytes) {
        out[index[v]].inplace_of = index[c];
      }
    }
    return out;
  }

 private:
  struct Value {
    int64_t bytes, first, last;
    int inplace_candidate;
    bool external;
    std::string label;
  };
  std::vector<Value> values_;
  int64_t steps_ = 0;
};

// Sizes spread over six orders of magnitude, odd counts included, sometimes zero.
inline int64_t random_bytes(std::mt19937_64& rng) {
  if (std::uniform_int_distribution<int>(0, 19)(rng) == 0) return 0;
  const double log2 = std::uniform_real_distribution<double>(0, 20)(rng);
  return std::max<int64_t>(1, int64_t(std::exp2(log2)));
}

// Independent random lifetimes, mostly short, some spanning much of the schedule, plus in-place
// offers: chains, offers of a buffer already offered to another, offers that do not fit.
inline std::vector<BufferRequest> random_intervals(std::mt19937_64& rng) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t steps = uniform(1, 200), n = uniform(0, 300);
  std::vector<BufferRequest> out;
  for (int64_t i = 0; i < n; ++i) {
    BufferRequest r;
    r.bytes = random_bytes(rng);
    const int64_t len = uniform(0, 9) < 7 ? uniform(0, 3) : uniform(0, steps - 1);
    // Sometimes an in-place offer from an earlier buffer that is read after it is written.
    const int64_t a = out.empty() ? -1 : uniform(0, int64_t(out.size()) - 1);
    if (a >= 0 && uniform(0, 3) == 0 && out[a].first_step < out[a].last_step) {
      r.inplace_of = a;
      r.first_step = out[a].last_step;
      const int64_t kind = uniform(0, 9);
      r.bytes = kind < 7 ? out[a].bytes : kind < 9 ? out[a].bytes / 2 : out[a].bytes + 100;
    } else {
      r.first_step = uniform(0, steps - 1);
    }
    r.last_step = r.first_step + len;
    out.push_back(r);
  }
  return out;
}

// A random op schedule: each step reads one to three values, mostly recent ones, and writes one
// (sometimes two); unary steps offer their input in place. Some values are graph inputs and
// outputs (not planned).
inline std::vector<BufferRequest> random_schedule(std::mt19937_64& rng) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  ScheduleBuilder s;
  std::vector<int> live;
  for (int64_t k = uniform(1, 4); k > 0; --k) live.push_back(s.value(random_bytes(rng), "", true));
  const int64_t steps = uniform(1, 300);
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<int> reads;
    for (int64_t k = uniform(1, 3); k > 0; --k) {
      // Recent values are read far more often than old ones: a geometric distance.
      const int64_t back = std::min<int64_t>(std::geometric_distribution<int64_t>(0.3)(rng),
                                             int64_t(live.size()) - 1);
      reads.push_back(live[live.size() - 1 - back]);
    }
    // A unary step usually keeps its input's size (an elementwise op that may run in place).
    const bool unary = reads.size() == 1;
    const int64_t bytes = unary && uniform(0, 3) ? s.bytes_of(reads[0]) : random_bytes(rng);
    std::vector<int> writes{s.value(bytes, "", uniform(0, 29) == 0)};
    if (uniform(0, 9) == 0) writes.push_back(s.value(random_bytes(rng)));
    s.step(reads, writes, unary ? reads[0] : -1);
    for (int w : writes) live.push_back(w);
  }
  return s.requests();
}

// The lifetimes of one training step of an MLP with `widths` (input width first): per layer the
// forward writes h = x W (short-lived), z = h + b (in place), a = relu(z) (in place, saved for the
// backward); the loss; then per layer backward dz = da * (a > 0) (in place), dx = dz W^T, while
// dW and db are outputs. Parameters, the batch and the gradients are external.
inline std::vector<BufferRequest> mlp_training_step(int64_t batch, const std::vector<int64_t>& widths) {
  ScheduleBuilder s;
  const int64_t f = 4;  // bytes per float
  int x = s.value(batch * widths[0] * f, "x", true);
  std::vector<int> inputs{x}, activations;
  const size_t layers = widths.size() - 1;
  for (size_t l = 0; l < layers; ++l) {
    const int64_t bytes = batch * widths[l + 1] * f;
    const int w = s.value(0, "W", true), b = s.value(0, "b", true);
    const std::string n = std::to_string(l);
    const int h = s.value(bytes, "h" + n), z = s.value(bytes, "z" + n), a = s.value(bytes, "a" + n);
    s.step({inputs.back(), w}, {h});
    s.step({h, b}, {z}, h);
    s.step({z}, {a}, z);
    activations.push_back(a);
    inputs.push_back(a);
  }
  const int loss = s.value(4, "loss", true);
  int grad = s.value(batch * widths.back() * f, "dout");
  s.step({inputs.back()}, {loss});
  s.step({inputs.back()}, {grad});
  for (size_t l = layers; l-- > 0;) {
    const int64_t bytes = batch * widths[l + 1] * f;
    const std::string n = std::to_string(l);
    const int dz = s.value(bytes, "dz" + n);
    s.step({grad, activations[l]}, {dz}, grad);
    const int dw = s.value(0, "dW", true), db = s.value(0, "db", true);
    s.step({dz, inputs[l]}, {dw});
    s.step({dz}, {db});
    if (l > 0) {
      const int dx = s.value(batch * widths[l] * f, "dx" + n);
      s.step({dz}, {dx});
      grad = dx;
    }
  }
  return s.requests();
}

}  // namespace smelt::testing
