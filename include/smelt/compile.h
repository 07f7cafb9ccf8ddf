// smelt::compile: capture a function once per input signature, optimize it, fuse it into a few
// generated kernels, plan its memory in one arena, and replay the plan on later calls.
//
//   auto f = smelt::compile([&](const std::vector<smelt::Tensor>& in) {
//     return std::vector<smelt::Tensor>{smelt::gelu(in[0] * a + b)};
//   });
//   smelt::Tensor y = f({x})[0];      // first call: trace, optimize, fuse, plan, compile
//   y = f({x2})[0];                   // same shapes and dtypes: replay
//
// The function is traced with symbolic inputs (as smelt::Graph::trace), so it must compute with
// smelt ops only and not read tensor values: item(), to_vector() or data() on a symbolic tensor,
// or on a tensor it captured, is an error that says so (a branch taken on a value would be frozen
// into the plan). Tensors it creates while traced (numbers, arange, zeros) are constants of the
// graph. Tensors it captures from outside (weights, a NumPy array wrapped with from_numpy) are
// graph inputs read on every call: an in-place change made between calls (an optimizer step,
// a write through NumPy) is seen by the next call, in every use (for inference with fixed
// weights, CompileOptions::freeze folds them as constants instead). Changing a captured tensor in
// place inside the function is an error (it would happen once, when traced). A captured tensor is
// the tensor object the trace met: rebinding the variable that held it to another tensor is not
// seen by the signatures already compiled (change it in place with copy_, or pass it as an
// input). A compiled training step refuses a captured tensor that requires grad (its gradient
// would be lost): reach parameters through the module. Random ops draw from
// the default generator and advance it, as eager code does. An output that is an input or a view
// of one (reshape, permute, slice, expand) aliases it, as in eager code, when that input is
// contiguous (the function is traced with contiguous inputs, as the plan reads them; a strided
// input's outputs are copies with the same values). A compiled function called while another is
// traced is inlined into that trace.
//
// A call with a new input signature (shapes, dtypes) compiles again and records why
// ("input 0 dim 0: 64 -> 128"; printed with SMELT_DEBUG=1); past `recompile_limit` signatures
// a warning says so once.
//
// Gradients: a call made with grad mode on, where an input or a captured tensor requires grad,
// runs the forward half of the function's joint forward+backward graph, which also keeps what the
// backward needs, and records one autograd node whose backward runs the compiled backward half
// (both halves compiled once per signature and set of inputs that require grad; what is kept
// and what the backward recomputes is chosen by a min cut, CompileOptions::memory_budget).
// Compiled and eager code mix freely: gradients reach the function's inputs, captured tensors
// and module parameters as eager backward() would send them. A higher-order gradient
// (create_graph) through a compiled call is an error, as is a backward after a tensor the call
// saved was changed in place.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "smelt/graph.h"
#include "smelt/tensor.h"

