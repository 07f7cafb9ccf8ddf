#include "trace/random_draws.h"

#include "smelt/creation.h"
#include "smelt/error.h"

namespace smelt::trace {

namespace {

// The advanced state a run returned, checked to continue the stream it was given.
uint64_t blocks_drawn(const GeneratorState& from, const std::vector<Tensor>& outs) {
  SMELT_INTERNAL_CHECK(!outs.empty()) << "RandomDraws: the graph returned no generator state";
  const GeneratorState end = generator_state_from_tensor(outs.back());
  SMELT_INTERNAL_CHECK(end.seed == from.seed && end.counter >= from.counter)
      << "RandomDraws: the graph returned the state {" << end.seed << ", " << end.counter
      << "} for the input state {" << from.seed << ", " << from.counter << "}";
  return end.counter - from.counter;
}

}  // namespace

std::vector<Tensor> RandomDraws::run(const std::function<std::vector<Tensor>(const Tensor& state)>& run) {
  Generator& generator = default_generator();
  const int64_t known = blocks_.load();
  if (known >= 0) {
    const GeneratorState at = generator.reserve(uint64_t(known));
    std::vector<Tensor> outs = run(generator_state_tensor(at));
    const uint64_t drawn = blocks_drawn(at, outs);
    SMELT_INTERNAL_CHECK(drawn == uint64_t(known))
        << "RandomDraws: the graph drew " << drawn << " blocks, " << known << " on its first call";
    return outs;
  }
  const GeneratorState guess = generator.state();
  std::vector<Tensor> outs = run(generator_state_tensor(guess));
  const uint64_t n = blocks_drawn(guess, outs);
  blocks_.store(int64_t(n));
  const GeneratorState at = generator.reserve(n);
  if (at == guess) return outs;
  return run(generator_state_tensor(at));  // another draw took those blocks meanwhile
}

}  // namespace smelt::trace
