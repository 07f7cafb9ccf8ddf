// Small helpers that many test files share (one definition each, so that test files can be
// compiled together as one unit: cmake/unity.cmake).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "smelt/compile.h"
#include "smelt/smelt.h"
#include "support/check.h"

namespace smelt::testing {

// Sets (or, with nullptr, unsets) an environment variable for a scope; restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The message of the smelt::Error `f` throws; "" when it throws nothing.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// How many nodes of `g` run `op`.
inline int count_ops(const ir::Graph& g, ops::OpId op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op == op;
  return n;
}

// Options that compile for the fused-kernel interpreter (no C++ compiler run).
inline CompileOptions interpreter_backend() {
  CompileOptions o;
  o.backend = "interpreter";
  return o;
}

// A random float32 tensor with values in [-scale, scale), the same for the same seed.
inline Tensor rand32(const Shape& shape, uint64_t seed, double scale = 1.0) {
  return random_tensor(shape, -scale, scale, seed).to(DType::Float32);
}

// The values of `t` as doubles, in row-major order.
inline std::vector<double> values(const Tensor& t) { return t.to_vector(); }

// Same dtype, shape and values (NaN equals NaN; -0 equals +0).
inline bool identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(x[i] == y[i] || (x[i] != x[i] && y[i] != y[i]))) return false;
  }
  return true;
}

// Same dtype, shape and bytes (of the contiguous values).
inline void expect_same_bytes(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  ASSERT_EQ(std::memcmp(ca.raw_data(), cb.raw_data(), size_t(ca.numel()) * dtype_size(ca.dtype())), 0) << what;
}

}  // namespace smelt::testing