namespace smelt {

namespace nn {
class Module;
}
namespace optim {
class Optimizer;
}

struct CompileOptions {
  // Passes run before fusion, as smelt::Graph::optimize takes them; empty: the default pipeline.
  std::string passes;
  bool fuse = true;
  // Which backend runs the fused kernels: "auto" (the interpreter at once, generated C++ when its
  // background compile is done; SMELT_SYNC_COMPILE=1 waits instead), "interpreter", "cpp"
  // (compile before the first run).
  std::string backend = "auto";
  bool memory_plan = true;  // SMELT_NO_MEMPLAN=1 also turns it off
  int recompile_limit = 8;
  // Automatic dynamic shapes (as torch.compile's): when a call differs from a compiled signature
  // only in some dims (the batch, a sequence length, any dim of any input), those dims become
  // symbols S0, S1, ... (dims of equal sizes in both calls share one; at most 3) and that call
  // compiles kernels that take the symbols' sizes at run time; every later size re-instantiates
  // the plan (memory plan, bindings) from them with no compiler run. A call that differs in yet
  // another dim makes that one dynamic too (a third compile at most for a (batch, sequence)
  // model). A function whose graph depends on the sizes otherwise (a reshape to a fixed batch, a
  // size squared into a constant, a strided conv's floor division, random draws) is checked and
  // falls back to specialized kernels, saying why in recompile_reasons(). Sizes 0 are always
  // specialized. false: every signature compiles its own kernels.
  bool dynamic_batch = true;
  // Dims dynamic from the first call, as (input, dim) pairs (as torch's mark_dynamic; a negative
  // dim counts from the end): the first call compiles the dynamic-shape kernels at once. Needs
  // dynamic_batch.
  std::vector<std::pair<int, int>> dynamic_dims;
  int batch_plans = 8;  // dynamic shapes: plans kept per size (least recently used dropped)
  // Dynamic shapes: the sizes traced to fit the graph (each symbol takes the first three, shifted
  // by their span for S1, S2 so that no two symbols are equal, on a grid: 3, 9 or 27 traces) and
  // to check the fit (the fourth); distinct, positive, and best unlikely to equal or divide a
  // model's other dims. Every other size is traced again and checked against the fit before it
  // runs. (The fuzzer varies them.)
  std::array<int64_t, 4> dynamic_probes = {17, 19, 23, 29};
  bool profile = false;  // time every step of every call (profile_table, write_chrome_trace)
  // Captured tensors as constants (as torch.compile's freezing): the passes fold them (a weight's
  // transpose, blocked layout, batch norm folded into a conv) for inference with fixed weights.
  // Each call checks their versions: one changed in place since the compile recompiles, saying
  // so in recompile_reasons(). Memory smelt does not own (from_blob, NumPy), whose changes no
  // version shows, stays an input read on every call; a write that bypasses smelt into memory it
  // owns (through data(), or a NumPy view from Tensor.numpy()) is not seen unless followed by
  // Storage::bump_version(). compile_module and compile_training_step read the module's state
  // on every call whatever this says. false: captured tensors are inputs.
  bool freeze = false;
  // Differentiable calls and training steps: what the backward keeps against what it recomputes (cheap elementwise,
  // view and normalization work only; matmul, conv and random ops are never recomputed).
  // 0: keep the least bytes; 1: recompute nothing; between: recomputing a value is charged
  // budget / (1 - budget) times its bytes. CompileReport::partition says what was chosen.
  double memory_budget = 0;
  // A training step also computes each gradient's squared L2 norm inside its plan (fused with the
  // work that produces the gradient where fusion can): CompiledFunction::gradient_norms, read by
  // smelt::GradientMonitor (smelt/monitor.h). When one is not finite, the call runs the step's
  // graph once more node by node to name the op that first produced a NaN or an infinity.
  bool gradient_norms = false;
};

// What one compile produced (the latest signature's).
struct CompileReport {
  std::string signature;  // e.g. "f32[64,10], f32[10]"
  size_t nodes_traced = 0;
  size_t nodes_optimized = 0;
  int kernels = 0;             // generated kernels (fused groups)
  int op_steps = 0;            // steps running an eager out-variant kernel (matmul, conv, ...)
  int interpreted_groups = 0;  // groups run node by node (the lowering refused them)
  int64_t arena_bytes = 0;
  int64_t naive_bytes = 0;        // every intermediate in its own allocation
  int64_t lower_bound_bytes = 0;  // most bytes live at one step: no arena can be smaller
  double compile_ms = 0;
  bool dynamic_batch = false;  // the plan was instantiated from dynamic-batch kernels
  // The call differentiated some inputs: the counts above are the forward and backward plans'
  // together. For such a call and for a training step, the backward keeps saved_bytes of the
  // forward's values (saved_bytes_no_recompute with memory_budget 1; a training step's outputs
  // and inputs are not counted: they live to the end anyway).
  bool differentiable = false;
  int64_t saved_bytes = 0;
  int64_t saved_bytes_no_recompute = 0;
  std::string partition;  // what is saved and what is recomputed
  // compile_step: parameters and optimizer state the plan updates, and how many of those in place
  // (by the kernel computing the new value; the others are copied there at the end of the run).
  int inputs_updated = 0;
  int inputs_updated_in_place = 0;
  std::string fusion;          // the fusion report (groups, rate, why nodes stayed unfused)
  std::string plan;            // the plan's steps and arena
};

class CompiledFunction {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  int num_compiles() const;
  // One line per recompile: why the signature differed from the closest earlier one.
  std::vector<std::string> recompile_reasons() const;
  // The report of the plan the last call ran; an error before the first call.
  const CompileReport& report() const;
  // With CompileOptions::profile, per step of the last call's plan over all its calls: calls,
  // time, GB/s, GFLOP/s, share; and the same as a Chrome trace (JSON, opens in Perfetto).
  std::string profile_table() const;
  void write_chrome_trace(const std::string& path) const;
  // The last call's arena over its schedule, as an SVG picture.
  std::string arena_svg() const;
  // A training step compiled with CompileOptions::gradient_norms: the last call's L2 norm of
  // each parameter's gradient (by name), and the op that first produced a NaN or an infinity
  // when one was not finite ("" otherwise).
  std::vector<std::pair<std::string, double>> gradient_norms() const;
  std::string non_finite_origin() const;
  // A copy of the graph the last call's plan runs: optimized and fused (groups as nodes holding
  // their subgraphs), at that call's shapes. For tools and tests that reason about the plan.
  Graph compiled_graph() const;

