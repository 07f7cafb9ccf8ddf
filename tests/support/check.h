// Test helpers: comparing tensors, finite-difference gradient checks.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "smelt/smelt.h"

namespace smelt::testing {

// Max |a - b| / (atol + rtol |b|) <= 1 elementwise; shapes must match. NaNs must match NaNs.
::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol = 1e-5,
                                     double atol = 1e-6);

// Same dtype, shape and bits, element by element (any NaN equals any NaN: which operand's
// payload an op propagates is not a result). Exact also for int64 extremes.
::testing::AssertionResult same_bits(const Tensor& got, const Tensor& want);

// Random values in [-3, 3) with NaN, +inf, -inf, +0, -0 and a subnormal (1e-41, float32's too)
// in turn at every `every`-th element, as `dtype`.
Tensor special_values(const Shape& shape, uint64_t seed, int every = 7, DType dtype = DType::Float32);

// Checks autograd's gradients of sum(f(inputs) * random weights) against central differences in
// float64. Inputs must be float64 leaves with requires_grad.
::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                     const std::vector<Tensor>& inputs, double eps = 1e-6,
                                     double rtol = 1e-4, double atol = 1e-5);

// A random float64 tensor with values in [low, high), the same for the same seed.
Tensor random_tensor(const Shape& shape, double low = -1.0, double high = 1.0, uint64_t seed = 1);

// random_tensor as a leaf that requires grad.
Tensor random_leaf(const Shape& shape, double low = -1.0, double high = 1.0, uint64_t seed = 1);

}  // namespace smelt::testing
