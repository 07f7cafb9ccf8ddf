#include "fuzz/second_batch.h"

#include <algorithm>

#include "fuzz/compare.h"
#include "fuzz/judge.h"
#include "ops/dispatch.h"
#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/creation.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt::fuzz {
SecondBatchResult check_second_batch(const ir::Graph& graph, const CompileCheckOptions& options,
                                     uint64_t seed) {
  SecondBatchResult r;
  // The dims that vary: every input dim of one size v (dims of equal sizes are one symbol to the
  // compile, include/smelt/compile.h), or of two: the batch (the leading dim of the first input
  // of rank >= 1) and, in a third of the cases instead and in a third also, its last dim (a
  // sequence length, a feature size).
  const ir::Value* first = nullptr;
  for (const ir::Value* v : graph.inputs()) {
    if (!v->meta.shape.empty()) {
      first = v;
      break;
    }
  }
  if (!first) return r;
  std::vector<int64_t> varied;  // the sizes that vary
  const int64_t b0 = first->meta.shape[0], last = first->meta.shape.back();
  const int mode = int(seed / 4 % 3);
  if (mode != 1) varied.push_back(b0);
  if (mode != 0 && first->meta.shape.size() >= 2 && last != b0) varied.push_back(last);
  if (varied.empty()) varied.push_back(b0);
  if (std::find(varied.begin(), varied.end(), int64_t(0)) != varied.end()) return r;
  // The new sizes of each varied size at the two calls after the first: larger, then 1 (or
  // larger again when it is 1 already).
  auto new_size = [&](size_t j, int k) {
    const int64_t v = varied[j];
    return k == 0 ? v + 2 + int64_t((seed + j) % 5) : v > 1 ? int64_t(1) : v + 9;
  };
  // The function's captured tensors are the graph's constants, copied: the check changes them in
  // place between calls, which the compiled function must see (include/smelt/compile.h), frozen
  // or not.
  const std::unique_ptr<ir::Graph> own = graph.clone();
  for (ir::Value* c : own->constants()) c->constant = c->constant.clone();
  const CompiledFunction::Fn fn = [&own](const std::vector<Tensor>& in) {
    return call_graph(*own, in);
  };
  // The unoptimized graph at the sizes of call k (null when the graph does not trace there: a
  // reshape to a fixed size).
  auto traced_at = [&](int k) -> std::unique_ptr<ir::Graph> {
    std::vector<Tensor> in;
    for (size_t i = 0; i < graph.inputs().size(); ++i) {
      Shape shape = graph.inputs()[i]->meta.shape;
      for (int64_t& d : shape) {
        for (size_t j = 0; j < varied.size(); ++j) {
          if (d == varied[j]) {
            d = new_size(j, k);
            break;
          }
        }
      }
      in.push_back(zeros({}, graph.inputs()[i]->meta.dtype).expand(shape));
    }
    try {
      return trace::trace(
          [&](const std::vector<Tensor>& x, const std::vector<Tensor>&) { return fn(x); }, in);
    } catch (const Error&) {
      return nullptr;
    }
  };
  std::unique_ptr<ir::Graph> at[2] = {traced_at(0), traced_at(1)};
  if (!at[0] || !at[1] || at[0]->inputs().size() != graph.inputs().size())
    return r;  // (random: fn draws)
  r.applicable = true;
  r.sizes_varied = int(varied.size());

  CompileOptions compile_options;
  compile_options.passes = options.passes;
  compile_options.backend = compile_backend_name(options.backend);
  // Half the cases fit the dynamic sizes at probes below the graph's own (2, 3, 5, 7), so that
  // numbers the graph took from its sizes (a slice's end, a reshape) lie above the probes: x[:k]
  // is a no-op at every probe and not at b0 + 2, which the check of each new size must see.
  if (*std::min_element(varied.begin(), varied.end()) > 7 && seed % 2 == 1) {
    compile_options.dynamic_probes = {2, 3, 5, 7};
  }
  // Half the cases fold the captured constants (CompileOptions::freeze), half read them as inputs.
  compile_options.freeze = (seed / 2) % 2 == 1;
  CompiledFunction f = compile(fn, compile_options);
  auto run = [&](const std::vector<Tensor>& in, std::vector<Tensor>* out) -> std::string {
    try {
      *out = f(in);
      return "";
    } catch (const Error& e) {
      if (e.internal()) throw;
      return e.what();
    }
  };
  std::vector<Tensor> ignored;
  run(random_inputs(graph, seed), &ignored);  // the first batch size: specialized
  for (int k = 0; k < 2; ++k) {
    if (k == 1) {  // the captured floating-point constants change in place (the traces share them)
      NoGradGuard no_grad;
      for (ir::Value* c : own->constants()) {
        if (dtype_is_floating(c->constant.dtype())) c->constant.mul_(-0.75);
      }
    }
    // (not without its dead nodes: an unread index_select whose constant index the other batch
    // size puts out of range must raise in the plan too, ir::Node::must_run)
    const ir::Graph& g = *at[k];
    std::string what = "sizes";
    for (size_t j = 0; j < varied.size(); ++j) {
      what += (j ? ", " : " ") + std::to_string(varied[j]) + " -> " + std::to_string(new_size(j, k));
    }
    const std::vector<Tensor> in = random_inputs(g, seed + uint64_t(k));
    std::vector<Tensor> got, want;
    const std::string got_error = run(in, &got);
    std::string want_error, d;
    try {
      want = trace::interpret(g, in);
    } catch (const Error& e) {
      want_error = e.what();
    }
    if (!got_error.empty() || !want_error.empty()) {
      if (got_error.empty() ||
          want_error.empty()) {  // (failing alike passes: an index out of range)
        d = what +
            ": error in some runs only: interpreter: " + (want_error.empty() ? "ok" : want_error) +
            "; compiled: " + (got_error.empty() ? "ok" : got_error);
      }
    } else {
      // The main check's rule (judge.h): exact unless a lowered reduction of the plan that ran
      // (fused at this batch size) or a rounding-changing pass reaches the output.
      std::vector<bool> tolerant = outputs_with_tolerance(g, options.passes);
      const std::vector<bool> lowered =
          outputs_reached_by_lowered_reductions(f.compiled_graph().ir_graph());
      SMELT_INTERNAL_CHECK(lowered.size() >= tolerant.size())
          << "second batch: the compiled graph has " << lowered.size() << " outputs, the function "
          << tolerant.size();
      for (size_t i = 0; i < tolerant.size(); ++i) tolerant[i] = tolerant[i] || lowered[i];
      Judge judge(g, tolerant);
      auto run_plan = [&](const std::vector<Tensor>& x) {
        std::vector<Tensor> out;
        const std::string error = run(x, &out);
        SMELT_CHECK(error.empty()) << "second batch: the plan failed on ordinary inputs: " << error;
        return out;
      };
      try {
        d = judge.verdict(in, got, want, run_plan, random_inputs(g, seed + uint64_t(k), 0.0),
                          nullptr);
      } catch (const Error& e) {
        if (e.internal()) throw;
        d = judge.first_difference() + "; then: " + e.what();
      }
      r.ill_conditioned |= judge.ill_conditioned();
      if (!d.empty()) d = what + ": " + d;
    }
    if (k == 0) {
      r.dynamic = f.report().dynamic_batch;
      if (!r.dynamic && !f.recompile_reasons().empty()) r.fallback = f.recompile_reasons().back();
    }
    if (!d.empty()) {
      r.passed = false;
      r.message = d;
      return r;
    }
  }
  return r;
}

}  // namespace smelt::fuzz
