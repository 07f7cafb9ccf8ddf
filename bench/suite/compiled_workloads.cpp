// smelt-compiled workloads: the computations of op_workloads.cpp and training_workloads.cpp
// through smelt::compile (include/smelt/compile.h), with backend "cpp": every fused group is
// generated C++ compiled before the first call returns, so the timed calls replay the plan on
// compiled kernels (the server's warm-up calls come first; the first one compiles). Inputs are
// passed as graph inputs, as the PyTorch side passes them; model weights are captured, so they
// are constants of the graph (inference).
//
// Each workload's note says what the compile produced: kernels, eager op steps,
// groups the lowering refused, which backend each kernel runs on, the arena. run.py shows it
// next to the times, so a slow row can be traced to its plan (`smelt_bench --describe <name>`
// prints the whole plan and fusion report).
#include <chrono>
#include <memory>
#include <optional>
#include <sstream>

#include "codegen/kernel_cache.h"
#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "suite/models.h"
#include "suite/workload.h"

namespace smelt::bench {
namespace {

using Inputs = std::vector<Tensor>;


CompileOptions cpp_backend(bool fuse = true, std::vector<std::pair<int, int>> dynamic_dims = {}) {
  CompileOptions o;
  o.backend = "cpp";  // compile every kernel before the first run: no interpreter phase to time
  o.fuse = fuse;
  o.dynamic_dims = std::move(dynamic_dims);
  o.freeze = true;  // inference with fixed weights: the captured weights are constants, as before
  return o;
}

// How many of the plan's kernel steps run on each backend (the plan text ends each kernel step
// with "[compiled]", "[compiling]" or "[interpreter]").
std::string backends_of(const std::string& plan) {
  int compiled = 0, other = 0;
  std::istringstream lines(plan);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("step ", 0) != 0 || line.find(" kernel ") == std::string::npos) continue;
    (line.find("[compiled]") != std::string::npos ? compiled : other)++;
  }
  std::string s = std::to_string(compiled) + " compiled";
  if (other) s += ", " + std::to_string(other) + " NOT compiled (interpreter)";
  return s;
}

std::string summary(const CompileReport& r) {
  std::ostringstream os;
  os << r.kernels << " kernels (" << backends_of(r.plan) << "), " << r.op_steps << " op steps";
  if (r.interpreted_groups) os << ", " << r.interpreted_groups << " interpreted groups";
  os << "; " << r.nodes_traced << " -> " << r.nodes_optimized << " nodes; arena "
     << r.arena_bytes / 1024 << " KiB (naive " << r.naive_bytes / 1024 << " KiB)";
  return os.str();
}

// A function to compile and the inputs to time it on.
struct Case {
  CompiledFunction::Fn fn;
  Inputs inputs;
  bool fuse = true;
  // CompileOptions::dynamic_dims: the plan timed is the dynamic-shape one (kernels taking the
  // sizes at run time), to compare with the same function specialized.
  std::vector<std::pair<int, int>> dynamic_dims = {};
};

// A smelt-compiled workload: `make` builds the case (model, inputs) once.
Workload compiled(std::string name, double bytes, double flops, std::function<Case()> make) {
  auto holder = std::make_shared<std::optional<CompiledFunction>>();
  Workload w{.name = std::move(name), .bytes = bytes, .flops = flops, .impl = "smelt-compiled"};
  w.build = [holder, make] {
    Case c = make();
    CompiledFunction f = compile(c.fn, cpp_backend(c.fuse, c.dynamic_dims));
    *holder = f;
    return Step([f, inputs = c.inputs]() mutable { f(inputs); });
  };
  w.note = [holder]() -> std::string {
    return holder->has_value() ? summary((*holder)->report()) : "";
  };
  w.plan = [holder]() -> std::string {
    if (!holder->has_value()) return "";
    const CompileReport& r = (*holder)->report();
    return r.fusion + "\n" + r.plan;
  };
  return w;
}

