// The loop-level description of a fused kernel: what a fusion group lowers to (codegen/lower),
// and what both backends run — the tile interpreter and the generated C++ (codegen/emit_cpp).
// It prints as text (print_kernel); that text, canonical for a given kernel, is the heart of the
// kernel caches' key.
//
// The loops it describes:
//
//   for each index o of `outer` (row-major; the parallel loop):
//     for each stage s, in order:
//       for each index i of `inner` (row-major):
//         evaluate stage s's expressions at (o, i), fold them into stage s's reductions,
//         and do stage s's stores at (o, i)
//     evaluate the row expressions (stage == stages: over reduction results, constants and
//     loads of one element per row, whose inner strides are 0) and do the row stores at (o)
//   fold the row folds over all rows, in row order, and store their totals
//
// A plain elementwise kernel is one stage without reductions (inner holds the dims, outer may hold
// leading dims to parallelize over, or be empty). A row reduction (sum over the last dim) is one
// stage with one reduction and a row store. softmax over rows is three stages: max; sum of
// exp(x - max); store exp(x - max) / sum. A reduction's result is readable in every later stage
// and in the row expressions, never in its own stage.
//
// Addressing: every load and store names an Access, the element offset of (o, i) in one argument
// buffer: offset + sum(outer_strides[d] * o[d]) + sum(inner_strides[d] * i[d]), in elements of
// the argument's dtype. A stride of 0 broadcasts; negative strides are allowed; any view the
// eager kernels accept (permute, slice with step, expand) is expressible. Row stores have
// inner_strides all 0. An argument the kernel writes may also be read (in place), but only through
// an access identical to one of its stores: no (o, i) reads an element another one writes.
//
// Tile form (`tiled`): a one-stage kernel without reductions or row work whose `inner` is one dim,
// the columns, and whose outer dims, flattened row-major, are the rows. Besides its whole-space
// entry it offers a TileEntry that runs the rows [r0, r1) and columns [c0, c1) of that matrix
// only: how a contraction's epilogue runs on each output tile the GEMM finishes (kernels/gemm.h),
// on the GEMM's thread, while the tile is in cache. Tiles of one call never overlap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/size_float.h"
#include "kernels/scalar_table.h"
#include "smelt/dtype.h"

