// Uses the installed headers and library only (tests/consumer/run.cmake installs smelt into a
// scratch prefix): eager autograd, then the graph compiler's public face, smelt::Graph — trace an
// MLP, print it, optimize it with the default pipeline, run it, parse its text back; and
// smelt::compile with generated kernels — each result compared against eager execution.
//
// Every comparison is exact (same dtype, shape and every element equal): a graph runs the same
// kernels on the same inputs as eager, and the passes this program exercises (canonicalize, CSE,
// x * 1 -> x, DCE) change which nodes exist, never the arithmetic of the ones that remain.
#include <cstdio>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/smelt.h"

using smelt::Tensor;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("consumer: %-62s %s\n", what.c_str(), ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

bool identical(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.to_vector() == b.to_vector();
}

bool all_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!identical(a[i], b[i])) return false;
  }
  return true;
}

size_t count(const std::vector<std::string>& names, const std::string& op) {
  size_t n = 0;
  for (const std::string& s : names) n += s == op;
  return n;
}

// Whether `f` throws smelt::Error with `needle` in its message.
template <class F>
bool fails_with(F&& f, const std::string& needle) {
  try {
    f();
  } catch (const smelt::Error& e) {
    return std::string(e.what()).find(needle) != std::string::npos;
  }
  return false;
}

std::vector<Tensor> random_params() {
  return {smelt::randn({3, 5}), smelt::randn({5}), smelt::randn({5, 2}), smelt::randn({2})};
}

// x (B, 3) -> y (B, 2) and sum(y). relu(z) twice (CSE merges them) and `* 1.0` (simplify drops
// it) give the default pipeline work whose result must not change a bit.
std::vector<Tensor> mlp(const std::vector<Tensor>& in, const std::vector<Tensor>& p) {
  Tensor z = smelt::matmul(in[0], p[0]) + p[1];        // (B, 5)
  Tensor h = (smelt::relu(z) + smelt::relu(z)) * 0.5;  // (B, 5)
  Tensor y = smelt::matmul(h * 1.0, p[2]) + p[3];      // (B, 2)
  return {y, smelt::sum(y)};
}

std::vector<Tensor> mlp_eager(const Tensor& x, const std::vector<Tensor>& params) {
  smelt::NoGradGuard no_grad;
  return mlp({x}, params);
}

void eager_autograd() {
  Tensor x = smelt::from_vector(std::vector<float>{1, 2, 3}, {3});
  x.set_requires_grad();
  Tensor y = smelt::sum(x * x);
  y.backward();
  check(y.item() == 14.0 && x.grad().to_vector() == std::vector<double>{2, 4, 6},
        "eager: sum(x*x) = 14, grad = [2, 4, 6]");
}

