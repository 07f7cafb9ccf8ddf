#include "runtime/shape_fit.h"

#include <cstdio>
#include <cstring>
#include <map>

#include "ir/constant.h"
#include "ir/verifier.h"
#include "ops/attrs.h"
#include "smelt/creation.h"

namespace smelt::runtime {
namespace {

// FNV-1a over a constant's bytes: constants must be the same at every size.
uint64_t bytes_hash(const Tensor& t) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : ir::constant_bytes(t)) h = (h ^ c) * 1099511628211ull;
  return h;
}

// One floating number of a graph that may follow the batch size (codegen/size_float.h): a
// one-element floating constant's value, or a float attribute (a double: float64).
struct Float {
  double value = 0;
  DType dtype = DType::Float64;
};

// Walks a graph (group bodies included) in a fixed order: its structure without integers goes to
// `skeleton`, its integers (value shape dims, int attributes) to `ints`, its one-element floating
// constants and float attributes to `floats`. With `set` (and `set_floats`), writes them instead,
// from those in the same order (how at() makes the graph at another batch).
class Walk {
 public:
  explicit Walk(const std::vector<int64_t>* set = nullptr, const std::vector<Float>* set_floats = nullptr)
      : set_(set), set_floats_(set_floats) {}
  std::string skeleton;
  std::vector<int64_t> ints;
  std::vector<Float> floats;

  void graph(ir::Graph& g) {
    skeleton += "{";
    for (ir::Value* v : g.inputs()) {
      number(v);
      skeleton += "in " + v->name + ir::value_kind_name(v->kind);
      meta(v->meta);
    }
    for (ir::Value* v : g.constants()) {
      number(v);
      skeleton += "const " + shape_str(v->meta.shape) + ops::dtype_short_name(v->meta.dtype);
      if (v->constant.numel() == 1 && dtype_is_floating(v->meta.dtype)) {
        const double x = number_value(v->constant.to_vector()[0], v->meta.dtype);
        if (set_floats_) v->constant = full(v->meta.shape, x, v->meta.dtype);
      } else {
        skeleton += '#';  // (appended: GCC 12's -Wrestrict misfires on "#" + std::string)
        skeleton += std::to_string(bytes_hash(v->constant));
      }
    }
    for (const auto& n : g.nodes()) {
      skeleton += '\n';
      skeleton += n->name();
      skeleton += '(';
      for (const ir::Value* v : n->inputs) skeleton += std::to_string(numbers_.at(v)) + ",";
      skeleton += ")";
      attrs(n->attrs);
      for (ir::Value* v : n->outputs) {
        number(v);
        meta(v->meta);
      }
      if (n->body) graph(*n->body);
    }
    skeleton += "\nout";
    for (const ir::Value* v : g.outputs()) {
      skeleton += ' ';
      skeleton += std::to_string(numbers_.at(v));
    }
    skeleton += "}";
  }

 private:
  void number(const ir::Value* v) { numbers_.emplace(v, int(numbers_.size())); }

  int64_t integer(int64_t v) {
    if (set_) v = (*set_)[ints.size()];
    ints.push_back(v);
    return v;
  }

  double number_value(double v, DType dtype) {
    if (set_floats_) v = (*set_floats_)[floats.size()].value;
    floats.push_back({v, dtype});
    return v;
  }

  void meta(ops::TensorMeta& m) {
    skeleton += std::string(ops::dtype_short_name(m.dtype)) + "[" + std::to_string(m.shape.size()) + "]";
    for (int64_t& d : m.shape) d = integer(d);
  }

  void attrs(ops::Attrs& a) {
    ops::Attrs out;
    for (const auto& [name, value] : a.items()) {
      skeleton += " " + name + "=";
      if (const auto* i = std::get_if<int64_t>(&value)) {
        out.set(name, integer(*i));
      } else if (const auto* l = std::get_if<std::vector<int64_t>>(&value)) {
        skeleton += "list" + std::to_string(l->size());
        std::vector<int64_t> list;
        for (int64_t x : *l) list.push_back(integer(x));
        out.set(name, list);
      } else if (const auto* f = std::get_if<double>(&value)) {
        skeleton += "float";
        out.set(name, number_value(*f, DType::Float64));
      } else {
        skeleton += ops::attr_value_str(value);
        out.set(name, value);
      }
    }
    if (set_) a = out;
  }

  const std::vector<int64_t>* set_;
  const std::vector<Float>* set_floats_;
  std::map<const ir::Value*, int> numbers_;
};

