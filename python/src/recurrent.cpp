// smelt.nn.RNN, LSTM, GRU (include/smelt/nn.h) as PyTorch's: the same constructor arguments, and
// calling one returns (output, h_n) — (output, (h_n, c_n)) for LSTM — with an optional initial
// state hx. Parameters by PyTorch's names (lstm.weight_ih_l0, ...) through Module.__getattr__.
#include "module_trampoline.h"

namespace smelt::python {

namespace {

// hx: None, a tensor (h0), or for LSTM a pair (h0, c0).
py::object run(nn::Recurrent& self, const Tensor& x, py::handle hx) {
  const bool lstm = self.cell == RecurrentCell::LSTM;
  Tensor h0, c0;
  if (!hx.is_none()) {
    if (lstm) {
      if (!py::isinstance<py::tuple>(hx) || py::len(hx) != 2) {
        throw py::type_error("LSTM: hx must be a tuple (h_0, c_0) or None");
      }
      h0 = tensor_arg(hx[py::int_(0)], "LSTM: h_0");
      c0 = tensor_arg(hx[py::int_(1)], "LSTM: c_0");
    } else {
      h0 = tensor_arg(hx, (self.type_name() + ": hx").c_str());
    }
  }
  nn::Recurrent::Output out = self.forward_state(x, h0, c0);
  if (lstm) return py::make_tuple(out.output, py::make_tuple(out.h_n, out.c_n));
  return py::make_tuple(out.output, out.h_n);
}

template <class M>
LayerClass<M>& common(LayerClass<M>& cls) {
  cls.def("forward", [](M& self, const Tensor& x, py::handle hx) { return run(self, x, hx); },
          py::arg("input"), py::arg("hx") = py::none())
      .def_readonly("input_size", &M::input_size)
      .def_readonly("hidden_size", &M::hidden_size)
      .def_readonly("num_layers", &M::num_layers)
      .def_readonly("bias", &M::bias)
      .def_readonly("batch_first", &M::batch_first)
      .def_readonly("dropout", &M::dropout)
      .def_readonly("bidirectional", &M::bidirectional)
      .def("reset_parameters", &M::reset_parameters);
  return cls;
}

// LSTM and GRU: the same constructor arguments (no nonlinearity).
template <class M>
void gated(py::module_& m, const char* name) {
  LayerClass<M> cls(m, name, py::dynamic_attr());
  cls.def(py::init([](int64_t in, int64_t hidden, int64_t layers, bool bias, bool batch_first, double dropout,
                      bool bidirectional, py::handle dtype) {
            return new PyModule<M>(in, hidden, layers, bias, batch_first, dropout, bidirectional,
                                   dtype_or_float(dtype));
          }),
          py::arg("input_size"), py::arg("hidden_size"), py::arg("num_layers") = 1, py::arg("bias") = true,
          py::arg("batch_first") = false, py::arg("dropout") = 0.0, py::arg("bidirectional") = false,
          py::kw_only(), py::arg("dtype") = py::none());
  common(cls);
}

}  // namespace

void bind_recurrent(py::module_& m) {
  LayerClass<nn::RNN> rnn(m, "RNN", py::dynamic_attr());
  rnn.def(py::init([](int64_t in, int64_t hidden, int64_t layers, const std::string& nonlinearity, bool bias,
                      bool batch_first, double dropout, bool bidirectional, py::handle dtype) {
            return new PyModule<nn::RNN>(in, hidden, layers, nonlinearity, bias, batch_first, dropout,
                                         bidirectional, dtype_or_float(dtype));
          }),
          py::arg("input_size"), py::arg("hidden_size"), py::arg("num_layers") = 1,
          py::arg("nonlinearity") = "tanh", py::arg("bias") = true, py::arg("batch_first") = false,
          py::arg("dropout") = 0.0, py::arg("bidirectional") = false, py::kw_only(),
          py::arg("dtype") = py::none())
      .def_readonly("nonlinearity", &nn::RNN::nonlinearity);
  common(rnn);
  gated<nn::LSTM>(m, "LSTM");
  gated<nn::GRU>(m, "GRU");
}

}  // namespace smelt::python
