// Creating tensors: constants, ranges, random numbers (seedable), and from host data.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "smelt/tensor.h"

namespace smelt {

// Where a generator's next draw starts. Philox's numbers for a block depend only on (seed,
// counter), so a state names a position in the stream exactly, whatever thread draws from it.
struct GeneratorState {
  uint64_t seed = 0;
  uint64_t counter = 0;  // the next unreserved block of 4 words
  bool operator==(const GeneratorState& o) const { return seed == o.seed && counter == o.counter; }
};

// A counter-based random generator (Philox-4x32-10): the same seed gives the same numbers on
// every machine, thread and thread count. Safe to share between threads: a draw reserves its
// range of blocks atomically (concurrent draws get disjoint ranges) and then computes its numbers
// from (seed, counter) alone, so the numbers a draw gets depend only on the order of reservations,
// never on which thread makes them.
class Generator {
 public:
  static constexpr uint64_t kDefaultSeed = 0x5eed;
  explicit Generator(uint64_t seed = kDefaultSeed) : state_{seed, 0} {}
  Generator(const Generator& other) : state_(other.state()) {}
  Generator& operator=(const Generator& other);

  // Restarts the stream of `seed` at counter 0.
  void manual_seed(uint64_t seed) { set_state({seed, 0}); }
  uint64_t seed() const { return state().seed; }
  GeneratorState state() const;
  void set_state(const GeneratorState& state);
  // Reserves `n` blocks of 4 random 32-bit words: returns the seed and the first block's counter,
  // and advances the counter by n, in one step.
  GeneratorState reserve(uint64_t n);
  // Four random words for block `counter` of the stream `seed` (a pure function).
  static void block(uint64_t seed, uint64_t counter, uint32_t out[4]);
  // The same for the block at `at`, e.g. the first one reserve() returned.
  static void block(const GeneratorState& at, uint32_t out[4]) { block(at.seed, at.counter, out); }

 private:
  mutable std::mutex mutex_;
  GeneratorState state_;
};

// The process-wide generator the random functions use when given none: one for all threads, so
// manual_seed on any thread seeds the draws of every thread.
Generator& default_generator();
void manual_seed(uint64_t seed);  // seeds the default generator

// A generator state as a tensor, Int64 [2] = {seed, counter} (their bit patterns): how random ops
// read the state (their last input) and return the advanced one (their last output), so that a
// traced graph takes the state as an input (see ops.def, kRandom).
Tensor generator_state_tensor(const GeneratorState& state);
// The inverse; an error unless `t` is Int64 [2] with data.
GeneratorState generator_state_from_tensor(const Tensor& t);

Tensor zeros(const Shape& shape, DType dtype = DType::Float32);
Tensor ones(const Shape& shape, DType dtype = DType::Float32);
Tensor full(const Shape& shape, double value, DType dtype = DType::Float32);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor scalar_tensor(double value, DType dtype = DType::Float32);  // 0-dim
// [start, end) with `step`; dtype Int64 unless given.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::Int64);
Tensor arange(int64_t end);
Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::Float32);
// Uniform in [low, high).
Tensor rand(const Shape& shape, DType dtype = DType::Float32, Generator* gen = nullptr);
Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::Float32,
               Generator* gen = nullptr);
// Standard normal (mean 0, std 1) unless given.
Tensor randn(const Shape& shape, DType dtype = DType::Float32, Generator* gen = nullptr);
Tensor normal(const Shape& shape, double mean, double std, DType dtype = DType::Float32,
              Generator* gen = nullptr);
// Integers in [low, high), Int64.
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator* gen = nullptr);
// A random permutation of 0..n-1, Int64.
Tensor randperm(int64_t n, Generator* gen = nullptr);

// Copies host values; the shape's element count must match.
Tensor from_vector(const std::vector<float>& values, const Shape& shape);
Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                   DType dtype = DType::Float64);
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape);
// Wraps (does not copy) a caller-owned buffer; the caller keeps it alive.
Tensor from_blob(void* data, const Shape& shape, DType dtype);

}  // namespace smelt
