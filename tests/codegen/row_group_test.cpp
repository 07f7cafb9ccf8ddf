// Row groups (fusion/fuse.h: a reduction group with a broadcast epilogue) made from smelt's own
// gradient rules: the joint forward+backward graph of softmax, log_softmax and layer_norm traced
// as a training step traces it, then fused. Each rule's row reduction and the epilogue that
// broadcasts it back over the row must be one group (no other kernel reads the row statistics),
// and every group must lower to one kernel that computes, on both backends, what its body
// computes with the eager kernels — special values (NaN, ±inf, ±0) included, rows of one element
// and empty rows too.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "codegen/kernel_builder.h"
#include "codegen/lower.h"
#include "fusion/fuse.h"
#include "fuzz/compare.h"
#include "fuzz/special_values.h"
#include "ir/printer.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt::codegen::testing {
namespace {

using ops::OpId;

bool is_reduce(OpId op) { return op == OpId::sum || op == OpId::mean || op == OpId::amax || op == OpId::amin; }

// The groups of `g` that hold a broadcast epilogue: an elementwise node of the rows' shape that
// reads a reduce node's result (directly or through other nodes of the body).
int count_row_groups(const ir::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) {
    if (!node->body || node->attrs.get_string("fusion") != "reduction") continue;
    std::vector<const ir::Value*> after_reduce;
    Shape rows;
    bool found = false;
    for (const auto& b : node->body->nodes()) {
      bool dep = is_reduce(b->op);
      if (dep) rows = b->inputs[0]->meta.shape;
      for (const ir::Value* in : b->inputs) {
        dep |= std::find(after_reduce.begin(), after_reduce.end(), in) != after_reduce.end();
      }
      if (!dep) continue;
      after_reduce.push_back(b->outputs[0]);
      found |= !is_reduce(b->op) && b->outputs[0]->meta.shape == rows;
    }
    n += found;
  }
  return n;
}

// A value of a reduction group with keepdim ([.., 1]) read by a pointwise group: the two-kernel
// form a row group replaces. Returns its description, or empty.
std::string statistic_read_by_another_kernel(const ir::Graph& g) {
  for (const auto& node : g.nodes()) {
    if (!node->body || node->attrs.get_string("fusion") != "reduction") continue;
    for (const ir::Value* v : node->outputs) {
      if (v->meta.shape.empty() || v->meta.shape.back() != 1) continue;
      for (const ir::Use& u : v->uses) {
        if (u.node->body && u.node->attrs.get_string("fusion") == "pointwise") {
          return ir::value_ref(v) + " of a reduction group is read by a pointwise group";
        }
      }
    }
  }
  return "";
}

// Inputs for `body`: elements in [-2, 2]; with `special`, about one in twelve NaN, ±inf or ±0.
// No huge finite values: a row sum of 1e300 - 1e300 + x depends on the fold order, which is the
// backend's choice (loop_kernel.h), while a row holding NaN or ±inf gives NaN or ±inf in any order.
std::vector<Tensor> row_inputs(const ir::Graph& body, uint64_t seed, bool special) {
  std::mt19937_64 rng(seed);
  const double kSpecial[] = {std::nan(""), INFINITY, -INFINITY, -0.0, 0.0};
  std::vector<Tensor> inputs;
  for (const ir::Value* v : body.inputs()) {
    Tensor t = fuzz::random_tensor(v->meta.shape, v->meta.dtype, fuzz::ElementDraw{-2, 2, 0.0}, rng);
    if (special && dtype_is_floating(v->meta.dtype)) {
      std::vector<double> e = t.to_vector();
      for (double& x : e) {
        if (rng() % 12 == 0) x = kSpecial[rng() % 5];
      }
      t = from_vector(e, v->meta.shape, DType::Float64).to(v->meta.dtype);
    }
    inputs.push_back(t);
  }
  return inputs;
}