Case gelu_chain() {
  return {[](const Inputs& in) { return Inputs{gelu(in[0] * in[1] + in[2])}; },
          {randn({kChainElements}), scalar_tensor(1.5), scalar_tensor(0.25)}};
}

Case softmax_rows() {
  return {[](const Inputs& in) { return Inputs{softmax(in[0], -1)}; }, {randn({kRows, kCols})}};
}

Case log_softmax_rows() {
  return {[](const Inputs& in) { return Inputs{log_softmax(in[0], -1)}; }, {randn({kRows, kCols})}};
}

// cross_entropy's forward (log_softmax, nll_loss with mean) over 2048 rows of 1024 classes. Alone,
// the eager log_softmax row kernel and the eager nll_loss (fusion/cost_model.cpp, gather_pays;
// SMELT_FUSE_GATHERS=2: one generated row kernel with the gather).
Case cross_entropy_rows() {
  return {[](const Inputs& in) { return Inputs{cross_entropy(in[0], in[1])}; },
          {randn({kRows, kCols}), randint(0, kCols, {kRows})}};
}

// The same over temperature-scaled logits: the row group is a generated kernel anyway, and
// nll_loss gathers in it (SMELT_FUSE_GATHERS=0: the row kernel stores logp, eager nll_loss reads it).
Case cross_entropy_scaled_rows() {
  return {[](const Inputs& in) { return Inputs{cross_entropy(in[0] * 0.5, in[1])}; },
          {randn({kRows, kCols}), randint(0, kCols, {kRows})}};
}

Case layer_norm_rows() {
  return {[](const Inputs& in) { return Inputs{layer_norm(in[0], {kCols}, in[1], in[2])}; },
          {randn({kRows, kCols}), randn({kCols}), randn({kCols})}};
}

Case sgemm() {
  return {[](const Inputs& in) { return Inputs{matmul(in[0], in[1])}; },
          {randn({kGemm, kGemm}), randn({kGemm, kGemm})}};
}

Case linear_relu() {
  return {[](const Inputs& in) { return Inputs{relu(linear(in[0], in[1], in[2]))}; },
          {randn({kGemm, kGemm}), randn({kGemm, kGemm}), randn({kGemm})}};
}

Case conv3x3() {
  return {[](const Inputs& in) { return Inputs{relu(conv2d(in[0], in[1], in[2], {1, 1}, {1, 1}))}; },
          {randn({1, 64, 56, 56}), randn({64, 64, 3, 3}), randn({64})}};
}

// y = a + b + b + ... (1000 dependent adds of one-element tensors); fused, the plan replays a few
// hundred kernels of up to FusionOptions::max_depth adds each; unfused, 1000 eager out-variant op
// steps.
std::function<Case()> tiny_chain(bool fuse) {
  return [fuse] {
    auto fn = [](const Inputs& in) {
      Tensor y = in[0];
      for (int i = 0; i < 1000; ++i) y = add(y, in[1]);
      return Inputs{y};
    };
    return Case{fn, {ones({1}), ones({1})}, fuse};
  };
}

// Inference forward passes: the weights are captured (graph constants).
Case mlp_forward() {
  std::shared_ptr<nn::Module> model = mlp();
  return {[model](const Inputs& in) { return Inputs{(*model)(in[0])}; }, {randn({256, 784})}};
}

Case transformer_forward() {
  auto block = std::make_shared<EncoderBlock>(256, 4);
  return {[block](const Inputs& in) { return Inputs{(*block)(in[0])}; }, {randn({8, 128, 256})}};
}

