// Planning works on blocks: a buffer, or an in-place chain (a buffer and those that took over its
// memory one after another), which needs one region over the union of its members' lifetimes.
// Each strategy is an order in which blocks are placed; a block goes to the free gap that wastes
// least among the blocks already placed whose lifetimes meet its own, or on top of them. The
// smallest arena wins.
#include "runtime/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <tuple>

#include "base/env.h"
#include "smelt/error.h"

namespace smelt::runtime {
namespace {

// Larger sizes are refused so that rounding and sums cannot overflow (2^48 bytes = 256 TiB).
constexpr int64_t kMaxBytes = int64_t(1) << 48;

int64_t round_up(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

struct Block {
  int64_t size = 0;  // rounded
  int64_t first = 0;
  int64_t last = 0;
};

void validate(const std::vector<BufferRequest>& requests) {
  const int64_t n = int64_t(requests.size());
  for (int64_t i = 0; i < n; ++i) {
    const BufferRequest& r = requests[i];
    SMELT_CHECK(r.bytes >= 0 && r.bytes <= kMaxBytes)
        << "memory plan: buffer " << i << " has " << r.bytes << " bytes; valid: 0 to " << kMaxBytes;
    SMELT_CHECK(r.first_step >= 0 && r.first_step <= r.last_step)
        << "memory plan: buffer " << i << " lives over steps [" << r.first_step << ", "
        << r.last_step << "]; valid: 0 <= first_step <= last_step";
    if (r.inplace_of == -1) continue;
    SMELT_CHECK(r.inplace_of >= 0 && r.inplace_of < n && r.inplace_of != i)
        << "memory plan: buffer " << i << " has inplace_of " << r.inplace_of
        << "; valid: -1 or another buffer's index in [0, " << n << ")";
    const BufferRequest& o = requests[r.inplace_of];
    SMELT_CHECK(o.last_step == r.first_step)
        << "memory plan: buffer " << i << " (written at step " << r.first_step
        << ") is offered the memory of buffer " << r.inplace_of << ", whose last reader is step "
        << o.last_step << "; valid: only a buffer whose last reader writes this one";
  }
}

// Sums the rounded sizes, refusing totals that would overflow int64_t.
int64_t naive_total(const std::vector<BufferRequest>& requests) {
  int64_t total = 0;
  for (const BufferRequest& r : requests) {
    SMELT_CHECK(!__builtin_add_overflow(total, round_up(r.bytes), &total))
        << "memory plan: the buffers' total size overflows 64 bits";
  }
  return total;
}

// Groups in-place chains. block_of[i] is buffer i's block. A buffer joins the block of the buffer
// it is offered when that buffer is the block's current tail (nobody took it yet), was read after
// it was written (otherwise the same step would write both), and the buffer fits in the block.
struct Blocks {
  std::vector<Block> blocks;
  std::vector<int64_t> block_of;
  std::vector<InplaceReuse> inplace;
};

Blocks make_blocks(const std::vector<BufferRequest>& requests, bool take_inplace) {
  const size_t n = requests.size();
  std::vector<size_t> by_first(n);
  std::iota(by_first.begin(), by_first.end(), 0);
  std::stable_sort(by_first.begin(), by_first.end(), [&](size_t a, size_t b) {
    return requests[a].first_step < requests[b].first_step;
  });
  Blocks out;
  out.block_of.assign(n, -1);
  std::vector<bool> taken(n, false);
  for (size_t i : by_first) {
    const BufferRequest& r = requests[i];
    const int64_t j = r.inplace_of;
    if (take_inplace && j >= 0 && !taken[j] && requests[j].first_step < requests[j].last_step &&
        r.bytes > 0) {
      Block& b = out.blocks[out.block_of[j]];  // j has a smaller first_step: already grouped
      if (round_up(r.bytes) <= b.size) {
        taken[j] = true;
        out.block_of[i] = out.block_of[j];
        b.last = std::max(b.last, r.last_step);
        out.inplace.push_back({int64_t(i), j});
        continue;
      }
    }
    out.block_of[i] = int64_t(out.blocks.size());
    out.blocks.push_back({round_up(r.bytes), r.first_step, r.last_step});
  }
  std::sort(out.inplace.begin(), out.inplace.end(),
            [](const InplaceReuse& a, const InplaceReuse& b) { return a.buffer < b.buffer; });
  return out;
}

// The most bytes live at one step, and that step: a sweep over start and end events. A buffer
// that takes over another's memory shares it at the handover step, so there the smaller of the
// two is not counted twice. (Blocks would overcount a chain whose members shrink and grow.)
std::pair<int64_t, int64_t> lower_bound(const std::vector<BufferRequest>& requests,
                                        const std::vector<InplaceReuse>& inplace) {
  std::vector<std::pair<int64_t, int64_t>> events;  // (step, change of the live bytes)
  for (const BufferRequest& r : requests) {
    if (r.bytes == 0) continue;
    events.push_back({r.first_step, round_up(r.bytes)});
    events.push_back({r.last_step + 1, -round_up(r.bytes)});
  }
  for (const InplaceReuse& u : inplace) {
    const int64_t shared = std::min(round_up(requests[u.buffer].bytes), round_up(requests[u.reused].bytes));
    const int64_t step = requests[u.buffer].first_step;
    events.push_back({step, -shared});
    events.push_back({step + 1, shared});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, best = 0, best_step = -1;
  for (size_t k = 0; k < events.size(); ++k) {
    live += events[k].second;
    const bool step_done = k + 1 == events.size() || events[k + 1].first != events[k].first;
    if (step_done && live > best) {
      best = live;
      best_step = events[k].first;
    }
  }
  return {best, best_step};
}

// For each non-empty block, the non-empty blocks whose lifetimes meet its own. In first-step
// order, two blocks meet exactly when the later one starts within the earlier one's lifetime, so
// the scan visits only meeting pairs (plus one stop per block).
std::vector<std::vector<int32_t>> meeting_blocks(const std::vector<Block>& blocks) {
  std::vector<size_t> by_first;
  for (size_t k = 0; k < blocks.size(); ++k) {
    if (blocks[k].size > 0) by_first.push_back(k);
  }
  std::sort(by_first.begin(), by_first.end(),
            [&](size_t a, size_t b) { return blocks[a].first < blocks[b].first; });
  std::vector<std::vector<int32_t>> meets(blocks.size());
  for (size_t a = 0; a < by_first.size(); ++a) {
    const size_t i = by_first[a];
    for (size_t b = a + 1; b < by_first.size() && blocks[by_first[b]].first <= blocks[i].last; ++b) {
      meets[i].push_back(int32_t(by_first[b]));
      meets[by_first[b]].push_back(int32_t(i));
    }
  }
  return meets;
}

// Places blocks in `order`; returns each block's offset and sets `arena`.
std::vector<int64_t> place(const std::vector<Block>& blocks,
                           const std::vector<std::vector<int32_t>>& meets,
                           const std::vector<size_t>& order, int64_t& arena) {
  std::vector<int64_t> offset(blocks.size(), 0);
  std::vector<bool> placed(blocks.size(), false);
  std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of placed blocks that meet it
  arena = 0;
  for (size_t b : order) {
    const Block& block = blocks[b];
    if (block.size == 0) continue;
    busy.clear();
    for (int32_t p : meets[b]) {
      if (placed[p]) busy.push_back({offset[p], offset[p] + blocks[p].size});
    }
    std::sort(busy.begin(), busy.end());
    int64_t best = -1, best_waste = std::numeric_limits<int64_t>::max(), cursor = 0;
    for (const auto& [begin, end] : busy) {
      const int64_t gap = begin - cursor;
      if (gap >= block.size && gap - block.size < best_waste) {
        best = cursor;
        best_waste = gap - block.size;
      }
      cursor = std::max(cursor, end);
    }
    offset[b] = best >= 0 ? best : cursor;  // no gap fits: on top of everything live with it
    placed[b] = true;
    arena = std::max(arena, offset[b] + block.size);
  }
  return offset;
}

std::vector<size_t> order_by_size(const std::vector<Block>& blocks) {
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  // Ties: the longer lifetime first (it constrains more), then schedule order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Block &x = blocks[a], &y = blocks[b];
    if (x.size != y.size) return x.size > y.size;
    if (x.last - x.first != y.last - y.first) return x.last - x.first > y.last - y.first;
    return x.first < y.first;
  });
  return order;
}

std::vector<size_t> order_by_first_step(const std::vector<Block>& blocks) {
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Block &x = blocks[a], &y = blocks[b];
    if (x.first != y.first) return x.first < y.first;
    return x.size > y.size;
  });
  return order;
}

