// Text pieces of the C++ emitter (emit_cpp.cpp): loop nests with merged dims, constants as exact
// literals, the names and parts of the OpenMP reductions, and the spellings that differ between
// the two languages it writes (Spelling). Private to codegen.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "codegen/loop_kernel.h"
#include "codegen/size_poly.h"

namespace smelt::codegen::emit {

// An integer of the generated code: a polynomial in the symbolic sizes S0, S1, ... with integer
// coefficients (codegen/size_poly.h). A kernel specialized on every extent has only constants
// (printed as decimal literals); a dynamic-shape kernel's fields are polynomials
// (LoopKernel::sizes), and so are their products. Equal polynomials are equal at every size, so a
// merge of dims decided on them holds at every size.
using Num = SizePoly;

// The language of the generated loops: C++ for the kernel caches (kernels/scalar.h's templates
// called as smelt::scalar::name), or C11 for the standalone export (export_c/: the same loops,
// calling the C functions smelt_<name>_<dtype> of its prelude, OpenMP behind macros). Everything
// else of the text is valid in both: casts are C casts.
enum class Dialect : uint8_t { Cpp, C };

struct Spelling {
  Dialect dialect = Dialect::Cpp;
  // The scalar function `name` for values of `dtype`: "smelt::scalar::name" or "smelt_name_float32".
  std::string fn(const char* name, DType dtype) const;
  // A row of the elementwise table applied to `args` of `dtype` (kernels::scalar_call_text in C++).
  std::string call(const kernels::ScalarCall& call, DType dtype, const std::vector<std::string>& args,
                   const std::vector<std::string>& params) const;
  std::string cast(DType to, DType from, const std::string& x) const;  // scalar::cast<to>(x)
  std::string ref(const std::string& x) const;  // an argument the C++ function takes by reference
  std::string unused() const;                   // before a declaration that may go unused
  std::string entry(const std::string& symbol) const;  // "extern "C" void symbol" or "static void symbol"
  // An OpenMP directive on a line of its own: "#pragma omp <directive>" in C++; in C the macro
  // SMELT_OMP_FOR (parallel for: threads only where the export's user asks) or SMELT_OMP (simd,
  // declare reduction), which the export's prelude defines.
  std::string omp(const std::string& directive) const;
};

// A loop nest: extents and, per access, one stride per dim.
struct Dims {
  std::vector<Num> extent;
  std::vector<std::vector<Num>> stride;  // [access][dim]
};

// Drops size-1 dims and merges neighbours that every access walks as one (stride[d] ==
// stride[d + 1] * extent[d + 1]), so that the innermost loop is as long as the layout allows.
Dims merge_dims(const Dims& in);
Num product(const std::vector<Num>& v);
std::string cat(const std::string& a, int64_t b);  // a + decimal b
// `base + index * stride` as short as the constants allow.
std::string add_scaled(const std::string& base, const std::string& index, const Num& stride);
// A Constant expression as a literal of its dtype (floating values exact, from their bits).
std::string constant_text(const Spelling& sp, const Expr& e);
// A dynamic-shape kernel's Constant that follows the sizes (SizeTerms::constants): the C++
// expression that computes it from S0, S1, ... as the trace does (codegen/size_float.h), in e's dtype.
// A Call's parameter that follows the batch size: `dtype` is Float64 (parameters are doubles).
std::string size_constant_text(DType dtype, const SizeFloat& value);
// A reduction's identity (its accumulator's start) as a C++ expression.
std::string reduce_start(const Spelling& sp, ReduceOp op, DType dtype);
std::string udr_name(const Reduction& r);  // its OpenMP user-defined reduction
// The block maximum of a SumExp over values of `dtype` (scalar::sumexp_block_max).
std::string block_max_udr(DType dtype);

// Across rows (emit_cpp_fold.cpp): a row-indexed gather's load in the row expressions (the row's
// offsets x<a>): the element the row's index selects, 0 for an index out of range; the folds'
// per-row scratch `fr` (before the row loop), each row's values (after its row expressions, row
// index o) and the totals (after the row loop: summed in row order on one thread, stored).
std::string gather_load_text(const LoopKernel& k, int access, DType dtype);
void emit_fold_scratch(std::ostream& out, const Spelling& sp, const LoopKernel& k, const Num& rows);
void emit_fold_rows(std::ostream& out, const LoopKernel& k);
void emit_finish_folds(std::ostream& out, const Spelling& sp, const LoopKernel& k, const Num& rows,
                       const std::vector<Num>& offsets);

}  // namespace smelt::codegen::emit