// The same block with its batch and sequence dims dynamic (one set of kernels for every size).
Case transformer_forward_dynamic() {
  Case c = transformer_forward();
  c.dynamic_dims = {{0, 0}, {0, 1}};
  return c;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The first call of a compiled function in this process: what a user waits for. Whether the
// kernels come from the compiler (cold) or the disk cache (warm) is up to $SMELT_CACHE_DIR, which
// run.py sets per process. One eager call comes first (untimed): it makes the per-process choices
// of the eager kernels the plan calls (SMELT_GEMM=auto measures its GEMMs once per size class) and
// fills the buffer cache, costs that are not the compiler's and that an eager run pays as well.
CompileTime time_first_call(const std::function<Case()>& make) {
  Case c = make();
  {
    NoGradGuard guard;
    c.fn(c.inputs);
  }
  return measure_first_call(compile(c.fn, cpp_backend(c.fuse, c.dynamic_dims)), c.inputs);
}

}  // namespace

std::vector<Workload> compiled_workloads() {
  const double rows_bytes = 2.0 * 4 * kRows * kCols;
  const double gemm_flops = 2.0 * kGemm * kGemm * kGemm;
  const double mlp_flops = 2.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10);
  const double tokens = 8 * 128, d = 256;
  const double transformer_flops = 2 * tokens * 12 * d * d + 4 * 8 * 128.0 * 128 * d;
  return {
      compiled("gelu(x*a+b) 16M", 2.0 * 4 * kChainElements, 0, gelu_chain),
      compiled("softmax 2048x1024", rows_bytes, 0, softmax_rows),
      compiled("log_softmax 2048x1024", rows_bytes, 0, log_softmax_rows),
      compiled("cross_entropy 2048x1024", rows_bytes / 2, 0, cross_entropy_rows),
      compiled("cross_entropy(x/T) 2048x1024", rows_bytes / 2, 0, cross_entropy_scaled_rows),
      compiled("layer_norm 2048x1024", rows_bytes, 0, layer_norm_rows),
      compiled("sgemm 1024^3", 0, gemm_flops, sgemm),
      compiled("linear+bias+relu 1024^3", 0, gemm_flops, linear_relu),
      compiled("conv3x3 64->64 56x56 +bias+relu", 0, 2.0 * 64 * 64 * 9 * 56 * 56, conv3x3),
      compiled("chain: 1000 tiny adds", 0, 0, tiny_chain(true)),
      compiled("chain: 1000 tiny adds, unfused plan", 0, 0, tiny_chain(false)),
      compiled("MLP 784-1024-1024-10 forward b256", 0, mlp_flops, mlp_forward),
      compiled("transformer block d256 h4 s128 b8 forward", 0, transformer_flops, transformer_forward),
      compiled("transformer block d256 h4 s128 b8 forward, dynamic (batch, seq)", 0, transformer_flops,
               transformer_forward_dynamic),
  };
}

CompileTime measure_first_call(CompiledFunction f, const std::vector<Tensor>& inputs) {
  CompileTime t;
  const auto t0 = std::chrono::steady_clock::now();
  f(inputs);
  t.first_call_ms = ms_since(t0);
  t.replay_ms = 1e300;
  for (int i = 0; i < 5; ++i) {
    const auto t1 = std::chrono::steady_clock::now();
    f(inputs);
    t.replay_ms = std::min(t.replay_ms, ms_since(t1));
  }
  const CompileReport& r = f.report();
  t.pipeline_ms = r.compile_ms;
  t.kernels = r.kernels;
  const codegen::KernelCacheStats stats = codegen::KernelCache::global().stats();
  t.kernels_compiled = double(stats.misses);
  t.disk_hits = double(stats.disk_hits);
  t.compile_seconds = stats.compile_seconds;
  return t;
}

std::vector<CompileTimeCase> compile_time_cases() {
  std::vector<CompileTimeCase> cases = {
      {"MLP 784-1024-1024-10 forward b256", [] { return time_first_call(mlp_forward); }},
      {"transformer block d256 h4 s128 b8 forward", [] { return time_first_call(transformer_forward); }},
  };
  for (CompileTimeCase& c : training_compile_time_cases()) cases.push_back(std::move(c));
  return cases;
}

}  // namespace smelt::bench
