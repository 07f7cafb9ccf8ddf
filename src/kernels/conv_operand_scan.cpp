#include "kernels/conv_operand_scan.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

#include "base/parallel.h"

namespace smelt::kernels {
namespace {
// Elements per thread of a scan at least: a fork costs about as much as reading 64K floats.
constexpr int64_t kScanGrain = int64_t(1) << 16;
}  // namespace

// On the bits: a float's magnitude orders as its bits without the sign, and NaN and the
// infinities lie above every finite value, so one unsigned maximum answers (twice as fast as
// counting float comparisons on a conv's input in L2: 75K floats 4.6 -> 2.2 us).
bool all_moderate(const float* p, int64_t n) {
  constexpr uint32_t kLimit = std::bit_cast<uint32_t>(kWinogradMaxMagnitude);
  uint32_t top = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + i, sizeof bits);
    bits &= 0x7fffffffu;
    top = bits > top ? bits : top;
  }
  return top <= kLimit;
}

// all_moderate over threads: the scan of a conv's input is on every call's path (the post-ops),
// and one thread reading a 112x112 activation cost as much as a small conv.
bool all_moderate_parallel(const float* p, int64_t n) {
  std::atomic<bool> bad{false};
  parallel_for(n, kScanGrain, [&](int64_t begin, int64_t end) {
    if (!all_moderate(p + begin, end - begin)) bad.store(true, std::memory_order_relaxed);
  });
  return !bad.load(std::memory_order_relaxed);
}

bool all_finite(const float* p, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += !(std::fabs(p[i]) <= std::numeric_limits<float>::max());  // NaN: bad
  return bad == 0;
}

// all_moderate and all_finite over a constant weight, remembered per (memory, storage version) like the
// converted weights: the plan's weights are scanned once, not on every call. Any other weight is scanned
// every call (a raw write would not change its version).
WeightScan weight_scan(const Tensor& w, bool weight_constant) {
  auto scan = [&] {
    return WeightScan{all_moderate(w.data<float>(), w.numel()), all_finite(w.data<float>(), w.numel())};
  };
  if (!weight_constant) return scan();
  struct Entry {
    Tensor source;  // keeps the memory from being freed and reused while remembered
    uint64_t version;
    WeightScan found;
  };
  static std::mutex mutex;
  static std::map<std::pair<const void*, int64_t>, Entry> cache;
  const auto key = std::make_pair(static_cast<const void*>(w.raw_data()), w.numel());
  const uint64_t version = w.storage()->version();
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end() && it->second.version == version && it->second.source.storage() == w.storage()) {
      return it->second.found;
    }
  }
  const WeightScan found = scan();
  std::lock_guard<std::mutex> lock(mutex);
  std::erase_if(cache, [](const auto& e) {  // weights no one else holds any more
    return e.second.source.impl()->ref_count() == 1 && e.second.source.storage()->ref_count() == 1;
  });
  if (cache.size() >= 4096) cache.clear();  // a bound, not a policy: models have far fewer convs
  cache[key] = Entry{w, version, found};
  return found;
}

}  // namespace smelt::kernels
