// The tile form of a loop kernel (loop_kernel.h `tiled`, lower() with tile_col_dims): run tile by
// tile over a partition of its (rows, columns) matrix, on the interpreter and through the
// generated C++ tile entry, it writes the bits its whole-space entry writes; the lowering refuses
// what the form cannot express.
#include <gtest/gtest.h>

#include <random>

#include "codegen/kernel_builder.h"
#include "codegen/lower.h"
#include "fuzz/special_values.h"
#include "ir/graph.h"

namespace smelt::codegen::testing {
namespace {

using ops::OpId;

// out = relu(p + bias) * s: p (B, M, N), bias (N), s (B, 1, 1): the per-batch scale keeps the
// row dims B and M apart.
std::unique_ptr<ir::Graph> epilogue_body(int64_t B, int64_t M, int64_t N) {
  auto g = std::make_unique<ir::Graph>();
  ir::Value* p = g->add_input({{B, M, N}, DType::Float32});
  ir::Value* bias = g->add_input({{N}, DType::Float32});
  ir::Value* s = g->add_input({{B, 1, 1}, DType::Float32});
  ir::Value* sum = g->add_node(OpId::add, {p, bias})->outputs[0];
  ir::Value* r = g->add_node(OpId::relu, {sum})->outputs[0];
  g->add_output(g->add_node(OpId::mul, {r, s})->outputs[0]);
  g->add_output(sum);
  return g;
}

TEST(TiledKernel, TilesOverAPartitionMatchTheWholeSpaceBitExact) {
  const int64_t B = 3, M = 7, N = 50;
  auto body = epilogue_body(B, M, N);
  LowerOptions options;
  options.tile_col_dims = 1;
  LowerResult lowered = lower(*body, "tiled", options);
  ASSERT_TRUE(lowered.kernel) << lowered.reason;
  const LoopKernel& k = *lowered.kernel;
  EXPECT_TRUE(k.tiled);
  EXPECT_EQ(k.inner, (std::vector<int64_t>{N}));
  EXPECT_EQ(k.outer, (std::vector<int64_t>{B, M}));
  EXPECT_NE(print_kernel(k).find(" tiled "), std::string::npos);

  std::mt19937_64 rng(3);
  fuzz::ElementDraw draw{-3, 3, 0.2};
  std::vector<Tensor> args = {fuzz::random_tensor({B, M, N}, DType::Float32, draw, rng),
                              fuzz::random_tensor({N}, DType::Float32, draw, rng),
                              fuzz::random_tensor({B, 1, 1}, DType::Float32, draw, rng),
                              zeros({B, M, N}), zeros({B, M, N})};
  RunResult whole = run_both(k, args);

  auto compiled = shared_cache().compile(k);
  ASSERT_TRUE(compiled && compiled->tile_entry);
  InterpretedKernel interpreted(k);
  for (int backend = 0; backend < 2; ++backend) {
    std::vector<Tensor> bufs;
    std::vector<void*> ptrs;
    for (const Tensor& a : args) {
      bufs.push_back(a.clone());
      ptrs.push_back(bufs.back().raw_data());
    }
    // Uneven tiles, rows crossing the batch boundary, visited out of order.
    const int64_t rows = B * M, row_step = 4, col_step = 13;
    for (int64_t c0 = N - N % col_step; c0 >= 0; c0 -= col_step) {
      for (int64_t r0 = 0; r0 < rows; r0 += row_step) {
        const int64_t r1 = std::min(rows, r0 + row_step), c1 = std::min(N, c0 + col_step);
        if (backend == 0) interpreted.run_tile(ptrs.data(), r0, r1, c0, c1);
        else compiled->tile_entry(ptrs.data(), r0, r1, c0, c1);
      }
    }
    for (int o = 0; o < 2; ++o) {
      EXPECT_TRUE(bit_equal(bufs[size_t(3 + o)], whole.interpreted[size_t(o)]))
          << (backend ? "compiled" : "interpreter") << " tiles, output " << o;
      EXPECT_TRUE(bit_equal(whole.compiled[size_t(o)], whole.interpreted[size_t(o)])) << "whole space, output " << o;
    }
  }
}

TEST(TiledKernel, ConvColumnsMergeWhenEveryAccessWalksThemAsOne) {
  // (N, O, Ho, Wo) with a bias (O, 1, 1): columns Ho Wo merge into one dim of 20.
  auto g = std::make_unique<ir::Graph>();
  ir::Value* p = g->add_input({{2, 3, 4, 5}, DType::Float32});
  ir::Value* bias = g->add_input({{3, 1, 1}, DType::Float32});
  g->add_output(g->add_node(OpId::add, {p, bias})->outputs[0]);
  LowerOptions options;
  options.tile_col_dims = 2;
  LowerResult lowered = lower(*g, "conv", options);
  ASSERT_TRUE(lowered.kernel) << lowered.reason;
  EXPECT_EQ(lowered.kernel->inner, (std::vector<int64_t>{20}));
  EXPECT_EQ(lowered.kernel->outer, (std::vector<int64_t>{2, 3}));
}

TEST(TiledKernel, LoweringRefusesWhatTheTileFormCannotExpress) {
  LowerOptions options;
  options.tile_col_dims = 2;
  {  // an operand broadcast along the last dim only: Ho and Wo are not one dim for it
    auto g = std::make_unique<ir::Graph>();
    ir::Value* p = g->add_input({{2, 3, 4, 5}, DType::Float32});
    ir::Value* t = g->add_input({{4, 1}, DType::Float32});
    g->add_output(g->add_node(OpId::add, {p, t})->outputs[0]);
    LowerResult r = lower(*g, "split", options);
    EXPECT_FALSE(r.kernel);
    EXPECT_NE(r.reason.find("column dims"), std::string::npos) << r.reason;
    EXPECT_TRUE(lower(*g, "plain").kernel);  // the ordinary form takes it
  }
  {  // a reduction
    auto g = std::make_unique<ir::Graph>();
    ir::Value* p = g->add_input({{4, 6}, DType::Float32});
    g->add_output(g->add_node(OpId::sum, {p}, {{"dims", std::vector<int64_t>{1}}})->outputs[0]);
    options.tile_col_dims = 1;
    LowerResult r = lower(*g, "reduce", options);
    EXPECT_FALSE(r.kernel);
    EXPECT_NE(r.reason.find("no reductions"), std::string::npos) << r.reason;
  }
}

TEST(TiledKernel, ValidateRejectsATiledKernelWithTwoInnerDims) {
  KernelBuilder kb({2}, {3, 4});
  const int in = kb.arg(DType::Float32, 24, false), out = kb.arg(DType::Float32, 24, true);
  kb.store(kb.load(kb.access(in, 0, {12}, {4, 1})), kb.access(out, 0, {12}, {4, 1}));
  kb.k.tiled = true;
  EXPECT_THROW(validate(kb.k), Error);
  kb.k.tiled = false;
  EXPECT_NO_THROW(validate(kb.k));
}

}  // namespace
}  // namespace smelt::codegen::testing
