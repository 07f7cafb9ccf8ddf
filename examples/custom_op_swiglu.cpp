// A user-defined op: the swish-gated linear unit of LLaMA-style MLPs, y = silu(a) * b, registered
// with a hand-written kernel, a hand-written backward and an expression (smelt/custom_op.h).
//
// The kernel is what eager calls run; the backward (written with smelt ops) gives gradients,
// higher-order ones too; the expression lets smelt::compile replace the op by silu(a) * b so that
// it fuses into the kernels around it instead of being a step of its own.
//
// Build and run: `cmake --build build --target example_custom_op_swiglu && build/examples/custom_op_swiglu`.
// It checks itself (forward against a scalar loop, gradients against central differences,
// compiled against eager) and exits non-zero when a check fails; ctest runs it.
#include <cmath>
#include <cstdio>
#include <vector>

#include "smelt/compile.h"
#include "smelt/smelt.h"

using namespace smelt;

namespace {

template <class T>
void swiglu_loop(const Tensor& a, const Tensor& b, const Tensor& y) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* py = y.data<T>();
  for (int64_t i = 0; i < y.numel(); ++i) py[i] = pa[i] / (T(1) + std::exp(-pa[i])) * pb[i];
}

CustomOp register_swiglu() {
  OpDefinition def;
  def.name = "swiglu";
  def.num_inputs = 2;
  def.shape = [](const std::vector<TensorMeta>& in, const Attrs&) {
    SMELT_CHECK(in[0] == in[1]) << "a and b must have one shape and dtype, got " << shape_str(in[0].shape)
                                << " and " << shape_str(in[1].shape);
    SMELT_CHECK(in[0].dtype == DType::Float32 || in[0].dtype == DType::Float64)
        << "a and b must be float32 or float64, got " << dtype_name(in[0].dtype);
    return std::vector<TensorMeta>{in[0]};
  };
  def.forward = [](const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
    const Tensor a = in[0].contiguous(), b = in[1].contiguous();  // any layout in, row-major here
    if (a.dtype() == DType::Float32) swiglu_loop<float>(a, b, out[0]);
    else swiglu_loop<double>(a, b, out[0]);
  };
  // dy/da = b * s * (1 + a * (1 - s)) with s = sigmoid(a); dy/db = silu(a).
  def.backward = [](const GradContext& ctx) -> std::vector<Tensor> {
    const Tensor& a = ctx.inputs[0];
    const Tensor& b = ctx.inputs[1];
    const Tensor& g = ctx.grads[0];
    const Tensor s = sigmoid(a);
    return {g * b * (s * (1.0 + a * (1.0 - s))), g * (a * s)};
  };
  def.backward_reads_outputs = false;
  def.expression = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<Tensor> {
    return {silu(in[0]) * in[1]};
  };
  def.onnx_domain = "com.smelt.examples";
  return register_op(def);
}

int failures = 0;

void expect(bool ok, const char* what) {
  std::printf("%-62s %s\n", what, ok ? "ok" : "FAILED");
  failures += ok ? 0 : 1;
}

double max_abs_diff(const Tensor& x, const Tensor& y) {
  return (x.to(DType::Float64) - y.to(DType::Float64)).abs().max().item();
}

}  // namespace

int main() {
  const CustomOp swiglu = register_swiglu();
  manual_seed(7);

  // Eager: the kernel against the same formula in double.
  const Tensor a = randn({64, 256}), b = randn({64, 256});
  const Tensor y = swiglu({a, b})[0];
  const Tensor a64 = a.to(DType::Float64), b64 = b.to(DType::Float64);
  expect(max_abs_diff(y, a64 * sigmoid(a64) * b64) < 1e-5, "eager forward = a * sigmoid(a) * b");

  // Gradients against central differences (float64), then the gradient's own gradient.
  const Tensor x1 = randn({5, 7}, DType::Float64).set_requires_grad(true);
  const Tensor x2 = randn({5, 7}, DType::Float64).set_requires_grad(true);
  const Tensor w = randn({5, 7}, DType::Float64);
  auto loss = [&](const Tensor& p, const Tensor& q) { return (swiglu({p, q})[0] * w).sum(); };
  const std::vector<Tensor> grads = autograd::grad({loss(x1, x2)}, {x1, x2}, {}, false, true);
  double worst = 0;
  for (int which = 0; which < 2; ++which) {
    for (int64_t i = 0; i < 35; i += 6) {
      NoGradGuard no_grad;
      const double h = 1e-6;
      Tensor plus = (which == 0 ? x1 : x2).detach().clone(), minus = plus.clone();
      plus.view({-1}).slice(0, i, i + 1).add_(h);
      minus.view({-1}).slice(0, i, i + 1).sub_(h);
      const double numeric = which == 0 ? (loss(plus, x2) - loss(minus, x2)).item() / (2 * h)
                                        : (loss(x1, plus) - loss(x1, minus)).item() / (2 * h);
      worst = std::max(worst, std::abs(numeric - grads[size_t(which)].view({-1}).slice(0, i, i + 1).item()));
    }
  }
  expect(worst < 1e-6, "backward = central differences (float64)");
  const Tensor second = autograd::grad({(grads[0] * grads[0]).sum()}, {x2})[0];
  const Tensor s = sigmoid(x1.detach());
  const Tensor da_db = w * s * (1.0 + x1.detach() * (1.0 - s));  // d(grad_a)/db
  expect(max_abs_diff(second, 2.0 * grads[0].detach() * da_db) < 1e-9, "second-order gradient through the backward");

  // Compiled: the expression replaces the op, so a bias add, the op and a scale fuse into one kernel.
  auto layer = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    return {swiglu({in[0] + 0.5, in[1]})[0] * 2.0};
  };
  CompiledFunction compiled = compile(layer);
  const Tensor fused = compiled({a, b})[0];
  expect(max_abs_diff(fused, layer({a, b})[0]) < 1e-5, "compiled (expression inlined and fused) = eager");
  const CompileReport& report = compiled.report();
  expect(report.kernels == 1 && report.op_steps == 0, "compiled: one fused kernel, no op step");
  std::printf("\nthe compiled plan:\n%s\n", report.plan.c_str());
  return failures == 0 ? 0 : 1;
}