void graph_compiler() {
  smelt::manual_seed(7);
  Tensor x = smelt::randn({4, 3});
  std::vector<Tensor> params = random_params();
  std::vector<Tensor> all = {x, params[0], params[1], params[2], params[3]};
  std::vector<Tensor> eager = mlp_eager(x, params);

  smelt::Graph g = smelt::Graph::trace(mlp, {x}, params);
  g.verify();
  std::string traced_text = g.print();
  std::printf("%s", traced_text.c_str());
  check(g.num_inputs() == 5 && g.num_outputs() == 2, "trace: 5 inputs (x + 4 params), 2 outputs");
  check(count(g.op_names(), "matmul") == 2 && count(g.op_names(), "relu") == 2,
        "trace: 2 matmul and 2 relu nodes recorded");
  check(traced_text.find("param") != std::string::npos, "print: parameters are marked param");
  check(all_identical(g.run(all), eager), "run traced graph == eager");

  smelt::Graph traced_copy = g.clone();
  smelt::OptimizeReport report = g.optimize();
  std::printf("%s", report.table.c_str());
  std::string optimized_text = g.print();
  std::printf("%s", optimized_text.c_str());
  g.verify();
  check(report.converged && report.nodes_after < report.nodes_before,
        "optimize: default pipeline converged and removed nodes");
  check(count(g.op_names(), "relu") == 1, "optimize: cse merged the two relu");
  check(count(g.op_names(), "mul") == 1, "optimize: simplify dropped * 1.0");
  check(all_identical(g.run(all), eager), "run optimized graph == eager");

  // New values through the same graph: parameters are graph inputs, not baked-in constants.
  Tensor x2 = smelt::randn({4, 3});
  std::vector<Tensor> params2 = random_params();
  check(all_identical(g.run({x2, params2[0], params2[1], params2[2], params2[3]}), mlp_eager(x2, params2)),
        "run optimized graph on new inputs and params == eager");

  smelt::Graph parsed = smelt::Graph::parse(optimized_text);
  parsed.verify();
  check(parsed.print() == optimized_text, "parse(print(optimized)) prints the same text");
  check(all_identical(parsed.run(all), eager), "run parsed graph == eager");
  smelt::Graph reparsed = smelt::Graph::parse(traced_text);
  check(reparsed.print() == traced_text && all_identical(reparsed.run(all), eager),
        "parse(print(traced)) round-trips and runs == eager");
  check(traced_copy.print() == traced_text, "clone: optimizing the original left the copy as traced");

  check(fails_with([&] { g.optimize("dce,no_such_pass"); }, "no_such_pass"),
        "optimize: an unknown pass is a smelt::Error naming it");
  check(fails_with([] { smelt::Graph::parse("graph(%x: f32[2]) {\n  return %y\n}\n"); }, "%y"),
        "parse: bad text is a smelt::Error naming the problem");
  check(fails_with([&] { g.run({x}); }, ""), "run: a missing input is a smelt::Error");
  smelt::Graph moved = std::move(parsed);
  check(fails_with([&] { (void)parsed.print(); }, "moved"), "a moved-from Graph is a smelt::Error");
}

// The joint forward+backward graph, optimized, gives eager's loss and gradients exactly: the trace
// records the very gradient ops eager backward runs (each parameter's gradient sums the same two
// contributions, one per mlp call), and CSE merging the two identical mlp calls only removes
// duplicates.
void joint_graph() {
  auto loss_fn = [](const std::vector<Tensor>& in, const std::vector<Tensor>& p) {
    return std::vector<Tensor>{smelt::mean(mlp(in, p)[0] * mlp(in, p)[0])};
  };
  smelt::manual_seed(11);
  Tensor x = smelt::randn({4, 3});
  std::vector<Tensor> params = random_params();
  smelt::Graph joint = smelt::Graph::trace_joint(loss_fn, {x}, params);
  size_t traced_nodes = joint.num_nodes();
  joint.optimize();
  std::vector<Tensor> got = joint.run({x, params[0], params[1], params[2], params[3], smelt::ones({})});

  std::vector<Tensor> leaves;
  for (const Tensor& p : params) leaves.push_back(p.clone().set_requires_grad());
  Tensor loss = loss_fn({x}, leaves)[0];
  loss.backward();
  bool ok = joint.num_nodes() < traced_nodes && got.size() == 5 && identical(got[0], loss);
  for (size_t i = 0; ok && i < leaves.size(); ++i) ok = identical(got[i + 1], leaves[i].grad());
  check(ok, "joint graph, optimized: loss and 4 gradients == eager");
}

// smelt::compile with generated C++ kernels: the installed library compiles them against the
// scalar math embedded in it (no header of the source tree or of the prefix is read), into
// $SMELT_CACHE_DIR (run.cmake points it into the consumer's build dir). Same bits as eager: the
// fused loop computes the same scalar functions in the same order.
void generated_kernels() {
  smelt::CompileOptions options;
  options.backend = "cpp";
  smelt::CompiledFunction f = smelt::compile(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{smelt::tanh(in[0] * 1.5 + 0.25)}; }, options);
  Tensor x = smelt::randn({64, 33});
  Tensor eager;
  {
    smelt::NoGradGuard no_grad;
    eager = smelt::tanh(x * 1.5 + 0.25);
  }
  check(identical(f({x})[0], eager), "compile, generated C++ kernels == eager");
}

}  // namespace

int main() {
  try {
    eager_autograd();
    graph_compiler();
    joint_graph();
    generated_kernels();
  } catch (const std::exception& e) {
    std::printf("consumer: unexpected exception: %s\n", e.what());
    return 1;
  }
  std::printf("consumer: %d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