// Sizes scaled by a factor in [0.5, 1.5) drawn from the raw bits (the standard distributions may
// differ between standard libraries; plans must not).
std::vector<size_t> order_by_jittered_size(const std::vector<Block>& blocks, std::mt19937_64& rng) {
  std::vector<double> key(blocks.size());
  for (size_t k = 0; k < blocks.size(); ++k) {
    key[k] = double(blocks[k].size) * (0.5 + double(rng() >> 11) * 0x1p-53);
  }
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key[a] > key[b]; });
  return order;
}

constexpr uint64_t kPerturbSeed = 0x736d656c74;  // "smelt"

}  // namespace

const char* memory_strategy_name(MemoryStrategy s) {
  switch (s) {
    case MemoryStrategy::BySize: return "by-size";
    case MemoryStrategy::ByOrder: return "by-order";
    case MemoryStrategy::BySizePerturbed: return "by-size-perturbed";
    case MemoryStrategy::None: return "none";
  }
  return "?";
}

MemoryPlanOptions memory_plan_options_from_env() {
  MemoryPlanOptions options;
  options.enabled = env_int("SMELT_NO_MEMPLAN", 0, 0, 1) == 0;
  return options;
}

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests,
                       const MemoryPlanOptions& options) {
  validate(requests);
  MemoryPlan plan;
  plan.naive_bytes = naive_total(requests);
  for (const BufferRequest& r : requests) plan.num_steps = std::max(plan.num_steps, r.last_step + 1);

  // The lower bound counts the in-place chains a planner could form, even when this one does not.
  Blocks grouped = make_blocks(requests, options.inplace);
  std::tie(plan.lower_bound_bytes, plan.lower_bound_step) = lower_bound(requests, grouped.inplace);

  if (!options.enabled) {
    plan.strategy = MemoryStrategy::None;
    plan.offsets.reserve(requests.size());
    int64_t next = 0;
    for (const BufferRequest& r : requests) {
      plan.offsets.push_back(next);
      next += round_up(r.bytes);
    }
    plan.arena_bytes = next;
    return plan;
  }

  SMELT_CHECK(options.by_size || options.by_order)
      << "memory plan: no strategy enabled; valid: by_size, by_order or both";
  SMELT_CHECK(options.perturbed_tries >= 0)
      << "memory plan: perturbed_tries is " << options.perturbed_tries << "; valid: >= 0";
  const std::vector<Block>& blocks = grouped.blocks;
  SMELT_CHECK(blocks.size() < size_t(INT32_MAX))
      << "memory plan: " << blocks.size() << " buffers; valid: fewer than " << INT32_MAX;
  const std::vector<std::vector<int32_t>> meets = meeting_blocks(blocks);
  std::vector<int64_t> best;  // per block
  int64_t best_arena = std::numeric_limits<int64_t>::max();
  auto consider = [&](MemoryStrategy strategy, const std::vector<size_t>& order) {
    int64_t arena = 0;
    std::vector<int64_t> offsets = place(blocks, meets, order, arena);
    if (arena < best_arena) {  // ties keep the earlier strategy
      best_arena = arena;
      best = std::move(offsets);
      plan.strategy = strategy;
    }
    return arena;
  };
  if (options.by_size) plan.by_size_bytes = consider(MemoryStrategy::BySize, order_by_size(blocks));
  if (options.by_order) {
    plan.by_order_bytes = consider(MemoryStrategy::ByOrder, order_by_first_step(blocks));
  }
  // Greedy orders can fragment the arena where a packing at the lower bound exists (though the
  // bound is not always reachable); jittering the by-size order often finds one. Seeded, so the
  // same requests always give the same plan.
  std::mt19937_64 rng(kPerturbSeed);
  while (plan.perturbed_tries < options.perturbed_tries && best_arena > plan.lower_bound_bytes) {
    const int64_t arena = consider(MemoryStrategy::BySizePerturbed, order_by_jittered_size(blocks, rng));
    plan.perturbed_bytes = plan.perturbed_tries == 0 ? arena : std::min(plan.perturbed_bytes, arena);
    ++plan.perturbed_tries;
  }
  plan.arena_bytes = best_arena;
  const std::vector<int64_t>& block_offset = best;
  plan.offsets.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    plan.offsets.push_back(block_offset[grouped.block_of[i]]);
  }
  plan.inplace = std::move(grouped.inplace);
  return plan;
}

