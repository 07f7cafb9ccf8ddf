// Hand-built LoopKernels for the codegen tests: a small builder, a test-wide kernel cache in a
// temporary directory (one per test binary run, so each kernel is compiled once), and running a
// kernel on both backends.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "codegen/kernel_cache.h"
#include "codegen/kernel_interpreter.h"
#include "codegen/loop_kernel.h"
#include "smelt/smelt.h"

namespace smelt::codegen::testing {

class KernelBuilder {
 public:
  KernelBuilder(std::vector<int64_t> outer, std::vector<int64_t> inner, int stages = 1) {
    k.outer = std::move(outer);
    k.inner = std::move(inner);
    k.stages = stages;
    k.name = "test";
  }
  int arg(DType dtype, int64_t numel, bool output) {
    k.args.push_back({dtype, numel, output});
    return int(k.args.size()) - 1;
  }
  int access(int arg, int64_t offset, std::vector<int64_t> outer_strides, std::vector<int64_t> inner_strides) {
    k.accesses.push_back({arg, offset, std::move(outer_strides), std::move(inner_strides)});
    return int(k.accesses.size()) - 1;
  }
  int load(int access, int stage = 0) {
    Expr e;
    e.kind = ExprKind::Load;
    e.access = access;
    e.stage = stage;
    e.dtype = k.args[k.accesses[access].arg].dtype;
    return push(e);
  }
  int constant(DType dtype, double value, int stage = 0) {
    Expr e;
    e.kind = ExprKind::Constant;
    e.dtype = dtype;
    e.stage = stage;
    if (dtype_is_floating(dtype)) e.fvalue = value;
    else e.ivalue = int64_t(value);
    return push(e);
  }
  int call(kernels::ScalarFn fn, std::vector<int> operands, double p0 = 0, double p1 = 0,
           DType cast_to = DType::Float32) {
    Expr e;
    e.kind = ExprKind::Call;
    e.call.fn = fn;
    e.call.params[0] = p0;
    e.call.params[1] = p1;
    e.call.cast_to = cast_to;
    e.operands = std::move(operands);
    e.stage = k.exprs[e.operands.back()].stage;
    const int value = kernels::scalar_fn_info(fn).arity == 3 ? 1 : 0;
    e.dtype = kernels::scalar_call_result(e.call, k.exprs[e.operands[value]].dtype);
    return push(e);
  }
  int reduce(ReduceOp op, int value) {
    k.reductions.push_back({op, value, k.exprs[value].stage, k.exprs[value].dtype});
    return int(k.reductions.size()) - 1;
  }
  int result(int reduction, int stage) {
    Expr e;
    e.kind = ExprKind::ReductionResult;
    e.reduction = reduction;
    e.stage = stage;
    e.dtype = k.reductions[reduction].dtype;
    return push(e);
  }
  void store(int value, int access) { k.stores.push_back({value, access, k.exprs[value].stage}); }
  void store_row(int value, int access) { k.stores.push_back({value, access, k.stages}); }

  LoopKernel k;

 private:
  int push(const Expr& e) {
    k.exprs.push_back(e);
    return int(k.exprs.size()) - 1;
  }
};

// The test binary's kernel cache: one temporary directory, removed when the binary exits.
KernelCache& shared_cache();
// A fresh temporary directory (removed when the binary exits).
std::string temp_dir(const std::string& tag);

// Outputs of one run: clones of the output arguments after the kernel wrote them.
struct RunResult {
  std::vector<Tensor> interpreted, compiled;
};
// Runs `kernel` on `args` (buffers in argument order; outputs are cloned per backend so both
// start from the same contents) with the interpreter and with the compiled kernel.
RunResult run_both(const LoopKernel& kernel, const std::vector<Tensor>& args);

// Whether `a` and `b` hold the same bytes (same dtype and shape), except that any NaN matches any
// NaN: IEEE 754 leaves the sign and payload of a NaN result open when both operands are NaN, and
// compilers commute add/mul operands differently in scalar and vector code.
::testing::AssertionResult bit_equal(const Tensor& a, const Tensor& b);

}  // namespace smelt::codegen::testing
