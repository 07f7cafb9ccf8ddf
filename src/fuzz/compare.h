// The fuzzers' shared ground: random inputs for a graph (special values, strided views) and the
// comparison rule for its results (bit for bit, or within a rounding tolerance for the outputs a
// rounding-changing step may reach). The rule and why it is the right bar: compare.cpp.
// Used by the graph fuzzer (fuzzer.h: passes) and the compile fuzzer (compile_fuzzer.h: plans).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace smelt::fuzz {

// The tolerance of a rounding-changing step: |got - want| <= kAtol + kRtol |want|.
constexpr double kRtol = 1e-4, kAtol = 1e-5;

// Random inputs for `g`'s inputs, drawn from `seed`: some cases without special values, the
// others with a share of them; about a third of the inputs as non-contiguous views.
// `special` overrides the drawn share (everything else stays as `seed` draws it).
std::vector<Tensor> random_inputs(const ir::Graph& g, uint64_t seed, std::optional<double> special = std::nullopt);

// For each output of `g`: may a rounding-changing pass of `pipeline` (fold_batchnorm) reach it?
std::vector<bool> outputs_with_tolerance(const ir::Graph& g, const std::string& pipeline);

// `g` with a contiguous copy inserted before every floating operand of a reduction, contraction
// or opaque op (softmax, norms, pools), also inside group bodies: their accumulation order then
// depends on the logical shape only.
std::unique_ptr<ir::Graph> with_contiguous_operands(const ir::Graph& g);

// Empty when every output matches by the rule, else a description of the first difference
// ("<what>: output 1 element 3 is ..., expected ..."). `tolerant[i]` selects the tolerance for
// output i (empty: all bit-exact); `*rounded` counts the tolerant outputs that matched only within
// the tolerance.
std::string compare(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const char* what,
                    const std::vector<bool>& tolerant = {}, int* rounded = nullptr);

// A rewrite may make a node that fails when run dead (x - x -> 0 over an index_select out of
// range): the first node of `g` whose kernel throws on `inputs` (null when none does), and whether
// an optimized graph still holds it (a node of its op computing a value of the same id: passes
// keep the ids of the values they leave in place; fusion never moves an op that checks values).
// The graph as a function of its inputs: every node called through the public dispatcher (eager
// kernels; shape rules see the shapes of this call, so it runs at any batch size), constants as
// they are; slices as Tensor::slice, which clamps the range to the dim as x[a:b] does. The callers
// choose the grad mode (and a trace around it captures the calls).
std::vector<Tensor> call_graph(const ir::Graph& g, const std::vector<Tensor>& inputs);

// Ops whose kernels fold a row in an order a lowering may change: sum, mean, softmax,
// log_softmax, layer_norm (the tolerant outputs of the compile fuzzers).
bool is_reordering(ops::OpId op);
// For each output of a compiled graph `g` (optimized and fused): may a lowered reduction — a group
// holding a reordering op, whose kernel folds in its own order — reach it? An unfused reduction
// runs the eager kernel and does not count. With outputs_with_tolerance, the outputs both compile
// fuzzers compare within the tolerance; every other output is compared bit for bit.
std::vector<bool> outputs_reached_by_lowered_reductions(const ir::Graph& g);


}  // namespace smelt::fuzz
