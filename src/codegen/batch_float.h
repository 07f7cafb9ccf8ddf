// A floating number that the trace computes from an integer n affine in the batch size B: a mean's
// count (the lowered mean divides by double(n)), the 1 / n of its gradient rule (g / double(n) in
// the gradient's dtype), a reciprocal a pass made of it. A dynamic batch (runtime/batch_graph.h for
// IR constants and float attributes, LoopKernel::BatchTerms for kernel constants) records such a
// number as a term and re-evaluates it at each batch size exactly as the trace would there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "smelt/dtype.h"

namespace smelt::codegen {

// How the number follows from n, in its dtype T (float32 or float64): T(double(n)) or
// T(1.0 / double(n)) — what scalar_tensor(double, T) makes of the double the ops compute (the
// conversion rounds once; 1.0f / float(n) gives the same float, since float(n) is exact wherever
// the form can be fitted and double's 53 bits make the double rounding of a quotient harmless).
enum class BatchFloatForm : uint8_t { Count, Reciprocal };

struct BatchFloat {
  BatchFloatForm form = BatchFloatForm::Count;
  int64_t n = 0;      // n at the batch size the term was fitted at (or re-evaluated at)
  int64_t slope = 0;  // n's coefficient of the batch size
};

// The number of `form` for n, in `dtype` (a floating dtype), as a double.
double batch_float_value(BatchFloatForm form, int64_t n, DType dtype);
// The term through v1 (at batch b1) and v2 (at b2), both of `dtype`, with n at b1; nullopt when no
// form gives both bit for bit with an n that is affine in the batch (an integer slope).
std::optional<BatchFloat> batch_float_fit(double v1, int64_t b1, double v2, int64_t b2, DType dtype);
// Equal bits (so -0 != +0 and a NaN equals the same NaN): how constants compare across batch sizes.
bool batch_float_same_bits(double a, double b);
// For printed kernels and graphs: "count" or "reciprocal".
const char* batch_float_form_name(BatchFloatForm form);

}  // namespace smelt::codegen