namespace smelt::codegen {

enum class ExprKind : uint8_t {
  Load,             // the element of `access` at the current (o, i)
  Constant,         // a literal of `dtype`: `fvalue` for floating, `ivalue` for int64/bool/uint8
  Call,             // `call` (a row of the elementwise table) applied to `operands`
  ReductionResult,  // the final value of reduction `reduction` for the current row
};

struct Expr {
  ExprKind kind = ExprKind::Constant;
  DType dtype = DType::Float32;  // the value's dtype (for Call: scalar_call_result of its operands)
  int stage = 0;                 // which stage evaluates it; `stages` for the row expressions.
                                 // A Constant may be an operand in any stage.
  int access = -1;               // Load
  double fvalue = 0;             // Constant, floating dtypes (exact: printed as a hex float)
  int64_t ivalue = 0;            // Constant, other dtypes
  kernels::ScalarCall call{};    // Call
  std::vector<int> operands;     // Call: expression indices, evaluated earlier
  int reduction = -1;            // ReductionResult
};

struct Access {
  int arg = 0;  // argument index
  int64_t offset = 0;
  std::vector<int64_t> outer_strides;  // one per outer dim
  std::vector<int64_t> inner_strides;  // one per inner dim (all 0 for row stores)
  // A row-indexed gather (nll_loss's pick of logp[n, target[n]]) when `index` >= 0: the element
  // also moves by index_stride times the int64 value v that access `index` (a plain row access
  // of an Int64 argument: inner strides 0) reads at the same row. A v outside [0, index_extent)
  // (an ignored target; the caller's check_indices refused every other) loads 0 of the dtype.
  // Only loads in the row expressions gather, and the addressing of every v in range must be
  // within the argument (validate).
  int index = -1;
  int64_t index_stride = 0;
  int64_t index_extent = 0;
};

// How a reduction folds: Sum with scalar::add from 0, Max with scalar::maximum from -inf (the
// lowest value for int64), Min with scalar::minimum from +inf (the largest); NaN propagates as
// in the eager reductions. The accumulator has the dtype of the value folded in. The order of
// folding within a row is the backend's choice (a reassociation the fuzzer tolerates).
// SumExp is online softmax's denominator: the sum of exp(v - max v) over the row in one pass
// (a running maximum, the sum rescaled when it grows: scalar::sumexp_* in kernels/scalar.h, in
// blocks of the backend's choice). v is float32 or float64; the accumulator and the result are
// float64. A row's maximum needs its own Max reduction (the SumExp keeps its running maximum to
// itself), usually in the same stage: softmax's statistics then take one pass, not two.
enum class ReduceOp : uint8_t { Sum, Max, Min, SumExp };

// The reduction table (loop_kernel.cpp): a ReduceOp's name ("sum", in printed kernels and the
// generated OpenMP reductions) and the kernels/scalar.h function that folds two partial results
// ("add", "maximum", "minimum"). The identities: 0 for sums, scalar::extreme_identity for
// max and min (one owner for eager, the interpreter and generated code).
const char* reduce_op_name(ReduceOp op);
const char* reduce_fold_fn(ReduceOp op);

struct Reduction {
  ReduceOp op = ReduceOp::Sum;
  int value = -1;  // expression folded in, of the reduction's stage
  int stage = 0;
  DType dtype = DType::Float32;
};

struct Store {
  int value = -1;  // expression to store (converted to nothing: its dtype is the argument's)
  int access = -1;
  int stage = 0;   // `stages` for a row store
};

// A cross-row fold (nll_loss's sum or mean over rows): per row, the row expression `value` and,
// for a mean, `count` (both float64: a row's loss and whether it counts); after all rows they are
// summed in row order, in double, on one thread — the same bits at any thread count, and the
// eager kernel's bits — and value_total (or value_total / count_total) is stored, converted to
// the argument's dtype, at access `access` (all strides 0: one element).
struct RowFold {
  int value = -1;
  int count = -1;  // -1: a sum
  int access = -1;
};

// A range check of an Int64 argument's values that the caller runs before the kernel (check_indices):
// every value in [0, extent) or equal to `ignore`, else the smelt::Error the eager op `op` gives.
struct IndexCheck {
  int arg = -1;
  int64_t extent = 0;
  int64_t ignore = 0;
  std::string op;  // "nll_loss"
};

struct Arg {
  DType dtype = DType::Float32;
  int64_t numel = 0;  // elements the kernel may touch, for bounds checks by the backends' tests
  bool output = false;
};

// Dynamic shapes (runtime/shape_fit.h): the kernel's integers are polynomials in the symbolic
// sizes S0, S1, ... (codegen/size_poly.h). The LoopKernel's fields hold their values at the point
// `at`; each vector here holds the matching field as a polynomial (a constant for what the sizes
// do not change). One such kernel serves every size: its generated C++ reads the symbols from one
// more argument after the buffers (args[args.size()] points to `at.size()` const int64_t), and
// the interpreter runs kernel_at(kernel, point).
// A floating Constant may depend on the sizes too, as a number the trace computes from an integer
// polynomial (codegen/size_float.h: a mean's count, 1 / count): its `fvalue` holds the value at
// `at`. So may a Call's parameter (a double: a clamp bound c * B), its value at `at` in
// call.params.
struct SizeConstant {
  int expr = -1;   // a floating Constant expression, or a Call's
  int param = -1;  // -1: the Constant's value; else the Call's parameter of this index
  SizeFloat value;
};

struct SizeTerms {
  SymbolPoint at;
  std::vector<SizePoly> outer, inner;  // per outer / inner dim
  std::vector<SizePoly> numel;         // per argument
  std::vector<SizePoly> offset;        // per access
  std::vector<std::vector<SizePoly>> outer_strides, inner_strides;  // per access, per dim
  std::vector<SizeConstant> constants;  // the Constants and parameters that change, by expression index
};

struct LoopKernel {
  std::string name;        // for profiles and dumps: the fused ops, e.g. "mul_add_gelu"
  std::vector<Arg> args;   // the buffers, in the order the caller passes them: inputs, then outputs
  std::vector<int64_t> outer;
  std::vector<int64_t> inner;
  int stages = 1;
  std::vector<Access> accesses;
  std::vector<Expr> exprs;  // topologically ordered
  std::vector<Reduction> reductions;
  std::vector<Store> stores;
  std::vector<RowFold> folds;          // after all rows (see the top)
  std::vector<IndexCheck> index_checks;  // before the kernel runs
  bool tiled = false;      // offers the tile entry (see the top)
  std::string comment;     // what the kernel fuses (op list, source nodes), kept in dumps
  std::optional<SizeTerms> sizes;  // set: a dynamic-shape kernel (see SizeTerms)
};

// The term of `kernel` (a dynamic-shape kernel's) for expression `expr`'s value (param -1) or its
// parameter `param`; null when that number does not change with the sizes (or no sizes).
const SizeConstant* size_term(const LoopKernel& kernel, int expr, int param = -1);

// Checks the invariants above (indices in range, operands earlier and of the same stage or
// constants, dtypes consistent with the elementwise table, float32 constants exact, no reduction
// read in its own stage, reductions of float32/float64/int64, every access within its argument's
// numel, stores only into outputs and never two (o, i) onto one element along a stride-0 dim,
// written arguments read only in place, every output argument stored, the tile form's shape);
// throws smelt::Error naming the kernel, the part and the reason.
void validate(const LoopKernel& kernel);

// Runs kernel.index_checks over the argument buffers `args` (in `args` order): throws the
// smelt::Error the eager op gives for the first value out of range (naming the op, the flat index
// — the row — and the value). Every caller of a kernel entry whose kernel has checks calls it
// first: the backends assume the values are in range.
void check_indices(const LoopKernel& kernel, void* const* args);

// Per expression: whether its value is the same at every inner index of a row — a constant, a
// reduction result, a load whose inner strides are all 0 (a row statistic read back: layer_norm
// backward's rstd), or a call on such operands only (softmax's 1 / sum, log_softmax's log(sum)).
// Backends evaluate these once per row and stage instead of once per element.
// `loads` false: loads never count (the tile interpreter, whose tiles of an elementwise kernel
// run across rows).
std::vector<bool> row_invariant_exprs(const LoopKernel& kernel, bool loads = true);

// The canonical text of a kernel: everything that changes the code it computes (not `comment`).
// A dynamic-shape kernel prints each integer as its polynomial (`3+2*S0*S1`): the same text at
// every size, so the kernel caches hold one compiled kernel for all of them.
std::string print_kernel(const LoopKernel& kernel);

// A dynamic-shape kernel at the sizes `p` (its fields re-evaluated, `sizes->at` = p).
LoopKernel kernel_at(const LoopKernel& kernel, const SymbolPoint& p);
// The dynamic-shape kernel through `kernels` (one lowered at each of grid.points()): the same
// kernel but for its integers, each of which must be a polynomial with integer coefficients, and
// its floating constants (codegen/size_float.h). nullopt, with `why` set, when they differ
// otherwise. (The caller checks the fit at grid.check.)
std::optional<LoopKernel> kernel_fit(const std::vector<const LoopKernel*>& kernels, const SymbolGrid& grid,
                                     std::string* why);

// A backend's kernel entry: the argument buffers' base pointers, in `args` order. Calls are
// reentrant; a kernel parallelizes its outer loop itself.
using KernelEntry = void (*)(void* const* args);
// A tiled kernel's tile entry: rows [r0, r1), columns [c0, c1), on the calling thread only.
using TileEntry = void (*)(void* const* args, int64_t r0, int64_t r1, int64_t c0, int64_t c1);

}  // namespace smelt::codegen
