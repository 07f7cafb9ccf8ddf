// Module-level functions: creation (smelt.zeros, smelt.randn, ...), the ops of ops.h
// (smelt.exp, smelt.matmul, smelt.cat, ...), grad mode and autograd.grad. The functions PyTorch
// keeps in torch.nn.functional (losses, conv, pooling, norms, dropout) are bound here with
// PyTorch's argument names and order, and re-exported by smelt.nn.functional.
#include "bind.h"

namespace smelt::python {

namespace {

DType dtype_or(py::handle dtype, DType fallback) { return dtype.is_none() ? fallback : dtype_arg(dtype); }

Tensor with_grad(Tensor t, bool requires_grad) {
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

// zeros(2, 3) / zeros((2, 3)) / zeros([2, 3]), dtype=..., requires_grad=...
template <Tensor (*Make)(const Shape&, DType)>
void def_filled(py::module_& m, const char* name) {
  m.def(name, [name](py::args size, py::handle dtype, bool requires_grad) {
    return with_grad(Make(shape_args(size, name), dtype_or(dtype, DType::Float32)), requires_grad);
  }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("requires_grad") = false);
}

Tensor zeros_fn(const Shape& s, DType d) { return zeros(s, d); }
Tensor ones_fn(const Shape& s, DType d) { return ones(s, d); }
Tensor empty_fn(const Shape& s, DType d) { return empty(s, d); }
Tensor rand_fn(const Shape& s, DType d) { return rand(s, d); }
Tensor randn_fn(const Shape& s, DType d) { return randn(s, d); }

template <Tensor (*Op)(const Tensor&)>
void def_unary(py::module_& m, const char* name) {
  m.def(name, [](const Tensor& x) { return Op(x); }, py::arg("input"));
}
Tensor neg_fn(const Tensor& x) { return neg(x); }

}  // namespace

void bind_functional(py::module_& m) {
  // ---- creation
  def_filled<zeros_fn>(m, "zeros");
  def_filled<ones_fn>(m, "ones");
  def_filled<empty_fn>(m, "empty");
  def_filled<rand_fn>(m, "rand");
  def_filled<randn_fn>(m, "randn");
  m.def("full", [](py::handle size, double value, py::handle dtype, bool requires_grad) {
    return with_grad(full(int_list(size, "full: size"), value, dtype_or(dtype, DType::Float32)), requires_grad);
  }, py::arg("size"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
     py::arg("requires_grad") = false);
  m.def("zeros_like", [](const Tensor& t, py::handle dtype) {
    return dtype.is_none() ? zeros_like(t) : zeros(t.shape(), dtype_arg(dtype));
  }, py::arg("input"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("ones_like", [](const Tensor& t, py::handle dtype) {
    return dtype.is_none() ? ones_like(t) : ones(t.shape(), dtype_arg(dtype));
  }, py::arg("input"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("full_like", [](const Tensor& t, double v) { return full_like(t, v); }, py::arg("input"),
        py::arg("fill_value"));
  m.def("arange", [](py::handle a, py::handle b, py::handle step, py::handle dtype) {
    // arange(end) or arange(start, end[, step]); int64 unless a float is given (as PyTorch).
    auto is_float = [](py::handle h) { return py::isinstance<py::float_>(h); };
    const double start = b.is_none() ? 0.0 : a.cast<double>();
    const double end = b.is_none() ? a.cast<double>() : b.cast<double>();
    const DType fallback = is_float(a) || is_float(b) || is_float(step) ? DType::Float32 : DType::Int64;
    return arange(start, end, step.cast<double>(), dtype_or(dtype, fallback));
  }, py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1, py::kw_only(),
     py::arg("dtype") = py::none());
  m.def("linspace", [](double a, double b, int64_t steps, py::handle dtype) {
    return linspace(a, b, steps, dtype_or(dtype, DType::Float32));
  }, py::arg("start"), py::arg("end"), py::arg("steps"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("randint", [](int64_t low, int64_t high, py::handle size) {
    return randint(low, high, int_list(size, "randint: size"));
  }, py::arg("low"), py::arg("high"), py::arg("size"));
  m.def("randperm", [](int64_t n) { return randperm(n); }, py::arg("n"));
  m.def("uniform", [](py::handle size, double low, double high, py::handle dtype) {
    return uniform(int_list(size, "uniform: size"), low, high, dtype_or(dtype, DType::Float32));
  }, py::arg("size"), py::arg("low") = 0.0, py::arg("high") = 1.0, py::kw_only(), py::arg("dtype") = py::none());
  m.def("normal", [](py::handle size, double mean, double std, py::handle dtype) {
    return normal(int_list(size, "normal: size"), mean, std, dtype_or(dtype, DType::Float32));
  }, py::arg("size"), py::arg("mean") = 0.0, py::arg("std") = 1.0, py::kw_only(), py::arg("dtype") = py::none());
  m.def("scalar_tensor", [](double v, py::handle dtype) { return scalar_tensor(v, dtype_or(dtype, DType::Float32)); },
        py::arg("value"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("manual_seed", [](uint64_t seed) { manual_seed(seed); }, py::arg("seed"));
  // ---- memory: live storages, bytes and autograd nodes (smelt/memory.h)
  m.def("memory_stats", [] {
    const MemoryStats s = memory_stats();
    py::dict d;
    d["storages"] = s.storages;
    d["bytes"] = s.bytes;
    d["autograd_nodes"] = s.autograd_nodes;
    d["peak_bytes"] = s.peak_bytes;
    return d;
  }, "Live tensor storages, their bytes, live autograd nodes (a training loop whose counts grow leaks) "
     "and the most bytes live since reset_memory_peak().");
  m.def("reset_memory_peak", &reset_memory_peak, "Starts a new peak_bytes from the bytes live now.");

  // ---- grad mode and autograd
  m.def("is_grad_enabled", &autograd::grad_enabled);
  m.def("set_grad_enabled", &autograd::set_grad_enabled, py::arg("mode"));
  py::module_ ag = m.def_submodule("autograd", "gradients of outputs with respect to inputs");
  ag.def("grad", [](py::handle outputs, py::handle inputs, py::handle grad_outputs, py::handle retain_graph,
                    bool create_graph, bool allow_unused) {
    auto as_list = [](py::handle h, const char* where) {
      return py::isinstance<Tensor>(h) ? std::vector<Tensor>{h.cast<Tensor>()} : tensor_list(h, where);
    };
    std::vector<Tensor> go = grad_outputs.is_none() ? std::vector<Tensor>{} : as_list(grad_outputs, "grad_outputs");
    bool retain = retain_graph.is_none() ? create_graph : retain_graph.cast<bool>();
    const std::vector<Tensor> outs = as_list(outputs, "outputs"), ins = as_list(inputs, "inputs");
    std::vector<Tensor> gs;
    {
      py::gil_scoped_release release;  // as a compiled call (compile.cpp): Python inside takes the GIL
      gs = autograd::grad(outs, ins, go, retain, create_graph, allow_unused);
    }
    py::tuple out(gs.size());
    for (size_t i = 0; i < gs.size(); ++i) out[i] = gs[i].defined() ? py::cast(gs[i]) : py::none();
    return out;
  }, py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs") = py::none(),
     py::arg("retain_graph") = py::none(), py::arg("create_graph") = false, py::arg("allow_unused") = false);

  // ---- elementwise
  def_unary<neg_fn>(m, "neg");
  def_unary<exp>(m, "exp");
  def_unary<log>(m, "log");
  def_unary<sqrt>(m, "sqrt");
  def_unary<rsqrt>(m, "rsqrt");
  def_unary<abs>(m, "abs");
  def_unary<sign>(m, "sign");
  def_unary<erf>(m, "erf");
  def_unary<relu>(m, "relu");
  def_unary<sigmoid>(m, "sigmoid");
  def_unary<tanh>(m, "tanh");
  def_unary<silu>(m, "silu");
  def_unary<floor>(m, "floor");
  def_unary<ceil>(m, "ceil");
  def_unary<round>(m, "round");
  def_unary<sin>(m, "sin");
  def_unary<cos>(m, "cos");
  def_unary<tan>(m, "tan");
  def_unary<asin>(m, "asin");
  def_unary<acos>(m, "acos");
  def_unary<atan>(m, "atan");
  def_unary<sinh>(m, "sinh");
  def_unary<cosh>(m, "cosh");
  def_unary<asinh>(m, "asinh");
  def_unary<acosh>(m, "acosh");
  def_unary<atanh>(m, "atanh");
  m.def("gelu", [](const Tensor& x, const std::string& approximate) {
    if (approximate != "none" && approximate != "tanh") {
      throw py::value_error("gelu: approximate must be 'none' or 'tanh', got '" + approximate + "'");
    }
    return gelu(x, approximate == "tanh" ? GeluApprox::Tanh : GeluApprox::None);
  }, py::arg("input"), py::arg("approximate") = "none");
  m.def("leaky_relu", [](const Tensor& x, double slope) { return leaky_relu(x, slope); }, py::arg("input"),
        py::arg("negative_slope") = 0.01);
  m.def("softplus", [](const Tensor& x, double beta, double threshold) { return softplus(x, beta, threshold); },
        py::arg("input"), py::arg("beta") = 1.0, py::arg("threshold") = 20.0);
  m.def("clamp", [](const Tensor& x, std::optional<double> lo, std::optional<double> hi) { return clamp(x, lo, hi); },
        py::arg("input"), py::arg("min") = py::none(), py::arg("max") = py::none());
  m.def("pow", [](const Tensor& a, py::handle e) {
    double v;
    bool is_float;
    if (number_value(e, &v, &is_float)) return pow(a, v);
    return pow(a, tensor_arg(e, "pow: exponent"));
  }, py::arg("input"), py::arg("exponent"));
  m.def("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, py::arg("input"), py::arg("other"));
  m.def("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, py::arg("input"), py::arg("other"));
  m.def("where", [](const Tensor& cond, py::handle a, py::handle b) {
    // Numbers take the dtype of the tensor on the other side.
    const Tensor* like = py::isinstance<Tensor>(a) ? &a.cast<const Tensor&>()
                         : py::isinstance<Tensor>(b) ? &b.cast<const Tensor&>() : nullptr;
    if (!like) throw py::type_error("where: input or other must be a smelt.Tensor");
    return where(cond, tensor_operand(a, *like, "where: input"), tensor_operand(b, *like, "where: other"));
  }, py::arg("condition"), py::arg("input"), py::arg("other"));

  // ---- reductions
  m.def("sum", [](const Tensor& x, py::handle dim, bool keepdim) { return sum(x, dims_arg(dim, "sum: dim"), keepdim); },
        py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("mean", [](const Tensor& x, py::handle dim, bool keepdim) { return mean(x, dims_arg(dim, "mean: dim"), keepdim); },
        py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("prod", [](const Tensor& x, py::handle dim, bool keepdim) { return prod(x, dims_arg(dim, "prod: dim"), keepdim); },
        py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("cumsum", [](const Tensor& x, int64_t dim) { return cumsum(x, dim); }, py::arg("input"), py::arg("dim"));
  m.def("topk", [](const Tensor& x, int64_t k, int64_t dim, bool largest) {
        TopKResult r = topk(x, k, dim, largest);
        return py::make_tuple(r.values, r.indices);  // (values, indices), sorted
      }, py::arg("input"), py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true);
  m.def("amax", [](const Tensor& x, py::handle dim, bool keepdim) { return amax(x, dims_arg(dim, "amax: dim"), keepdim); },
        py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("amin", [](const Tensor& x, py::handle dim, bool keepdim) { return amin(x, dims_arg(dim, "amin: dim"), keepdim); },
        py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("var", [](const Tensor& x, py::handle dim, int64_t correction, bool keepdim) {
    return var(x, dims_arg(dim, "var: dim"), correction, keepdim);
  }, py::arg("input"), py::arg("dim") = py::none(), py::kw_only(), py::arg("correction") = 1,
     py::arg("keepdim") = false);
  m.def("argmax", [](const Tensor& x, py::handle dim, bool keepdim) {
    if (dim.is_none()) return argmax(x.reshape({-1}), 0, false);
    return argmax(x, dim.cast<int64_t>(), keepdim);
  }, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("softmax", [](const Tensor& x, int64_t dim) { return softmax(x, dim); }, py::arg("input"), py::arg("dim"));
  m.def("log_softmax", [](const Tensor& x, int64_t dim) { return log_softmax(x, dim); }, py::arg("input"),
        py::arg("dim"));

  // ---- contractions, joining, indexing
  m.def("matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, py::arg("input"), py::arg("other"));
  m.def("cat", [](py::handle xs, int64_t dim) { return cat(tensor_list(xs, "cat: tensors"), dim); },
        py::arg("tensors"), py::arg("dim") = 0);
  m.def("stack", [](py::handle xs, int64_t dim) { return stack(tensor_list(xs, "stack: tensors"), dim); },
        py::arg("tensors"), py::arg("dim") = 0);
  m.def("split", [](const Tensor& t, py::handle size, int64_t dim) {
    if (py::isinstance<py::int_>(size)) return split(t, size.cast<int64_t>(), dim);
    return split(t, int_list(size, "split: split_size_or_sections"), dim);
  }, py::arg("tensor"), py::arg("split_size_or_sections"), py::arg("dim") = 0);
  m.def("index_select", [](const Tensor& x, int64_t dim, const Tensor& i) { return index_select(x, dim, i); },
        py::arg("input"), py::arg("dim"), py::arg("index"));
  m.def("gather", [](const Tensor& x, int64_t dim, const Tensor& i) { return gather(x, dim, i); },
        py::arg("input"), py::arg("dim"), py::arg("index"));
  m.def("scatter_add", [](const Tensor& x, int64_t dim, const Tensor& i, const Tensor& s) {
    return scatter_add(x, dim, i, s);
  }, py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("src"));
  m.def("index_add", [](const Tensor& x, int64_t dim, const Tensor& i, const Tensor& s) {
    return index_add(x, dim, i, s);
  }, py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("source"));
  m.def("reshape", [](const Tensor& x, py::handle shape) { return reshape(x, int_list(shape, "reshape: shape")); },
        py::arg("input"), py::arg("shape"));
  m.def("permute", [](const Tensor& x, py::handle dims) { return permute(x, int_list(dims, "permute: dims")); },
        py::arg("input"), py::arg("dims"));
  m.def("flatten", [](const Tensor& x, int64_t s, int64_t e) { return x.flatten(s, e); }, py::arg("input"),
        py::arg("start_dim") = 0, py::arg("end_dim") = -1);
  m.def("broadcast_shapes", [](py::args shapes) {
    Shape out;
    for (py::handle s : shapes) out = broadcast_shapes(out, int_list(s, "broadcast_shapes"), "broadcast_shapes");
    return py::tuple(py::cast(out));
  });

  // ---- torch.nn.functional's functions (PyTorch's names and argument order)
  m.def("linear", [](const Tensor& x, const Tensor& w, std::optional<Tensor> b) {
    return linear(x, w, b.value_or(Tensor()));
  }, py::arg("input"), py::arg("weight"), py::arg("bias") = py::none());
  m.def("conv2d", [](const Tensor& x, const Tensor& w, std::optional<Tensor> b, py::handle stride,
                     py::handle padding, py::handle dilation, int64_t groups) {
    return conv2d(x, w, b.value_or(Tensor()), int_tuple(stride, 2, "conv2d: stride"),
                  int_tuple(padding, 2, "conv2d: padding"), int_tuple(dilation, 2, "conv2d: dilation"), groups);
  }, py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
     py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1);
  m.def("max_pool2d", [](const Tensor& x, py::handle kernel, py::handle stride, py::handle padding,
                         py::handle dilation) {
    std::vector<int64_t> k = int_tuple(kernel, 2, "max_pool2d: kernel_size");
    return max_pool2d(x, k, stride.is_none() ? k : int_tuple(stride, 2, "max_pool2d: stride"),
                      int_tuple(padding, 2, "max_pool2d: padding"), int_tuple(dilation, 2, "max_pool2d: dilation"));
  }, py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0,
     py::arg("dilation") = 1);
  // dilation: smelt's extension (torch's avg_pool2d has none), keyword only in practice.
  m.def("avg_pool2d", [](const Tensor& x, py::handle kernel, py::handle stride, py::handle padding,
                         bool count_include_pad, py::handle dilation) {
    std::vector<int64_t> k = int_tuple(kernel, 2, "avg_pool2d: kernel_size");
    return avg_pool2d(x, k, stride.is_none() ? k : int_tuple(stride, 2, "avg_pool2d: stride"),
                      int_tuple(padding, 2, "avg_pool2d: padding"), count_include_pad,
                      int_tuple(dilation, 2, "avg_pool2d: dilation"));
  }, py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0,
     py::arg("count_include_pad") = true, py::arg("dilation") = 1);
  m.def("adaptive_avg_pool2d", [](const Tensor& x, py::handle size) {
    return adaptive_avg_pool2d(x, int_tuple(size, 2, "adaptive_avg_pool2d: output_size"));
  }, py::arg("input"), py::arg("output_size"));
  m.def("layer_norm", [](const Tensor& x, py::handle shape, std::optional<Tensor> w, std::optional<Tensor> b,
                         double eps) {
    return layer_norm(x, int_list(shape, "layer_norm: normalized_shape"), w.value_or(Tensor()),
                      b.value_or(Tensor()), eps);
  }, py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
     py::arg("eps") = 1e-5);
  m.def("batch_norm", [](const Tensor& x, const Tensor& rm, const Tensor& rv, std::optional<Tensor> w,
                         std::optional<Tensor> b, bool training, double momentum, double eps) {
    return batch_norm(x, rm, rv, w.value_or(Tensor()), b.value_or(Tensor()), training, momentum, eps);
  }, py::arg("input"), py::arg("running_mean"), py::arg("running_var"), py::arg("weight") = py::none(),
     py::arg("bias") = py::none(), py::arg("training") = false, py::arg("momentum") = 0.1, py::arg("eps") = 1e-5);
  m.def("dropout", [](const Tensor& x, double p, bool training) { return dropout(x, p, training); },
        py::arg("input"), py::arg("p") = 0.5, py::arg("training") = true);
  m.def("embedding", [](const Tensor& indices, const Tensor& weight) { return embedding(indices, weight); },
        py::arg("input"), py::arg("weight"));
  m.def("one_hot", [](const Tensor& x, int64_t n) { return one_hot(x, n); }, py::arg("tensor"),
        py::arg("num_classes"));
  m.def("cross_entropy", [](const Tensor& logits, const Tensor& target, int64_t ignore_index,
                            const std::string& reduction, double label_smoothing) {
    return cross_entropy(logits, target, ignore_index, label_smoothing, reduction_arg(reduction));
  }, py::arg("input"), py::arg("target"), py::kw_only(), py::arg("ignore_index") = -100,
     py::arg("reduction") = "mean", py::arg("label_smoothing") = 0.0);
  m.def("nll_loss", [](const Tensor& lp, const Tensor& target, int64_t ignore_index, const std::string& reduction) {
    return nll_loss(lp, target, ignore_index, reduction_arg(reduction));
  }, py::arg("input"), py::arg("target"), py::kw_only(), py::arg("ignore_index") = -100,
     py::arg("reduction") = "mean");
  m.def("mse_loss", [](const Tensor& x, const Tensor& t, const std::string& reduction) {
    return mse_loss(x, t, reduction_arg(reduction));
  }, py::arg("input"), py::arg("target"), py::kw_only(), py::arg("reduction") = "mean");
  m.def("binary_cross_entropy_with_logits", [](const Tensor& x, const Tensor& t, const std::string& reduction) {
    return binary_cross_entropy_with_logits(x, t, reduction_arg(reduction));
  }, py::arg("input"), py::arg("target"), py::kw_only(), py::arg("reduction") = "mean");
}

}  // namespace smelt::python
