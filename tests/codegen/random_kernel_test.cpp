// Random elementwise kernels: a DAG of random rows of the elementwise table over random dtypes,
// loads with broadcast (stride 0) and reversed (negative stride) dims, special values; every
// expression stored. The interpreter must match the eager kernel of each row (applied expression
// by expression) bit for bit, and the compiled kernel must match the interpreter.
#include <gtest/gtest.h>

#include <random>

#include "codegen/kernel_builder.h"
#include "fuzz/special_values.h"
#include "kernels/elementwise.h"

namespace smelt::codegen::testing {
namespace {

using kernels::ScalarFn;

struct RandomKernel {
  LoopKernel kernel;
  std::vector<Tensor> args;      // buffers, in argument order (outputs zeroed)
  std::vector<Tensor> expected;  // per output: the eager result, (O, I1, I2)
};

// The expression a load reads, as a contiguous (O, I1, I2) tensor, by walking the access.
Tensor gather(const Tensor& buffer, const Access& a, const Shape& shape) {
  Tensor out = zeros(shape, buffer.dtype());
  const size_t size = dtype_size(buffer.dtype());
  const char* src = static_cast<const char*>(buffer.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  int64_t n = 0;
  for (int64_t o = 0; o < shape[0]; ++o) {
    for (int64_t i = 0; i < shape[1]; ++i) {
      for (int64_t j = 0; j < shape[2]; ++j, ++n) {
        int64_t off = a.offset + o * a.outer_strides[0] + i * a.inner_strides[0] + j * a.inner_strides[1];
        std::memcpy(dst + n * size, src + off * size, size);
      }
    }
  }
  return out;
}

// `calls` random calls over a space of up to (o, i1, i2).
RandomKernel random_kernel(uint64_t seed, int calls, int64_t o = 4, int64_t i1 = 6, int64_t i2 = 40) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t n) { return int64_t(rng() % uint64_t(n)); };
  const Shape shape = {1 + pick(o), 1 + pick(i1), 1 + pick(i2)};
  const int64_t numel = shape[0] * shape[1] * shape[2];
  KernelBuilder kb({shape[0]}, {shape[1], shape[2]});
  RandomKernel rk;
  std::vector<Tensor> values;  // per expression, its eager value
  const DType kLoadTypes[] = {DType::Float32, DType::Float32, DType::Float64, DType::Int64, DType::Bool};
  for (DType dtype : kLoadTypes) {
    Tensor buffer = fuzz::random_tensor(shape, dtype, fuzz::ElementDraw{-3, 3, 0.25}, rng);
    int arg = kb.arg(dtype, numel, false);
    rk.args.push_back(buffer);
    // each dim: walked forward, backward (negative stride) or broadcast (stride 0)
    const int64_t natural[3] = {shape[1] * shape[2], shape[2], 1};
    int64_t strides[3], offset = 0;
    for (int d = 0; d < 3; ++d) {
      int mode = int(pick(3));
      strides[d] = mode == 0 ? natural[d] : mode == 1 ? -natural[d] : 0;
      if (mode == 1) offset += (shape[d] - 1) * natural[d];
    }
    int access = kb.access(arg, offset, {strides[0]}, {strides[1], strides[2]});
    values.push_back(gather(buffer, kb.k.accesses[access], shape));
    kb.load(access);
  }
  for (int c = 0; c < calls; ++c) {
    ScalarFn fn = ScalarFn(pick(kernels::kScalarFnCount));
    const kernels::ScalarFnInfo& info = kernels::scalar_fn_info(fn);
    // operands: a value operand of a dtype the row accepts, the others of the same dtype
    std::vector<int> candidates;
    for (int e = 0; e < int(kb.k.exprs.size()); ++e) {
      if (kernels::scalar_fn_accepts(fn, kb.k.exprs[e].dtype)) candidates.push_back(e);
    }
    if (candidates.empty()) continue;
    int value = candidates[pick(int64_t(candidates.size()))];
    DType dtype = kb.k.exprs[value].dtype;
    std::vector<int> same;
    for (int e : candidates) {
      if (kb.k.exprs[e].dtype == dtype) same.push_back(e);
    }
    std::vector<int> operands;
    for (int i = 0; i < info.arity; ++i) {
      if (info.arity == 3 && i == 0) {
        std::vector<int> bools;
        for (int e = 0; e < int(kb.k.exprs.size()); ++e) {
          if (kb.k.exprs[e].dtype == DType::Bool) bools.push_back(e);
        }
        operands.push_back(bools[pick(int64_t(bools.size()))]);
      } else {
        operands.push_back(i == (info.arity == 3 ? 1 : 0) ? value : same[pick(int64_t(same.size()))]);
      }
    }
    double p0 = std::uniform_real_distribution<double>(-2, 2)(rng), p1 = std::uniform_real_distribution<double>(-2, 2)(rng);
    if (fn == ScalarFn::softplus) p0 = p0 == 0 ? 1 : p0;
    if (fn == ScalarFn::leaky_relu || fn == ScalarFn::softplus) {  // parameters as float32 values
      p0 = double(float(p0));
      p1 = double(float(p1));
    }
    const DType kTargets[] = {DType::Float32, DType::Float64, DType::Int64, DType::Bool, DType::UInt8};
    int e = kb.call(fn, operands, p0, p1, kTargets[pick(5)]);
    const Expr& ex = kb.k.exprs[e];
    Tensor out = zeros(shape, ex.dtype);
    std::vector<Tensor> in;
    for (int o : operands) in.push_back(values[o]);
    kernels::elementwise_forward(ex.call, out, in);
    values.push_back(out);
  }
  for (int e = 0; e < int(kb.k.exprs.size()); ++e) {
    if (kb.k.exprs[e].kind != ExprKind::Call) continue;
    int arg = kb.arg(kb.k.exprs[e].dtype, numel, true);
    kb.store(e, kb.access(arg, 0, {shape[1] * shape[2]}, {shape[2], 1}));
    rk.args.push_back(zeros(shape, kb.k.exprs[e].dtype));
    rk.expected.push_back(values[e]);
  }
  kb.k.name = "random_" + std::to_string(seed);
  rk.kernel = kb.k;
  return rk;
}

std::vector<Tensor> interpret(const RandomKernel& rk) {
  std::vector<Tensor> bufs;
  std::vector<void*> ptrs;
  for (size_t i = 0; i < rk.args.size(); ++i) {
    bufs.push_back(rk.kernel.args[i].output ? rk.args[i].clone() : rk.args[i]);
    ptrs.push_back(bufs.back().raw_data());
  }
  run_interpreted(rk.kernel, ptrs.data());
  std::vector<Tensor> outs;
  for (size_t i = 0; i < rk.args.size(); ++i) {
    if (rk.kernel.args[i].output) outs.push_back(bufs[i]);
  }
  return outs;
}

// Many seeds on the interpreter against the eager kernels (no compiler needed).
TEST(RandomKernels, InterpreterMatchesEagerBitExact) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    RandomKernel rk = random_kernel(seed, 30);
    validate(rk.kernel);
    std::vector<Tensor> got = interpret(rk);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(bit_equal(got[i], rk.expected[i])) << "seed " << seed << " output " << i << "\n"
                                                      << print_kernel(rk.kernel);
    }
  }
}

// A few seeds compiled (one compile each): the generated C++ matches the interpreter and eager.
TEST(RandomKernels, CompiledMatchesInterpreterAndEagerBitExact) {
  for (uint64_t seed = 101; seed <= 102; ++seed) {
    RandomKernel rk = random_kernel(seed, 60, 8, 16, 600);  // up to 76800 elements: threads
    RunResult r = run_both(rk.kernel, rk.args);
    for (size_t i = 0; i < r.compiled.size(); ++i) {
      EXPECT_TRUE(bit_equal(r.compiled[i], r.interpreted[i])) << "seed " << seed << " output " << i;
      EXPECT_TRUE(bit_equal(r.compiled[i], rk.expected[i])) << "seed " << seed << " output " << i;
    }
  }
}

}  // namespace
}  // namespace smelt::codegen::testing
