// Creating tensors: constants, ranges, random numbers (seedable), and from host data.
#pragma once

#include <cstdint>
#include <vector>

#include "smelt/tensor.h"

namespace smelt {

// A counter-based random generator (Philox-4x32-10): the same seed gives the same numbers on
// every machine and thread count.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed) { manual_seed(seed); }
  void manual_seed(uint64_t seed) { seed_ = seed; counter_ = 0; }
  uint64_t seed() const { return seed_; }
  // Reserves `n` blocks of 4 random 32-bit words; returns the first block's counter.
  uint64_t reserve(uint64_t n) { uint64_t c = counter_; counter_ += n; return c; }
  // Four random words for block `counter`.
  void block(uint64_t counter, uint32_t out[4]) const;

 private:
  uint64_t seed_ = 0;
  uint64_t counter_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);  // seeds the default generator

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
