// The trampoline that makes C++ modules subclassable from Python (see nn.cpp), shared by the
// bindings of smelt.nn.Module (nn.cpp) and of the built-in layers (layers.cpp).
#pragma once

#include <deque>
#include <type_traits>

#include "bind.h"

namespace smelt::python {

// A tensor marked as a parameter: what module attribute assignment registers.
struct Parameter : Tensor {
  explicit Parameter(Tensor t) : Tensor(std::move(t)) {}
};

// What a module made from Python owns besides its C++ members: the slots of the tensors Python
// registered (nn::Module keeps pointers to them, so they must not move) and the Python objects of
// its children (kept alive as long as the module, since the C++ side may call into them).
class PySlots {
 public:
  virtual ~PySlots() {
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      children_.clear();
    } else {
      for (py::object& o : children_) o.release();  // the interpreter is gone: leak
    }
  }
  Tensor* find(const std::string& name, bool parameter) {
    for (auto& [n, slot] : parameter ? params_ : buffers_) {
      if (n == name) return slot;
    }
    return nullptr;
  }
  void add(const std::string& name, Tensor value, bool parameter) {
    slots_.push_back(std::move(value));
    Tensor& slot = slots_.back();
    do_register(name, slot, parameter);  // may throw (a taken name): nothing is recorded then
    (parameter ? params_ : buffers_).emplace_back(name, &slot);
  }
  void add_child(const std::string& name, py::object module) {
    do_register_child(name, module.cast<nn::ModulePtr>());
    keep(std::move(module));
  }
  // Keeps a Python object alive as long as the module (a child registered another way).
  void keep(py::object obj) { children_.push_back(std::move(obj)); }

 protected:
  virtual void do_register(const std::string& name, Tensor& slot, bool parameter) = 0;
  virtual void do_register_child(const std::string& name, nn::ModulePtr module) = 0;

 private:
  std::deque<Tensor> slots_;  // a deque never moves its elements
  std::vector<std::pair<std::string, Tensor*>> params_, buffers_;
  std::vector<py::object> children_;
};

template <class Base>
class PyModule : public Base, public PySlots {
 public:
  using Base::Base;

  Tensor forward(const Tensor& x) override {
    py::gil_scoped_acquire gil;
    if (py::function f = py::get_override(static_cast<const Base*>(this), "forward")) {
      py::object r = f(x);
      if (!py::isinstance<Tensor>(r)) {
        throw py::type_error(type_name() + ".forward returned " + std::string(py::str(py::type::of(r).attr("__name__"))) +
                             "; a module called from C++ (Sequential, compile) must return one smelt.Tensor");
      }
      return r.cast<Tensor>();
    }
    if constexpr (std::is_abstract_v<Base>) {
      PyErr_SetString(PyExc_NotImplementedError,
                      (type_name() + " defines no forward(); subclasses of smelt.nn.Module must").c_str());
      throw py::error_already_set();
    } else {
      return Base::forward(x);
    }
  }
  // The Python class's name (what the module tree prints), for subclasses made in Python too.
  std::string type_name() const override {
    py::gil_scoped_acquire gil;
    py::handle self = py::detail::get_object_handle(static_cast<const Base*>(this),
                                                    py::detail::get_type_info(typeid(Base)));
    if (self) return py::str(py::type::of(self).attr("__name__"));
    if constexpr (std::is_abstract_v<Base>) return "Module";
    else return Base::type_name();
  }
  std::string extra_repr() const override {
    py::gil_scoped_acquire gil;
    if (py::function f = py::get_override(static_cast<const Base*>(this), "extra_repr")) {
      return py::str(f());
    }
    return Base::extra_repr();
  }

 protected:
  void do_register(const std::string& name, Tensor& slot, bool parameter) override {
    if (parameter) this->register_parameter(name, slot);
    else this->register_buffer(name, slot);
  }
  void do_register_child(const std::string& name, nn::ModulePtr module) override {
    this->register_module(name, std::move(module));
  }
};

template <class M>
using LayerClass = py::class_<M, nn::Module, PyModule<M>, std::shared_ptr<M>>;

// A tensor assigned to a parameter's name: a Parameter, another module's parameter (a leaf that
// requires grad: tying weights) or None, as PyTorch accepts.
inline Tensor parameter_value(py::handle value, const std::string& name) {
  if (value.is_none()) return Tensor();
  if (py::isinstance<Tensor>(value)) {
    const Tensor& t = value.cast<const Tensor&>();
    if (py::isinstance<Parameter>(value) || (t.is_leaf() && t.requires_grad())) return t;
  }
  throw py::type_error("cannot assign " + std::string(py::str(py::type::of(value).attr("__name__"))) +
                       " as parameter '" + name + "' (smelt.nn.Parameter, another parameter or None expected)");
}

// Getter and setter of a built-in layer's tensor member (None when undefined, e.g. bias=False).
template <class M>
void def_tensor_member(LayerClass<M>& cls, const char* name,
                       Tensor M::*member, bool parameter) {
  cls.def_property(name,
      [member](const M& m) -> py::object { return (m.*member).defined() ? py::cast(m.*member) : py::none(); },
      [member, name, parameter](M& m, py::handle v) {
        if (parameter) m.*member = parameter_value(v, name);
        else m.*member = v.is_none() ? Tensor() : tensor_arg(v, name);
      });
}

void bind_layers(py::module_& m);
void bind_recurrent(py::module_& m);

}  // namespace smelt::python