  struct Impl;
  explicit CompiledFunction(std::shared_ptr<Impl> impl);

 private:
  std::shared_ptr<Impl> impl_;
};

CompiledFunction compile(CompiledFunction::Fn fn, CompileOptions options = {});

// A module's forward: `fn(inputs)` calls the module. Its parameters and buffers are graph inputs
// read on every call (an optimizer's updates are seen without recompiling); buffers the forward
// replaces (batch norm's running statistics in training mode) are written back after each call.
// A change of the module's mode (train/eval) compiles again.
CompiledFunction compile_module(nn::Module& module, CompiledFunction::Fn fn,
                                CompileOptions options = {});

// A training step through the joint forward+backward graph: `loss_fn(inputs)` returns one scalar
// loss computed with the module. Each call returns {loss} and adds d loss / d parameter into
// every parameter's .grad, as loss.backward() would (zero the gradients between steps as usual);
// buffers and the generator advance as in eager training.
CompiledFunction compile_training_step(nn::Module& module, CompiledFunction::Fn loss_fn,
                                       CompileOptions options = {});

struct StepOptions {
  // > 0: scale the gradients of the optimizer's parameters by max_norm / (total norm + 1e-6)
  // when their total L2 norm is above it, as optim::clip_grad_norm_ (a non-finite total leaves
  // them as they are).
  double clip_grad_norm = 0;
  // k: every call adds its gradients into the parameters' .grad, as loss.backward() would; every
  // k-th call also updates (gradient accumulation over k micro-batches: scale the loss by 1/k).
  int accumulation_steps = 1;
  // Traced into an updating call's plan between the backward and the clipping: takes the
  // gradients of the parameters the optimizer updates (in the module's parameter order, each with
  // the .grad it brings added) and returns one tensor of the same shape and dtype for each, written
  // with smelt ops or registered ones (smelt/custom_op.h). Data-parallel training all-reduces the
  // gradients here (smelt/distributed.h). Empty: the gradients as they are.
  std::function<std::vector<Tensor>(const std::vector<Tensor>& gradients)> reduce_gradients = nullptr;
};

// A whole training step as one plan: forward, backward, gradient clipping and `optimizer`'s
// update (SGD, Adam, AdamW: Optimizer::update traced into the graph), replayed with the
// parameters and the optimizer's state updated in place, each by the kernel that computes its
// new value (fused with the gradient's last op where fusion can). A call returns {loss} and does
// what this eager code does:
//
//   loss = loss_fn(inputs); loss.backward();
//   if (++calls % accumulation_steps == 0) {
//     clip_grad_norm_(optimizer's parameters, clip_grad_norm);  // when > 0
//     optimizer.step(); optimizer.zero_grad();
//   }
//
// The gradients of an updating call live in the plan's arena only: .grad of the optimizer's
// parameters is empty after it (gradients an earlier call or eager code left there are added in
// first). Each group's learning rate and each parameter's step count are read on every call
// (schedulers work without recompiling); the update's constants (momentum, betas, weight decay)
// are compiled in, and a change compiles again. Parameters of the module the optimizer does not
// hold get their gradients in .grad as compile_training_step gives them; frozen ones (requires_grad
// false) and those the loss does not reach get no gradient work and no update, as in eager code.
// The optimizer and the module must outlive the returned function.
CompiledFunction compile_step(nn::Module& module, CompiledFunction::Fn loss_fn,
                              optim::Optimizer& optimizer, StepOptions step = {},
                              CompileOptions options = {});

}  // namespace smelt
