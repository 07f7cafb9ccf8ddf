#include "codegen/batch_float.h"

#include <cmath>
#include <cstring>

#include "smelt/error.h"

namespace smelt::codegen {
namespace {

double round_to(double v, DType dtype) {
  SMELT_INTERNAL_CHECK(dtype_is_floating(dtype)) << "batch_float: " << dtype_name(dtype) << " is not floating";
  return dtype == DType::Float32 ? double(float(v)) : v;
}

// The n whose form gives `v` exactly, if any: the nearest integer to v (or to 1 / v), checked by
// evaluating the form again (an n too large for the dtype to hold exactly fails that check or the
// affine fit, or, failing both, the third probe batch).
std::optional<int64_t> recover(BatchFloatForm form, double v, DType dtype) {
  const double x = form == BatchFloatForm::Count ? v : 1.0 / v;
  if (!std::isfinite(x) || std::fabs(x) > 0x1p62) return std::nullopt;
  const int64_t n = std::llround(x);
  if (!batch_float_same_bits(batch_float_value(form, n, dtype), v)) return std::nullopt;
  return n;
}

}  // namespace

double batch_float_value(BatchFloatForm form, int64_t n, DType dtype) {
  return round_to(form == BatchFloatForm::Count ? double(n) : 1.0 / double(n), dtype);
}

std::optional<BatchFloat> batch_float_fit(double v1, int64_t b1, double v2, int64_t b2, DType dtype) {
  SMELT_INTERNAL_CHECK(b1 != b2) << "batch_float_fit: two values at the same batch size " << b1;
  for (BatchFloatForm form : {BatchFloatForm::Count, BatchFloatForm::Reciprocal}) {
    const std::optional<int64_t> n1 = recover(form, v1, dtype), n2 = recover(form, v2, dtype);
    if (!n1 || !n2 || (*n2 - *n1) % (b2 - b1) != 0) continue;
    return BatchFloat{form, *n1, (*n2 - *n1) / (b2 - b1)};
  }
  return std::nullopt;
}

bool batch_float_same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

const char* batch_float_form_name(BatchFloatForm form) {
  return form == BatchFloatForm::Count ? "count" : "reciprocal";
}

}  // namespace smelt::codegen
