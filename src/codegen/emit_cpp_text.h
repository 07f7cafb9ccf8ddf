// Text pieces of the C++ emitter (emit_cpp.cpp): loop nests with merged dims, constants as exact
// literals, and the names and parts of the OpenMP reductions. Private to codegen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/loop_kernel.h"

namespace smelt::codegen::emit {

// A loop nest: extents and, per access, one stride per dim.
struct Dims {
  std::vector<int64_t> extent;
  std::vector<std::vector<int64_t>> stride;  // [access][dim]
};

// Drops size-1 dims and merges neighbours that every access walks as one (stride[d] ==
// stride[d + 1] * extent[d + 1]), so that the innermost loop is as long as the layout allows.
Dims merge_dims(const Dims& in);
int64_t product(const std::vector<int64_t>& v);
std::string cat(const std::string& a, int64_t b);  // a + decimal b
// `base + index * stride` as short as the constants allow.
std::string add_scaled(const std::string& base, const std::string& index, int64_t stride);
// A Constant expression as a C++ literal of its dtype (floating values exact, from their bits).
std::string constant_text(const Expr& e);
const char* reduce_name(ReduceOp op);
// A reduction's identity (its accumulator's start) as a C++ expression.
std::string reduce_start(ReduceOp op, DType dtype);
std::string reduce_fn(ReduceOp op);  // the scalar:: function that folds it
std::string udr_name(const Reduction& r);  // its OpenMP user-defined reduction
// The block maximum of a SumExp over values of `dtype` (scalar::sumexp_block_max).
std::string block_max_udr(DType dtype);

}  // namespace smelt::codegen::emit