std::string number_str(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

Walk walk(const ir::Graph& g) {
  Walk w;
  w.graph(const_cast<ir::Graph&>(g));  // reads only: no `set`
  return w;
}

}  // namespace

std::optional<GraphFit> GraphFit::fit(const std::vector<const ir::Graph*>& graphs,
                                          const codegen::SymbolGrid& grid, std::string* why) {
  const std::vector<codegen::SymbolPoint> points = grid.points();
  SMELT_INTERNAL_CHECK(graphs.size() == points.size())
      << "GraphFit::fit: " << graphs.size() << " graphs for " << points.size() << " grid points";
  std::vector<Walk> walks;
  for (const ir::Graph* g : graphs) walks.push_back(walk(*g));
  const Walk& w0 = walks[0];
  for (size_t j = 1; j < walks.size(); ++j) {
    if (walks[j].skeleton != w0.skeleton || walks[j].ints.size() != w0.ints.size()) {
      *why = "the graph at " + codegen::point_str(points[j]) + " differs from the one at " +
             codegen::point_str(points[0]) +
             " in more than shapes (nodes, constants or attributes depend on the sizes)";
      return std::nullopt;
    }
  }
  GraphFit bg;
  bg.base_ = graphs[0]->clone();
  std::vector<int64_t> values(walks.size());
  for (size_t i = 0; i < w0.ints.size(); ++i) {
    for (size_t j = 0; j < walks.size(); ++j) values[j] = walks[j].ints[i];
    std::optional<codegen::SizePoly> poly = codegen::fit_size(grid, values);
    if (!poly) {
      *why = "a shape dim or attribute (" + std::to_string(values[0]) + " at " + codegen::point_str(points[0]) +
             ", " + std::to_string(values[1]) + " at " + codegen::point_str(points[1]) +
             ") is not a polynomial in the sizes with integer coefficients";
      return std::nullopt;
    }
    bg.ints_.push_back(*poly);
  }
  std::vector<double> floats(walks.size());
  for (size_t i = 0; i < w0.floats.size(); ++i) {
    bool same = true;
    for (size_t j = 0; j < walks.size(); ++j) {
      floats[j] = walks[j].floats[i].value;
      same = same && codegen::size_float_same_bits(floats[0], floats[j]);
    }
    if (same) continue;
    std::optional<codegen::SizeFloat> term = codegen::size_float_fit_grid(grid, floats, w0.floats[i].dtype);
    if (!term) {
      *why = "a constant or float attribute (" + number_str(floats[0]) + " at " + codegen::point_str(points[0]) +
             ", " + number_str(floats[1]) + " at " + codegen::point_str(points[1]) +
             ") is neither c * n nor c / n for an n that is a polynomial in the sizes";
      return std::nullopt;
    }
    bg.floats_.emplace_back(i, *term);
  }
  return bg;
}

std::unique_ptr<ir::Graph> GraphFit::at(const codegen::SymbolPoint& p) const {
  const Walk base = walk(*base_);
  std::vector<int64_t> ints(base.ints.size());
  for (size_t i = 0; i < ints.size(); ++i) {
    ints[i] = ints_[i].at(p);
    // (an int attribute may be negative, a dim counted from the end: only a sign flip is wrong)
    SMELT_CHECK(ints[i] >= 0 || base.ints[i] < 0)
        << "dynamic shapes: at " << codegen::point_str(p) << " a dim or attribute would be " << ints[i] << " ("
        << ints_[i].text() << "); valid: sizes where every dim is >= 0";
  }
  std::vector<Float> floats = base.floats;
  for (const auto& [i, term] : floats_) floats[i].value = codegen::size_float_value(term, term.n.at(p), floats[i].dtype);
  std::unique_ptr<ir::Graph> g = base_->clone();
  Walk set(&ints, &floats);
  set.graph(*g);
  ir::verify(*g);
  return g;
}

std::string GraphFit::compare(const ir::Graph& g, const codegen::SymbolPoint& p) const {
  const Walk want = walk(*at(p)), got = walk(g);
  const std::string where = "at " + codegen::point_str(p);
  if (want.skeleton != got.skeleton) return "the graph " + where + " has another structure";
  for (size_t i = 0; i < want.ints.size(); ++i) {
    if (want.ints[i] != got.ints[i]) {
      return where + " an integer is " + std::to_string(got.ints[i]) + " where the fit says " +
             std::to_string(want.ints[i]) + " (" + ints_[i].text() + ": not a polynomial in the sizes)";
    }
  }
  for (size_t i = 0; i < want.floats.size(); ++i) {
    if (!codegen::size_float_same_bits(want.floats[i].value, got.floats[i].value)) {
      return where + " a constant or float attribute is " + number_str(got.floats[i].value) + " where the fit says " +
             number_str(want.floats[i].value);
    }
  }
  return "";
}