void check_plan(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  validate(requests);
  const size_t n = requests.size();
  SMELT_INTERNAL_CHECK(plan.offsets.size() == n)
      << "memory plan: " << plan.offsets.size() << " offsets for " << n << " buffers";
  SMELT_INTERNAL_CHECK(plan.arena_bytes >= 0 && plan.arena_bytes % kArenaAlignment == 0)
      << "memory plan: arena of " << plan.arena_bytes << " bytes is not a multiple of "
      << kArenaAlignment;
  SMELT_INTERNAL_CHECK(plan.arena_bytes <= naive_total(requests))
      << "memory plan: arena of " << plan.arena_bytes << " bytes exceeds the naive total "
      << naive_total(requests);
  for (size_t i = 0; i < n; ++i) {
    const int64_t off = plan.offsets[i];
    SMELT_INTERNAL_CHECK(off >= 0 && off % kArenaAlignment == 0)
        << "memory plan: buffer " << i << " at offset " << off << " is not " << kArenaAlignment
        << "-byte aligned";
    SMELT_INTERNAL_CHECK(off <= plan.arena_bytes - requests[i].bytes)
        << "memory plan: buffer " << i << " at [" << off << ", " << off + requests[i].bytes
        << ") exceeds the arena of " << plan.arena_bytes << " bytes";
  }
  // The reuses the plan claims must be offers the requests made, at the same offset.
  std::vector<int64_t> took(n, -1);
  for (const InplaceReuse& u : plan.inplace) {
    SMELT_INTERNAL_CHECK(u.buffer >= 0 && u.buffer < int64_t(n) &&
                         requests[u.buffer].inplace_of == u.reused)
        << "memory plan: in-place reuse of buffer " << u.reused << " by buffer " << u.buffer
        << " was not offered";
    SMELT_INTERNAL_CHECK(plan.offsets[u.buffer] == plan.offsets[u.reused])
        << "memory plan: buffer " << u.buffer << " reuses buffer " << u.reused
        << " in place but sits at offset " << plan.offsets[u.buffer] << ", not "
        << plan.offsets[u.reused];
    took[u.buffer] = u.reused;
  }
  // Every pair live at a common step: in first_step order, j meets i while j starts by i's end.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].first_step < requests[b].first_step;
  });
  for (size_t a = 0; a < n; ++a) {
    const size_t i = order[a];
    const BufferRequest& x = requests[i];
    if (x.bytes == 0) continue;
    for (size_t b = a + 1; b < n && requests[order[b]].first_step <= x.last_step; ++b) {
      const size_t j = order[b];
      const BufferRequest& y = requests[j];
      if (y.bytes == 0) continue;
      const int64_t xo = plan.offsets[i], yo = plan.offsets[j];
      if (xo >= yo + y.bytes || yo >= xo + x.bytes) continue;  // disjoint in memory
      // x starts no later than y, so a handover has y taking x at x's last step, which must come
      // after x was written (otherwise one step would write both).
      const bool handover = took[j] == int64_t(i) && y.first_step == x.last_step &&
                            x.first_step < x.last_step && xo == yo;
      SMELT_INTERNAL_CHECK(handover)
          << "memory plan: buffers " << i << " (steps [" << x.first_step << ", " << x.last_step
          << "], bytes [" << xo << ", " << xo + x.bytes << ")) and " << j << " (steps ["
          << y.first_step << ", " << y.last_step << "], bytes [" << yo << ", " << yo + y.bytes
          << ")) are live together and overlap";
    }
  }
}

}  // namespace smelt::runtime
