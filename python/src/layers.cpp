// The built-in layers of smelt.nn (include/smelt/nn.h) with PyTorch's constructor arguments:
// ints or pairs for 2-D sizes, keyword options. Each is made as its trampoline, so Python can
// subclass it and register more parameters on it. Tensor members (weight, bias, running stats)
// are properties that read and write the C++ members.
#include "module_trampoline.h"

namespace smelt::python {

namespace {

template <class M>
LayerClass<M> layer(py::module_& m, const char* name) {
  return LayerClass<M>(m, name, py::dynamic_attr());
}

// An activation without options: Name().
template <class M>
void simple_layer(py::module_& m, const char* name) {
  layer<M>(m, name).def(py::init([] { return new PyModule<M>(); }));
}

}  // namespace

void bind_layers(py::module_& m) {
  auto linear = layer<nn::Linear>(m, "Linear");
  linear.def(py::init([](int64_t in, int64_t out, bool bias, py::handle dtype) {
              return new PyModule<nn::Linear>(in, out, bias, dtype_or_float(dtype));
            }),
            py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true, py::kw_only(),
            py::arg("dtype") = py::none())
      .def_readonly("in_features", &nn::Linear::in_features)
      .def_readonly("out_features", &nn::Linear::out_features)
      .def("reset_parameters", &nn::Linear::reset_parameters);
  def_tensor_member(linear, "weight", &nn::Linear::weight, true);
  def_tensor_member(linear, "bias", &nn::Linear::bias, true);

  auto conv = layer<nn::Conv2d>(m, "Conv2d");
  conv.def(py::init([](int64_t in, int64_t out, py::handle kernel, py::handle stride, py::handle padding,
                       py::handle dilation, int64_t groups, bool bias, py::handle dtype) {
            nn::Conv2d::Options o;
            o.stride = int_tuple(stride, 2, "Conv2d: stride");
            o.padding = int_tuple(padding, 2, "Conv2d: padding");
            o.dilation = int_tuple(dilation, 2, "Conv2d: dilation");
            o.groups = groups;
            o.bias = bias;
            o.dtype = dtype_or_float(dtype);
            return new PyModule<nn::Conv2d>(in, out, int_tuple(kernel, 2, "Conv2d: kernel_size"), o);
          }),
          py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
          py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true,
          py::kw_only(), py::arg("dtype") = py::none())
      .def_readonly("in_channels", &nn::Conv2d::in_channels)
      .def_readonly("out_channels", &nn::Conv2d::out_channels)
      .def_readonly("kernel_size", &nn::Conv2d::kernel_size)
      .def("reset_parameters", &nn::Conv2d::reset_parameters);
  def_tensor_member(conv, "weight", &nn::Conv2d::weight, true);
  def_tensor_member(conv, "bias", &nn::Conv2d::bias, true);

  auto bn = layer<nn::BatchNorm2d>(m, "BatchNorm2d");
  bn.def(py::init([](int64_t n, double eps, std::optional<double> momentum, bool affine, py::handle dtype) {
          nn::BatchNorm2d::Options o;
          o.eps = eps;
          o.momentum = momentum;
          o.affine = affine;
          o.dtype = dtype_or_float(dtype);
          return new PyModule<nn::BatchNorm2d>(n, o);
        }),
        py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::arg("affine") = true,
        py::kw_only(), py::arg("dtype") = py::none())
      .def_readonly("num_features", &nn::BatchNorm2d::num_features);
  def_tensor_member(bn, "weight", &nn::BatchNorm2d::weight, true);
  def_tensor_member(bn, "bias", &nn::BatchNorm2d::bias, true);
  def_tensor_member(bn, "running_mean", &nn::BatchNorm2d::running_mean, false);
  def_tensor_member(bn, "running_var", &nn::BatchNorm2d::running_var, false);
  def_tensor_member(bn, "num_batches_tracked", &nn::BatchNorm2d::num_batches_tracked, false);

  auto ln = layer<nn::LayerNorm>(m, "LayerNorm");
  ln.def(py::init([](py::handle shape, double eps, bool affine, bool bias, py::handle dtype) {
          return new PyModule<nn::LayerNorm>(int_list(shape, "LayerNorm: normalized_shape"), eps, affine, bias,
                                             dtype_or_float(dtype));
        }),
        py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true,
        py::arg("bias") = true, py::kw_only(), py::arg("dtype") = py::none())
      .def_readonly("normalized_shape", &nn::LayerNorm::normalized_shape)
      .def_readonly("eps", &nn::LayerNorm::eps);
  def_tensor_member(ln, "weight", &nn::LayerNorm::weight, true);
  def_tensor_member(ln, "bias", &nn::LayerNorm::bias, true);

  layer<nn::Dropout>(m, "Dropout")
      .def(py::init([](double p) { return new PyModule<nn::Dropout>(p); }), py::arg("p") = 0.5)
      .def_readonly("p", &nn::Dropout::p);

  auto emb = layer<nn::Embedding>(m, "Embedding");
  emb.def(py::init([](int64_t n, int64_t d, py::handle dtype) {
           return new PyModule<nn::Embedding>(n, d, dtype_or_float(dtype));
         }),
         py::arg("num_embeddings"), py::arg("embedding_dim"), py::kw_only(), py::arg("dtype") = py::none())
      .def_readonly("num_embeddings", &nn::Embedding::num_embeddings)
      .def_readonly("embedding_dim", &nn::Embedding::embedding_dim);
  def_tensor_member(emb, "weight", &nn::Embedding::weight, true);

  layer<nn::Flatten>(m, "Flatten")
      .def(py::init([](int64_t s, int64_t e) { return new PyModule<nn::Flatten>(s, e); }),
           py::arg("start_dim") = 1, py::arg("end_dim") = -1);
  layer<nn::MaxPool2d>(m, "MaxPool2d")
      .def(py::init([](py::handle kernel, py::handle stride, py::handle padding) {
             auto k = int_tuple(kernel, 2, "MaxPool2d: kernel_size");
             return new PyModule<nn::MaxPool2d>(k, stride.is_none() ? k : int_tuple(stride, 2, "MaxPool2d: stride"),
                                                int_tuple(padding, 2, "MaxPool2d: padding"));
           }),
           py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0);
  layer<nn::AvgPool2d>(m, "AvgPool2d")
      .def(py::init([](py::handle kernel, py::handle stride, py::handle padding) {
             auto k = int_tuple(kernel, 2, "AvgPool2d: kernel_size");
             return new PyModule<nn::AvgPool2d>(k, stride.is_none() ? k : int_tuple(stride, 2, "AvgPool2d: stride"),
                                                int_tuple(padding, 2, "AvgPool2d: padding"));
           }),
           py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0);
  layer<nn::AdaptiveAvgPool2d>(m, "AdaptiveAvgPool2d")
      .def(py::init([](py::handle size) {
             return new PyModule<nn::AdaptiveAvgPool2d>(int_tuple(size, 2, "AdaptiveAvgPool2d: output_size"));
           }),
           py::arg("output_size"));

  simple_layer<nn::ReLU>(m, "ReLU");
  simple_layer<nn::Tanh>(m, "Tanh");
  simple_layer<nn::Sigmoid>(m, "Sigmoid");
  simple_layer<nn::SiLU>(m, "SiLU");
  layer<nn::GELU>(m, "GELU").def(py::init([](const std::string& a) { return new PyModule<nn::GELU>(gelu_approx(a)); }),
                                 py::arg("approximate") = "none");
  layer<nn::LeakyReLU>(m, "LeakyReLU")
      .def(py::init([](double s) { return new PyModule<nn::LeakyReLU>(s); }), py::arg("negative_slope") = 0.01);

  // Sequential(m0, m1, ...): children "0", "1", ...; it keeps their Python objects alive.
  layer<nn::Sequential>(m, "Sequential")
      .def(py::init([](py::args modules) {
        auto* seq = new PyModule<nn::Sequential>();
        try {
          for (py::handle mod : modules) {
            if (!py::isinstance<nn::Module>(mod)) {
              throw py::type_error("Sequential: expected smelt.nn.Module arguments, got " +
                                   std::string(py::str(py::type::of(mod).attr("__name__"))));
            }
            seq->push_back(mod.cast<nn::ModulePtr>());
            seq->keep(py::reinterpret_borrow<py::object>(mod));
          }
        } catch (...) {
          delete seq;
          throw;
        }
        return seq;
      }))
      .def("append", [](py::object self, py::handle mod) {
        auto& seq = self.cast<nn::Sequential&>();
        if (!py::isinstance<nn::Module>(mod)) throw py::type_error("Sequential.append: expected a smelt.nn.Module");
        auto* slots = dynamic_cast<PySlots*>(&seq);
        if (!slots) throw py::type_error("Sequential.append: this Sequential was made in C++");
        seq.push_back(mod.cast<nn::ModulePtr>());
        slots->keep(py::reinterpret_borrow<py::object>(mod));
        return self;
      }, py::arg("module"))
      .def("__len__", &nn::Sequential::size)
      .def("__getitem__", [](const nn::Sequential& seq, int64_t i) {
        const auto n = int64_t(seq.size());
        if (i < -n || i >= n) throw py::index_error("Sequential index " + std::to_string(i) + " out of range");
        return seq[size_t(i < 0 ? i + n : i)];
      });
}

GeluApprox gelu_approx(const std::string& approximate) {
  if (approximate == "none") return GeluApprox::None;
  if (approximate == "tanh") return GeluApprox::Tanh;
  throw py::value_error("GELU: approximate must be 'none' or 'tanh', got '" + approximate + "'");
}

}  // namespace smelt::python
