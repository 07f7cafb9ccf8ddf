// Creating tensors: constants, ranges, random numbers (seedable), and from host data.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <type_traits>
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

// Options (smelt/tensor_options.h): a DType, or TensorOptions().dtype(..).requires_grad(); the
// dtype defaults to float32.
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, const Scalar& value, TensorOptions options = {});
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
Tensor full_like(const Tensor& like, const Scalar& value);
Tensor scalar_tensor(const Scalar& value, TensorOptions options = {});  // 0-dim
// [start, end) with `step`; dtype Int64 unless given.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::Int64);
Tensor arange(int64_t end);
Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::Float32);
// Uniform in [low, high).
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::Float32,
               Generator* gen = nullptr);
// Standard normal (mean 0, std 1) unless given.
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
Tensor normal(const Shape& shape, double mean, double std, DType dtype = DType::Float32,
              Generator* gen = nullptr);
// Integers in [low, high), Int64.
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator* gen = nullptr);
// A random permutation of 0..n-1, Int64.
Tensor randperm(int64_t n, Generator* gen = nullptr);

// A tensor from a nested list, as torch.tensor: tensor({{1, 2}, {3, 4}}, Float64). The dtype,
// unless given, is inferred as PyTorch does: float32 if any number is floating-point, else int64
// if any is an integer, else bool. Ragged lists are an error; tensor({}) is shape (0), tensor(2.5)
// 0-dim.
class NestedList {
 public:
  NestedList() = default;  // []
  template <class T>
    requires std::is_arithmetic_v<T>
  NestedList(T value) : leaf_(true), value_(value) {}                           // NOLINT
  NestedList(std::initializer_list<NestedList> items) : items_(items) {}        // NOLINT

  bool is_leaf() const { return leaf_; }
  const Scalar& value() const { return value_; }
  const std::vector<NestedList>& items() const { return items_; }

 private:
  bool leaf_ = false;
  Scalar value_ = false;
  std::vector<NestedList> items_;
};
Tensor tensor(const NestedList& values, TensorOptions options = {});

// Copies host values; the shape's element count must match. The dtype defaults to the values'
// (float -> float32, double -> float64, integers -> int64); another one converts each value
// (an error for a value the dtype cannot hold). from_vector({1.0, 2.0}, {2}) takes the braced
// list as an initializer_list of one element type, so it is never ambiguous.
namespace detail {
Tensor from_host(const void* values, DType type, size_t count, const Shape& shape,
                 const TensorOptions& options);
template <class T>
Tensor from_host_values(const T* values, size_t count, const Shape& shape,
                        const TensorOptions& options) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                std::is_same_v<T, int64_t>) {
    return from_host(values, DTypeOf<T>::value, count, shape, options);
  } else if constexpr (std::is_integral_v<T>) {
    std::vector<int64_t> wide(count);
    for (size_t i = 0; i < count; ++i) wide[i] = Scalar(values[i]).to_int();
    return from_host(wide.data(), DType::Int64, count, shape, options);
  } else {
    std::vector<double> wide(values, values + count);
    return from_host(wide.data(), DType::Float64, count, shape,
                     options.dtype() ? options : options.dtype(DType::Float64));
  }
}
}  // namespace detail

template <class T>
  requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options = {}) {
  return detail::from_host_values(values.data(), values.size(), shape, options);
}
template <class T>
  requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
Tensor from_vector(std::initializer_list<T> values, const Shape& shape, TensorOptions options = {}) {
  return detail::from_host_values(values.begin(), values.size(), shape, options);
}
// Wraps (does not copy) a caller-owned buffer; the caller keeps it alive.
Tensor from_blob(void* data, const Shape& shape, DType dtype);

}  // namespace smelt
