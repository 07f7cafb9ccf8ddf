// A floating number that the trace computes from an integer n, a polynomial in the symbolic sizes
// (codegen/size_poly.h; B the batch, S a sequence): a mean's count (the lowered mean divides by
// double(n)), the 1 / n of its gradient rule (g / double(n) in the gradient's dtype), the -1 / n
// of a loss's gradient, a c / n or c * n a user or a pass made of them, a mean over B * S tokens
// (n = S B). Dynamic shapes (runtime/shape_fit.h for IR constants and float attributes,
// LoopKernel SizeTerms for kernel constants) record such a number as a term and re-evaluate it
// at each size exactly as the trace would there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/size_poly.h"
#include "smelt/dtype.h"

namespace smelt::codegen {

// How the number follows from n, in its dtype T (float32 or float64): T(c * double(n)) or
// T(c / double(n)), c a double — what scalar_tensor(double, T) makes of the double the ops
// compute (one rounding to T after the double's; for c = 1 that is T(1.0 / n), and 1.0f /
// float(n) gives the same float wherever float(n) is exact, double's 53 bits making the double
// rounding of a quotient harmless).
enum class SizeFloatForm : uint8_t { Count, Reciprocal };

struct SizeFloat {
  SizeFloatForm form = SizeFloatForm::Count;
  SizePoly n;        // n at every size
  double scale = 1;  // c
};

// The number `f` gives for `n` (not f.n), in `dtype` (a floating dtype), as a double.
double size_float_value(const SizeFloat& f, int64_t n, DType dtype);
// The term through v1 (at batch b1) and v2 (at b2), both of `dtype`, with n at b1; nullopt when no
// form gives both bit for bit with an n that is affine in the batch (an integer slope) — and a
// ratio n2 / n1 of small enough terms (a reduced denominator up to 2^20) to be read off v1 and v2.
// Of the terms that fit, the one whose c has the fewest significant bits (c = 1 for 1 / (3 B),
// not 1/3 with n = B), then the c nearest 1, then the smallest n: two probes cannot tell them
// apart, and the simplest c is the one that holds at other batch sizes (a caller checks a third).
// A c with no short binary form (0.1 / B in float64) may be taken for a simpler one that gives
// the same bits at both probes (0.5 / (5 B)) but not at every batch size: the third probe
// refuses most such fits; float32 values hide the difference (double's extra bits).
std::optional<SizeFloat> size_float_fit(double v1, int64_t b1, double v2, int64_t b2, DType dtype);
// The term through `values` (one per grid.points(), of `dtype`): the form and c that
// size_float_fit finds through the first two points (which differ in the last symbol only), n
// read off every point and fitted as a polynomial; nullopt when a value is not c * n or c / n
// with that c, or n is not a polynomial (a caller checks grid.check).
std::optional<SizeFloat> size_float_fit_grid(const SymbolGrid& grid, const std::vector<double>& values,
                                               DType dtype);
// Equal bits (so -0 != +0 and a NaN equals the same NaN): how constants compare across batch sizes.
bool size_float_same_bits(double a, double b);
// For printed kernels and graphs: "count" or "reciprocal".
const char* size_float_form_name(SizeFloatForm form);

}  // namespace smelt::codegen
