#include "fuzz/gradient_check.h"

#include "fuzz/compare.h"
#include "ir/printer.h"
#include "passes/partition.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt::fuzz {

GradientResult check_gradients(const ir::Graph& graph, const CompileCheckOptions& options, uint64_t seed) {
  GradientResult r;
  auto fail = [&](std::string message) {
    r.passed = false;
    r.message = "gradients (memory budget " + std::to_string(r.budget) + "): " + std::move(message);
    return r;
  };
  // 0 (save the least) and 1 (recompute nothing) most often, something between now and then.
  constexpr double kBudgets[] = {0.0, 1.0, 0.0, 1.0, 0.25, 0.5, 0.75};
  r.budget = kBudgets[seed % std::size(kBudgets)];
  std::vector<bool> wrt, differentiated;
  for (const ir::Value* v : graph.inputs()) wrt.push_back(dtype_is_floating(v->meta.dtype));
  for (const ir::Value* v : graph.outputs()) differentiated.push_back(dtype_is_floating(v->meta.dtype));
  trace::Vjp vjp;
  try {
    vjp = trace::trace_vjp(graph, wrt, differentiated);
  } catch (const Error& e) {
    return fail(std::string("the joint graph could not be traced: ") + e.what());
  }
  if (vjp.tangent_of.empty() || vjp.grad_of.empty()) return r;
  r.applicable = true;
  const ir::Graph& joint = *vjp.graph;
  const size_t forward_inputs = graph.inputs().size(), forward_outputs = graph.outputs().size();
  passes::Partition part;
  try {
    part = passes::partition(joint, forward_inputs, forward_outputs, r.budget);
  } catch (const Error& e) {
    return fail(std::string("partition: ") + e.what());
  }
  r.saved = int(part.saved.size());
  r.recomputed = int(part.recomputed.size());

  // The joint graph at once against its halves, as a differentiable call runs them.
  const std::vector<Tensor> inputs = random_inputs(joint, seed);
  std::vector<Tensor> reference, forward, gradients;
  std::string reference_error, split_error;
  try {
    reference = trace::interpret(joint, inputs);
  } catch (const Error& e) {
    reference_error = e.what();
  }
  try {
    forward = trace::interpret(*part.forward, {inputs.begin(), inputs.begin() + std::ptrdiff_t(forward_inputs)});
    std::vector<Tensor> backward_inputs;
    for (const passes::SavedValue& s : part.saved) {
      backward_inputs.push_back(s.forward_input ? inputs[s.index] : forward[s.index]);
    }
    backward_inputs.insert(backward_inputs.end(), inputs.begin() + std::ptrdiff_t(forward_inputs), inputs.end());
    gradients = trace::interpret(*part.backward, backward_inputs);
  } catch (const Error& e) {
    split_error = e.what();
  }
  if (!reference_error.empty() || !split_error.empty()) {
    if (reference_error.empty() || split_error.empty()) {
      return fail("error in one run only: joint: " + (reference_error.empty() ? "ok" : reference_error) +
                  "; forward and backward: " + (split_error.empty() ? "ok" : split_error));
    }
    return r;  // both refused the data alike (an index out of range)
  }
  forward.resize(forward_outputs);
  std::vector<Tensor> split = forward;
  split.insert(split.end(), gradients.begin(), gradients.end());
  const std::string diff = compare(split, reference, "forward and backward halves vs the joint graph");
  if (!diff.empty()) return fail(diff + "\n" + part.explain());

  // The same cut inside one graph (a compiled training step): the recomputed clones give the
  // joint graph's results bit for bit.
  std::unique_ptr<ir::Graph> one_plan = joint.clone();
  try {
    passes::recompute_in_backward(*one_plan, forward_inputs, r.budget);
    const std::string one_diff = compare(trace::interpret(*one_plan, inputs), reference,
                                         "the joint graph recomputing in its backward vs as traced");
    if (!one_diff.empty()) return fail(one_diff + "\n" + ir::print(*one_plan));
  } catch (const Error& e) {
    return fail(std::string("recompute_in_backward: ") + e.what());
  }

  // Each half through the compile pipeline, checked as any compiled graph is.
  for (const ir::Graph* half : {part.forward.get(), part.backward.get()}) {
    const CompileCaseResult c = check_compiled(*half, options, seed);
    if (!c.passed) return fail(std::string(half == part.forward.get() ? "forward" : "backward") + " half: " + c.message);
  }
  return r;
}

}  // namespace smelt::fuzz