LowerFn KernelFit::record(const codegen::SymbolPoint& p) {
  auto probe = std::make_shared<Probe>();
  probe->sizes = p;
  probes_.push_back(probe);
  return [probe](const ir::Graph& body, const std::string& name, const codegen::LowerOptions& options) {
    codegen::LowerOptions generic = options;
    generic.size_generic = true;
    codegen::LowerResult r = codegen::lower(body, name, generic);
    probe->lowered.push_back(r);
    probe->tile_col_dims.push_back(options.tile_col_dims);
    probe->names.push_back(name);
    return r;
  };
}

std::string KernelFit::fit(const codegen::SymbolGrid& grid) {
  const size_t n = grid.points().size();
  SMELT_INTERNAL_CHECK(probes_.size() == n + 1)
      << "KernelFit::fit: " << probes_.size() << " probes; wants " << n + 1;
  const Probe& p0 = *probes_[0];
  for (const auto& p : probes_) {
    if (p->tile_col_dims != p0.tile_col_dims || p->names != p0.names) {
      return "the plans at the probe sizes lower different groups";
    }
  }
  const Probe& check_probe = *probes_.back();
  fitted_.clear();
  for (size_t i = 0; i < p0.lowered.size(); ++i) {
    std::vector<const codegen::LoopKernel*> kernels;
    for (const auto& p : probes_) {
      if (bool(p->lowered[i].kernel) != bool(p0.lowered[i].kernel)) return "a group lowers at some sizes only";
      if (p != probes_.back() && p->lowered[i].kernel) kernels.push_back(&*p->lowered[i].kernel);
    }
    codegen::LowerResult f = p0.lowered[i];
    if (f.kernel) {
      std::string why;
      std::optional<codegen::LoopKernel> k = codegen::kernel_fit(kernels, grid, &why);
      if (!k) return why;
      codegen::LoopKernel check = codegen::kernel_at(*k, grid.check);
      check.sizes.reset();
      const codegen::LoopKernel& want = *check_probe.lowered[i].kernel;
      bool same = codegen::print_kernel(check) == codegen::print_kernel(want);
      for (size_t a = 0; same && a < check.args.size(); ++a) same = check.args[a].numel == want.args[a].numel;
      if (!same) return "kernel '" + f.kernel->name + "' is not polynomial in the sizes";
      f.kernel = std::move(k);
    }
    fitted_.push_back(std::move(f));
  }
  tile_col_dims_ = p0.tile_col_dims;
  names_ = p0.names;
  return "";
}

// Groups are matched to the fitted kernels by position, so the plan at p must lower the same
// groups in the same order: each by name and tile shape here, their number by the caller
// (`used`). A plan whose layout decisions change with the size (a reshape that is a view only when
// the batch is 1, plan_views.cpp) would otherwise run one group's kernel for another's.
LowerFn KernelFit::replay(const codegen::SymbolPoint& p, std::shared_ptr<const size_t>* used) const {
  auto next = std::make_shared<size_t>(0);
  if (used) *used = next;
  return [this, next, p](const ir::Graph&, const std::string& name, const codegen::LowerOptions& options) {
    const size_t i = (*next)++;
    SMELT_CHECK(i < fitted_.size() && tile_col_dims_[i] == options.tile_col_dims && names_[i] == name)
        << "dynamic shapes: at " << codegen::point_str(p) << " the plan lowers group '" << name
        << "' where the probe sizes did not; valid: a plan with the same groups at every size";
    codegen::LowerResult r = fitted_[i];
    if (!r.kernel) return r;
    r.kernel = codegen::kernel_at(*r.kernel, p);
    // A constant the fit kept (a gather of class 1 folded into an offset) may leave the buffers
    // at a size the probes never saw (1 class): this size is then specialized, where the
    // lowering or the op gives eager's error. (Found by the fuzzer: the plan's check of the
    // kernel reported an internal error.)
    try {
      codegen::validate(*r.kernel);
    } catch (const Error& e) {
      if (e.internal()) throw;
      SMELT_CHECK(false) << "dynamic shapes: at " << codegen::point_str(p) << " the fitted kernel '" << name
                         << "' is invalid (" << e.what() << "); valid: sizes where the fitted kernels stay in bounds";
    }
    return r;
  };
}

}  // namespace smelt::runtime
