// validate() refuses malformed kernels with a message naming the problem; print_kernel is
// canonical (the cache key's heart): exact constants, no comment or name.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/emit_cpp.h"
#include "codegen/kernel_builder.h"

namespace smelt::codegen::testing {
namespace {

using kernels::ScalarFn;

// out = exp(x) + 1 over (4, 8).
KernelBuilder good_kernel() {
  KernelBuilder kb({4}, {8});
  int x = kb.load(kb.access(kb.arg(DType::Float32, 32, false), 0, {8}, {1}));
  int y = kb.call(ScalarFn::add, {kb.call(ScalarFn::exp, {x}), kb.constant(DType::Float32, 1.0)});
  kb.store(y, kb.access(kb.arg(DType::Float32, 32, true), 0, {8}, {1}));
  return kb;
}

void expect_invalid(const LoopKernel& k, const std::string& message) {
  try {
    validate(k);
    ADD_FAILURE() << "validate accepted a bad kernel; expected: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    EXPECT_FALSE(e.internal()) << e.what();
  }
}

TEST(LoopKernel, ValidateAcceptsAGoodKernel) { EXPECT_NO_THROW(validate(good_kernel().k)); }

TEST(LoopKernel, ValidateRejectsBadKernels) {
  {
    KernelBuilder kb = good_kernel();
    kb.k.accesses[0].inner_strides = {2};  // reaches element 6*... beyond 32
    expect_invalid(kb.k, "touches elements [0, 38] of argument 0, which has 32");
  }
  {
    KernelBuilder kb = good_kernel();
    kb.k.accesses[1].offset = -1;
    expect_invalid(kb.k, "touches elements [-1, 30]");
  }
  {
    KernelBuilder kb = good_kernel();
    kb.k.exprs[1].operands = {5};
    expect_invalid(kb.k, "operand 5 is not an earlier expression");
  }
  {
    KernelBuilder kb = good_kernel();
    kb.k.stores.clear();
    expect_invalid(kb.k, "output argument 1 is never stored");
  }
  {
    KernelBuilder kb = good_kernel();
    kb.k.accesses[1].arg = 0;
    expect_invalid(kb.k, "writes argument 0, an input");
  }
  {
    KernelBuilder kb = good_kernel();
    kb.k.args[1].dtype = DType::Float64;
    expect_invalid(kb.k, "stores float32 into argument 1 of dtype float64");
  }
  {
    KernelBuilder kb = good_kernel();
    kb.k.exprs[2].dtype = DType::Int64;  // the constant: add would mix float32 and int64
    kb.k.exprs[2].ivalue = 1;
    expect_invalid(kb.k, "add operand 1 is int64; valid: float32");
  }
  {
    KernelBuilder kb = good_kernel();
    kb.k.exprs[2].fvalue = 0.1;  // not a float32 value
    expect_invalid(kb.k, "is not exactly a float");
  }
  {
    KernelBuilder kb = good_kernel();
    kb.k.accesses[1].inner_strides = {0};
    expect_invalid(kb.k, "inner dim 0 has stride 0");
  }
  {
    // in place, shifted by one: x[i + 1] = x[i] + 1 would depend on the order of the positions
    KernelBuilder kb({}, {7});
    int buf = kb.arg(DType::Float32, 8, true);
    int x = kb.load(kb.access(buf, 0, {}, {1}));
    kb.store(kb.call(ScalarFn::add, {x, kb.constant(DType::Float32, 1.0)}), kb.access(buf, 1, {}, {1}));
    expect_invalid(kb.k, "reads argument 0, which the kernel writes, through another access than its stores");
  }
  {
    // a reduction read in its own stage
    KernelBuilder kb({4}, {8});
    int x = kb.load(kb.access(kb.arg(DType::Float32, 32, false), 0, {8}, {1}));
    int r = kb.reduce(ReduceOp::Sum, x);
    int own = kb.result(r, 0);
    kb.store(kb.call(ScalarFn::sub, {x, own}), kb.access(kb.arg(DType::Float32, 32, true), 0, {8}, {1}));
    expect_invalid(kb.k, "reads reduction 0 of stage 0; valid: only in a later stage");
  }
  {
    // a row expression loading along the inner dims (a row reads one element per row)
    KernelBuilder kb({4}, {8});
    int a = kb.access(kb.arg(DType::Float32, 32, false), 0, {8}, {1});
    int x = kb.load(a, 1);
    kb.store_row(x, kb.access(kb.arg(DType::Float32, 4, true), 0, {1}, {0}));
    expect_invalid(kb.k, "a load in the row expressions walks the inner dims");
  }
  {
    KernelBuilder kb = good_kernel();
    kb.k.exprs[1].call.fn = ScalarFn::exp;
    kb.k.args[0].dtype = DType::Int64;
    kb.k.exprs[0].dtype = DType::Int64;
    expect_invalid(kb.k, "exp does not accept int64");
  }
}

TEST(LoopKernel, PrintIsCanonicalAndExact) {
  KernelBuilder a = good_kernel(), b = good_kernel();
  b.k.name = "another_name";
  b.k.comment = "fuses exp, add";
  EXPECT_EQ(print_kernel(a.k), print_kernel(b.k));
  EXPECT_EQ(shared_cache().key(a.k), shared_cache().key(b.k));
  b.k.exprs[2].fvalue = std::nextafter(1.0f, 2.0f);  // one float ulp
  EXPECT_NE(print_kernel(a.k), print_kernel(b.k));
  EXPECT_NE(shared_cache().key(a.k), shared_cache().key(b.k));
  EXPECT_NE(print_kernel(a.k).find("const 0x1p+0"), std::string::npos) << print_kernel(a.k);
  b = good_kernel();
  b.k.accesses[0].inner_strides = {0};  // a broadcast is a different kernel
  EXPECT_NE(print_kernel(a.k), print_kernel(b.k));
  b = good_kernel();
  b.k.exprs[2].fvalue = NAN;
  EXPECT_NE(print_kernel(b.k).find("nan:7ff8000000000000"), std::string::npos) << print_kernel(b.k);
}

TEST(LoopKernel, EmittedSourceNamesTheFusedOpsAndIsShapeSpecialized) {
  KernelBuilder kb = good_kernel();
  kb.k.comment = "fused: exp, add (nodes %3, %4)";
  std::string src = emit_cpp(kb.k, "smelt_kernel_test");
  EXPECT_NE(src.find("// fused: exp, add (nodes %3, %4)"), std::string::npos) << src;
  EXPECT_NE(src.find("#include \"kernels/scalar.h\""), std::string::npos);
  EXPECT_NE(src.find("extern \"C\" void smelt_kernel_test(void* const* args)"), std::string::npos);
  EXPECT_NE(src.find("#pragma omp simd"), std::string::npos) << src;
  // the (4, 8) contiguous space merges into one loop of 32 constant iterations
  EXPECT_NE(src.find("i < 32;"), std::string::npos) << src;
  EXPECT_THROW(emit_cpp(kb.k, "bad symbol"), Error);
}

}  // namespace
}  // namespace smelt::codegen::testing
