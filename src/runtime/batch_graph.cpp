#include "runtime/batch_graph.h"

#include <cstdio>
#include <cstring>
#include <map>

#include "ir/verifier.h"
#include "ops/attrs.h"
#include "smelt/creation.h"

namespace smelt::runtime {
namespace {

// FNV-1a over a constant's bytes: constants must be the same at every batch size.
uint64_t bytes_hash(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const unsigned char*>(c.raw_data());
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0, n = size_t(c.numel()) * dtype_size(c.dtype()); i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// One floating number of a graph that may follow the batch size (codegen/batch_float.h): a
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

std::optional<BatchGraph> BatchGraph::fit(const ir::Graph& g1, int64_t b1, const ir::Graph& g2, int64_t b2,
                                          std::string* why) {
  const Walk w1 = walk(g1), w2 = walk(g2);
  if (w1.skeleton != w2.skeleton || w1.ints.size() != w2.ints.size()) {
    *why = "the graph at batch " + std::to_string(b2) + " differs from the one at batch " + std::to_string(b1) +
           " in more than shapes (nodes, constants or attributes depend on the batch size)";
    return std::nullopt;
  }
  BatchGraph bg;
  bg.base_ = g1.clone();
  bg.b1_ = b1;
  for (size_t i = 0; i < w1.ints.size(); ++i) {
    const int64_t d = w2.ints[i] - w1.ints[i];
    if (d % (b2 - b1) != 0) {
      *why = "a shape dim or attribute (" + std::to_string(w1.ints[i]) + " at batch " + std::to_string(b1) + ", " +
             std::to_string(w2.ints[i]) + " at batch " + std::to_string(b2) +
             ") is not an integer multiple of the batch size plus a constant";
      return std::nullopt;
    }
    bg.slopes_.push_back(d / (b2 - b1));
  }
  for (size_t i = 0; i < w1.floats.size(); ++i) {
    const Float &f1 = w1.floats[i], &f2 = w2.floats[i];
    if (codegen::batch_float_same_bits(f1.value, f2.value)) continue;
    std::optional<codegen::BatchFloat> term = codegen::batch_float_fit(f1.value, b1, f2.value, b2, f1.dtype);
    if (!term) {
      *why = "a constant or float attribute (" + number_str(f1.value) + " at batch " + std::to_string(b1) + ", " +
             number_str(f2.value) + " at batch " + std::to_string(b2) +
             ") is neither c * n nor c / n for an n that is a multiple of the batch size plus a constant";
      return std::nullopt;
    }
    bg.floats_.emplace_back(i, *term);
  }
  return bg;
}

std::unique_ptr<ir::Graph> BatchGraph::at(int64_t b) const {
  const Walk base = walk(*base_);
  std::vector<int64_t> ints(base.ints.size());
  for (size_t i = 0; i < ints.size(); ++i) {
    ints[i] = base.ints[i] + slopes_[i] * (b - b1_);
    // (an int attribute may be negative, a dim counted from the end: only a sign flip is wrong)
    SMELT_CHECK(ints[i] >= 0 || base.ints[i] < 0)
        << "dynamic batch: at batch " << b << " a dim or attribute would be " << ints[i]
                              << " (" << base.ints[i] << " at batch " << b1_ << "); valid: batch sizes where "
                              << "every dim is >= 0";
  }
  std::vector<Float> floats = base.floats;
  for (const auto& [i, term] : floats_) {
    floats[i].value = codegen::batch_float_value(term, term.n + term.slope * (b - b1_), floats[i].dtype);
  }
  std::unique_ptr<ir::Graph> g = base_->clone();
  Walk set(&ints, &floats);
  set.graph(*g);
  ir::verify(*g);
  return g;
}

std::string BatchGraph::compare(const ir::Graph& g, int64_t b) const {
  const Walk want = walk(*at(b)), got = walk(g);
  if (want.skeleton != got.skeleton) return "the graph at batch " + std::to_string(b) + " has another structure";
  for (size_t i = 0; i < want.ints.size(); ++i) {
    if (want.ints[i] != got.ints[i]) {
      return "at batch " + std::to_string(b) + " an integer is " + std::to_string(got.ints[i]) +
             " where the fit says " + std::to_string(want.ints[i]) + " (not affine in the batch size)";
    }
  }
  for (size_t i = 0; i < want.floats.size(); ++i) {
    if (!codegen::batch_float_same_bits(want.floats[i].value, got.floats[i].value)) {
      return "at batch " + std::to_string(b) + " a constant or float attribute is " + number_str(got.floats[i].value) +
             " where the fit says " + number_str(want.floats[i].value);
    }
  }
  return "";
}

LowerFn BatchKernels::record(int64_t b) {
  auto probe = std::make_shared<Probe>();
  probe->batch = b;
  probes_.push_back(probe);
  return [probe](const ir::Graph& body, const std::string& name, const codegen::LowerOptions& options) {
    codegen::LowerOptions generic = options;
    generic.batch_generic = true;
    codegen::LowerResult r = codegen::lower(body, name, generic);
    probe->lowered.push_back(r);
    probe->tile_col_dims.push_back(options.tile_col_dims);
    probe->names.push_back(name);
    return r;
  };
}

std::string BatchKernels::fit() {
  SMELT_INTERNAL_CHECK(probes_.size() == 3) << "BatchKernels::fit: " << probes_.size() << " probes; wants 3";
  const Probe &p0 = *probes_[0], &p1 = *probes_[1], &p2 = *probes_[2];
  if (p0.tile_col_dims != p1.tile_col_dims || p0.tile_col_dims != p2.tile_col_dims || p0.names != p1.names ||
      p0.names != p2.names) {
    return "the plans at the probe batch sizes lower different groups";
  }
  fitted_.clear();
  for (size_t i = 0; i < p0.lowered.size(); ++i) {
    const codegen::LowerResult &r0 = p0.lowered[i], &r1 = p1.lowered[i], &r2 = p2.lowered[i];
    if (bool(r0.kernel) != bool(r1.kernel) || bool(r0.kernel) != bool(r2.kernel)) {
      return "a group lowers at some batch sizes only";
    }
    codegen::LowerResult f = r0;
    if (r0.kernel) {
      std::string why;
      std::optional<codegen::LoopKernel> k = codegen::kernel_fit_batch(*r0.kernel, p0.batch, *r1.kernel, p1.batch, &why);
      if (!k) return why;
      codegen::LoopKernel check = codegen::kernel_at_batch(*k, p2.batch);
      check.batch.reset();
      bool same = codegen::print_kernel(check) == codegen::print_kernel(*r2.kernel);
      for (size_t a = 0; same && a < check.args.size(); ++a) same = check.args[a].numel == r2.kernel->args[a].numel;
      if (!same) return "kernel '" + r0.kernel->name + "' is not affine in the batch size";
      f.kernel = std::move(k);
    }
    fitted_.push_back(std::move(f));
  }
  tile_col_dims_ = p0.tile_col_dims;
  names_ = p0.names;
  return "";
}

// Groups are matched to the fitted kernels by position, so the plan at b must lower the same
// groups in the same order: each by name and tile shape here, their number by the caller
// (`used`). A plan whose layout decisions change with the size (a reshape that is a view only when
// the batch is 1, plan_views.cpp) would otherwise run one group's kernel for another's.
LowerFn BatchKernels::replay(int64_t b, std::shared_ptr<const size_t>* used) const {
  auto next = std::make_shared<size_t>(0);
  if (used) *used = next;
  return [this, next, b](const ir::Graph&, const std::string& name, const codegen::LowerOptions& options) {
    const size_t i = (*next)++;
    SMELT_CHECK(i < fitted_.size() && tile_col_dims_[i] == options.tile_col_dims && names_[i] == name)
        << "dynamic batch: at batch " << b << " the plan lowers group '" << name
        << "' where the probe batch sizes did not; valid: a plan with the same groups at every batch size";
    codegen::LowerResult r = fitted_[i];
    if (r.kernel) r.kernel = codegen::kernel_at_batch(*r.kernel, b);
    return r;
  };
}

}  // namespace smelt::runtime