// Lowers every group of `g` and runs it on both backends over random inputs (with and without
// special values), against the body run node by node with the eager kernels.
void expect_groups_match_eager(const ir::Graph& g, uint64_t seed) {
  for (const auto& node : g.nodes()) {
    if (!node->body) continue;
    if (node->attrs.get_string("fusion") == "contraction") continue;  // not this test's subject
    const ir::Graph& body = *node->body;
    LowerResult lowered = lower(body, "row_group");
    if (!lowered.kernel && !body.inputs().empty() && shape_numel(body.inputs()[0]->meta.shape) == 0) {
      // softmax over empty rows does not decompose (the amax of no elements): run node by node
      EXPECT_NE(lowered.reason.find("do not decompose"), std::string::npos) << lowered.reason;
      continue;
    }
    ASSERT_TRUE(lowered.kernel) << lowered.reason << "\n" << ir::print(body);
    for (bool special : {false, true}) {
      std::vector<Tensor> inputs = row_inputs(body, seed, special);
      std::vector<Tensor> want = trace::interpret(body, inputs);
      std::vector<Tensor> args;
      for (const Tensor& t : inputs) args.push_back(t.contiguous());
      for (const Tensor& c : lowered.constants) args.push_back(c);
      for (const Tensor& w : want) args.push_back(zeros(w.shape()).to(w.dtype()));
      RunResult r = run_both(*lowered.kernel, args);
      // every output of these groups folds a row first: the fold order may differ (tolerance)
      const std::vector<bool> tolerant(want.size(), true);
      EXPECT_EQ(fuzz::compare(r.interpreted, want, "interpreter", tolerant), "") << ir::print(body);
      EXPECT_EQ(fuzz::compare(r.compiled, want, "generated C++", tolerant), "") << ir::print(body);
    }
  }
}

struct Case {
  const char* name;
  trace::Fn loss;
  int param_count;  // params: x's scale, then (layer_norm) weight and bias
};

std::vector<Case> cases() {
  // The loss weighs each output element by a fixed tensor, so the upstream gradient varies.
  auto weighted = [](const Tensor& y) {
    Tensor c = arange(0, double(y.numel()), 1, y.dtype()).reshape(y.shape()) * 0.01 - 0.3;
    return sum(y * c);
  };
  return {
      {"softmax", [=](const auto& in, const auto& p) { return std::vector<Tensor>{weighted(softmax(in[0] * p[0], -1))}; }, 1},
      {"log_softmax",
       [=](const auto& in, const auto& p) { return std::vector<Tensor>{weighted(log_softmax(in[0] * p[0], -1))}; }, 1},
      {"layer_norm",
       [=](const auto& in, const auto& p) {
         return std::vector<Tensor>{weighted(layer_norm(in[0] * p[0], {in[0].size(-1)}, p[1], p[2], 1e-5))};
       },
       3},
  };
}

TEST(RowGroup, BackwardRulesFuseIntoOneRowKernelMatchingEager) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    // rows of several elements, of one, empty rows, a 3-D batch; float64 on one shape (each case
    // compiles its kernels)
    const std::vector<Shape> shapes = dtype == DType::Float32 ? std::vector<Shape>{{24, 16}, {20, 1}, {17, 0}, {2, 3, 33}}
                                                              : std::vector<Shape>{{24, 16}};
    for (const Shape& shape : shapes) {
      for (const Case& c : cases()) {
        const std::string what = std::string(c.name) + " " + shape_str(shape) + " " + dtype_name(dtype);
        SCOPED_TRACE(what);
        Tensor x = zeros(shape).to(dtype);
        std::vector<Tensor> params{ones({shape.back()}).to(dtype)};
        for (int i = 1; i < c.param_count; ++i) params.push_back(ones({shape.back()}).to(dtype));
        std::unique_ptr<ir::Graph> g = trace::trace_joint(c.loss, {x}, params);
        fusion::fuse(*g);
        if (shape_numel(shape) > 0) {
          EXPECT_GE(count_row_groups(*g), 1) << what << "\n" << ir::print(*g);
          EXPECT_EQ(statistic_read_by_another_kernel(*g), "") << what << "\n" << ir::print(*g);
        }
        expect_groups_match_eager(*g, 7 + shape.back());
      }
    }
  }
}

}  // namespace
}  // namespace smelt::codegen::testing
