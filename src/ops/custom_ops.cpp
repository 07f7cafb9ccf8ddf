// The registry of user-defined ops (smelt/custom_op.h) and the checks around their rules.
#include "ops/custom_ops.h"

#include <array>
#include <atomic>
#include <cctype>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

#include "ops/dispatch.h"
#include "smelt/autograd.h"

namespace smelt::ops {
namespace {

// Ids kOpCount + i for the i-th registration. Lookups read without a lock: a record is published
// (its pointer stored) only when complete, and never changes or goes away afterwards.
constexpr int kMaxCustomOps = 4096;
std::array<std::atomic<const CustomOpRecord*>, kMaxCustomOps> g_records{};
std::atomic<int> g_count{0};
std::mutex g_register_mutex;

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

std::string metas_str(const std::vector<TensorMeta>& metas) {
  std::string s;
  for (const TensorMeta& m : metas) {
    s += (s.empty() ? "" : ", ") + std::string(dtype_name(m.dtype)) + " " + shape_str(m.shape);
  }
  return "(" + s + ")";
}

// Runs `f`, turning whatever it throws into a smelt::Error that names the op and the rule.
template <class F>
auto guarded(const CustomOpRecord& op, const char* rule, F&& f) -> decltype(f()) {
  return with_context("custom op '" + op.def.name + "': " + rule, std::forward<F>(f));
}

// A hash of the bytes an input's elements live in (the span from its first to its last element):
// what check_inputs_unchanged compares before and after the kernel.
uint64_t bytes_hash(const Tensor& t) {
  if (!t.storage() || t.numel() == 0) return 0;
  int64_t first = t.offset(), last = t.offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t step = (t.size(d) - 1) * t.stride(d);
    (step < 0 ? first : last) += step;
  }
  const size_t elem = dtype_size(t.dtype());
  const auto* p = static_cast<const unsigned char*>(t.storage()->data()) + size_t(first) * elem;
  const size_t n = size_t(last - first + 1) * elem;
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// The expression's values written into the outputs: an op registered without a kernel.
void run_expression(const CustomOpRecord& op, const std::vector<Tensor>& in, const Attrs& attrs,
                    const std::vector<Tensor>& out) {
  std::vector<Tensor> values;
  {
    NoGradGuard no_grad;
    DispatchHook* hook = set_dispatch_hook(nullptr);  // computed here, never recorded
    try {
      values = guarded(op, "expression", [&] { return op.def.expression(in, attrs); });
    } catch (...) {
      set_dispatch_hook(hook);
      throw;
    }
    set_dispatch_hook(hook);
  }
  SMELT_CHECK(values.size() == out.size())
      << "custom op '" << op.def.name << "': its expression returned " << values.size()
      << " tensors, the shape rule " << out.size();
  for (size_t k = 0; k < out.size(); ++k) {
    SMELT_CHECK(values[k].defined() && meta_of(values[k]) == meta_of(out[k]))
        << "custom op '" << op.def.name << "': its expression's output " << k << " is "
        << (values[k].defined() ? metas_str({meta_of(values[k])}) : "undefined")
        << ", the shape rule says " << metas_str({meta_of(out[k])});
    NoGradGuard no_grad;
    Tensor target = out[k];
    target.copy_(values[k]);
  }
}

}  // namespace

const CustomOpRecord* custom_op(OpId op) {
  const int i = int(op) - kOpCount;
  if (i < 0 || i >= g_count.load(std::memory_order_acquire)) return nullptr;
  return g_records[size_t(i)].load(std::memory_order_acquire);
}

bool custom_op_from_name(const std::string& name, OpId* out) {
  const int n = g_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (g_records[size_t(i)].load(std::memory_order_acquire)->def.name == name) {
      *out = OpId(kOpCount + i);
      return true;
    }
  }
  return false;
}

bool custom_op_for_onnx(const std::string& domain, const std::string& op_type, OpId* out) {
  const int n = g_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    const OpDefinition& def = g_records[size_t(i)].load(std::memory_order_acquire)->def;
    if (!def.onnx_domain.empty() && def.onnx_domain == domain && def.name == op_type) {
      *out = OpId(kOpCount + i);
      return true;
    }
  }
  return false;
}

std::vector<TensorMeta> custom_shape(const CustomOpRecord& op, const std::vector<TensorMeta>& in,
                                     const Attrs& attrs) {
  if (!op.def.shape) return {in.at(0)};
  std::vector<TensorMeta> out = guarded(op, "shape rule", [&] { return op.def.shape(in, attrs); });
  SMELT_CHECK(out.size() == size_t(op.def.num_outputs))
      << "custom op '" << op.def.name << "': its shape rule returned " << out.size()
      << " outputs for inputs " << metas_str(in) << "; the op has " << op.def.num_outputs
      << " (OpDefinition::num_outputs)";
  SMELT_CHECK(!op.def.view || out[0].dtype == in.at(0).dtype)
      << "custom op '" << op.def.name << "': its shape rule gives " << metas_str(out)
      << " for input " << metas_str(in) << "; a view op's output keeps its input's dtype";
  return out;
}

ViewLayout custom_view_layout(const CustomOpRecord& op, const Attrs& attrs, const Shape& in_shape,
                              const Shape& in_strides, int64_t in_offset, const Shape& out_shape) {
  const std::string where = "custom op '" + op.def.name + "': view rule";
  auto ask = [&](const Shape& strides, int64_t offset) {
    StridedLayout l = with_context(where, [&] {
      return op.def.view(in_shape, strides, offset, out_shape, attrs);
    });
    SMELT_CHECK(l.strides.size() == out_shape.size())
        << where << " returned " << l.strides.size() << " strides for an output of shape "
        << shape_str(out_shape) << "; give one per output dim";
    return l;
  };
  // The index map of the view: input dim w's index is base[w] + sum_d coef[w][d] * i[d] at the
  // output's index i. The rule at a stride of 1 in dim w (0 elsewhere) and offset 0 gives row w.
  const size_t rank = in_shape.size(), out_rank = out_shape.size();
  std::vector<Shape> coef(rank);
  Shape base(rank);
  for (size_t w = 0; w < rank; ++w) {
    Shape unit(rank, 0);
    unit[w] = 1;
    StridedLayout l = ask(unit, 0);
    coef[w] = std::move(l.strides);
    base[w] = l.offset;
  }
  const bool empty_view = shape_numel(out_shape) == 0;
  for (size_t w = 0; w < rank; ++w) {
    __int128 last = base[w];
    SMELT_CHECK(base[w] >= 0)
        << where << " starts at index " << base[w] << " of input dim " << w << " (input "
        << shape_str(in_shape) << ", output " << shape_str(out_shape) << "); a view's offset is "
        << "in_offset plus a non-negative sum of the input's strides";
    for (size_t d = 0; d < out_rank; ++d) {
      SMELT_CHECK(coef[w][d] >= 0)
          << where << " steps input dim " << w << " by " << coef[w][d] << " along output dim " << d
          << " (input " << shape_str(in_shape) << ", output " << shape_str(out_shape)
          << "); a view's strides are non-negative sums of the input's";
      if (out_shape[d] > 0) last += __int128(coef[w][d]) * (out_shape[d] - 1);
    }
    SMELT_CHECK(empty_view || last < in_shape[w])
        << where << " reaches index " << int64_t(std::min<__int128>(last, INT64_MAX))
        << " of input dim " << w << " (size " << in_shape[w] << ") for input "
        << shape_str(in_shape) << " and output " << shape_str(out_shape)
        << "; every element of a view lies within its input";
  }
  // The layout at the input's own strides, from the map. The rule's own answer there must agree:
  // a rule that is not affine would make compiled code (which indexes by the map) differ from
  // eager code.
  __int128 offset = in_offset;
  std::vector<__int128> strides(out_rank, 0);
  for (size_t w = 0; w < rank; ++w) {
    offset += __int128(base[w]) * in_strides[w];
    for (size_t d = 0; d < out_rank; ++d) strides[d] += __int128(coef[w][d]) * in_strides[w];
  }
  ViewLayout v;
  auto narrow = [&](__int128 x) {
    SMELT_CHECK(x >= INT64_MIN && x <= INT64_MAX)
        << where << ": a stride or offset of the view overflows int64 (input " << shape_str(in_shape)
        << " with strides " << shape_str(in_strides) << ")";
    return int64_t(x);
  };
  v.offset = narrow(offset);
  for (__int128 x : strides) v.strides.push_back(narrow(x));
  const StridedLayout own = ask(in_strides, in_offset);
  SMELT_CHECK(own.strides == v.strides && own.offset == v.offset)
      << where << " is not affine in the input's layout: for strides " << shape_str(in_strides)
      << " and offset " << in_offset << " it gives strides " << shape_str(own.strides)
      << " and offset " << own.offset << ", but its answers for a stride of 1 in each dim give "
      << shape_str(v.strides) << " and " << v.offset << ". A view's strides are sums of the "
      << "input's strides times non-negative integers, and its offset is in_offset plus such a sum";
  return v;
}

Tensor custom_view(const CustomOpRecord& op, const Tensor& in, const Attrs& attrs,
                   const TensorMeta& out) {
  ViewLayout v = custom_view_layout(op, attrs, in.shape(), in.strides(), in.offset(), out.shape);
  Tensor view = make_tensor(in.storage(), out.shape, std::move(v.strides), v.offset, in.dtype());
  view.impl()->trace_id = -1;
  return view;
}

void custom_kernel(const CustomOpRecord& op, const std::vector<Tensor>& in, const Attrs& attrs,
                   const std::vector<Tensor>& out) {
  if (!op.def.forward) {
    run_expression(op, in, attrs, out);
    return;
  }
  std::vector<uint64_t> before;
  if (op.def.check_inputs_unchanged) {
    for (size_t i = 0; i < in.size(); ++i) {
      const bool written = i < 32 && ((op.info.writes >> i) & 1u);
      before.push_back(written ? 0 : bytes_hash(in[i]));
    }
  }
  {
    NoGradGuard no_grad;  // a kernel computes; smelt ops inside it record no history
    guarded(op, "forward", [&] { op.def.forward(in, attrs, out); });
  }
  for (size_t i = 0; i < before.size(); ++i) {
    if (i < 32 && ((op.info.writes >> i) & 1u)) continue;  // declared: OpDefinition::writes
    SMELT_CHECK(bytes_hash(in[i]) == before[i])
        << "custom op '" << op.def.name << "': forward changed its input " << i << " ("
        << metas_str({meta_of(in[i])}) << "); a kernel writes only its outputs. Copy the input "
        << "if the kernel needs scratch space";
  }
}

std::vector<Tensor> custom_grad(const CustomOpRecord& op, const GradContext& ctx) {
  SMELT_CHECK(bool(op.def.backward))
      << "backward through custom op '" << op.def.name << "': it has no backward "
      << "(OpDefinition::backward); register it with one, or detach its inputs";
  std::vector<Tensor> grads = guarded(op, "backward", [&] { return op.def.backward(ctx); });
  SMELT_CHECK(grads.size() == ctx.inputs.size())
      << "custom op '" << op.def.name << "': backward returned " << grads.size()
      << " gradients for " << ctx.inputs.size() << " inputs (one per input; an undefined "
      << "Tensor() for an input without a gradient)";
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() || !ctx.needs(i)) continue;
    grads[i] = checked_gradient("custom op '" + op.def.name + "': backward", grads[i], meta_of(ctx.inputs[i]), i);
  }
  return grads;
}

Tensor checked_gradient(const std::string& where, Tensor grad, const TensorMeta& input, size_t i) {
  const Shape& want = input.shape;
  const Shape& got = grad.shape();
  bool fits = got.size() >= want.size();
  for (size_t d = 0; fits && d < want.size(); ++d) {
    fits = want[d] == got[got.size() - want.size() + d] || want[d] == 1;
  }
  SMELT_CHECK(fits) << where << " returned a gradient of shape " << shape_str(got) << " for input " << i
                    << " of shape " << shape_str(want)
                    << " (a gradient has the input's shape, or one the input broadcasts to)";
  SMELT_CHECK(dtype_is_floating(grad.dtype()))
      << where << " returned a " << dtype_name(grad.dtype()) << " gradient for input " << i
      << "; gradients are floating point";
  return grad.dtype() == input.dtype ? grad : grad.to(input.dtype);
}

}  // namespace smelt::ops

namespace smelt {

CustomOp register_op(OpDefinition def) {
  using namespace ops;
  SMELT_CHECK(is_identifier(def.name) && def.name != "constant")
      << "register_op: the name '" << def.name << "' is not an identifier (letters, digits and "
      << "'_', not starting with a digit, and not 'constant'): the IR text prints ops by name";
  OpId existing;
  SMELT_CHECK(!op_from_name(def.name, &existing))
      << "register_op: an op named '" << def.name << "' already exists ("
      << (int(existing) < kOpCount ? "a built-in op" : "registered before")
      << "); choose another name";
  SMELT_CHECK(def.num_inputs >= -1 && def.num_inputs <= 32)
      << "register_op '" << def.name << "': num_inputs must be in [0, 32], or -1 for any number; got "
      << def.num_inputs;
  SMELT_CHECK(def.num_outputs >= 1 && def.num_outputs <= 32)
      << "register_op '" << def.name << "': num_outputs must be in [1, 32]; got " << def.num_outputs;
  SMELT_CHECK(def.forward || def.expression || def.view)
      << "register_op '" << def.name << "': give a forward kernel, an expression, or both (or a "
      << "view rule for a view op)";
  SMELT_CHECK(!def.view || (def.num_inputs == 1 && def.num_outputs == 1 && !def.forward &&
                            !def.expression && def.writes.empty()))
      << "register_op '" << def.name << "': a view op (OpDefinition::view) has one input and one "
      << "output, and no forward, expression or writes (it computes nothing; its output shares "
      << "its input's memory)";
  SMELT_CHECK(def.shape || def.num_outputs == 1)
      << "register_op '" << def.name << "': an op with " << def.num_outputs
      << " outputs needs a shape rule (the default makes one output like input 0)";
  SMELT_CHECK(def.shape || def.num_inputs != 0)
      << "register_op '" << def.name << "': an op without inputs needs a shape rule";

  uint32_t writes_mask = 0;
  for (int in : def.writes) {
    SMELT_CHECK(in >= 0 && (def.num_inputs < 0 ? in < 32 : in < def.num_inputs))
        << "register_op '" << def.name << "': writes names input " << in << ", but the op has "
        << (def.num_inputs < 0 ? std::string("inputs 0 to 31 at most") : std::to_string(def.num_inputs) + " inputs");
    writes_mask |= 1u << in;
  }
  SMELT_CHECK(writes_mask == 0 || def.forward)
      << "register_op '" << def.name << "': an op that writes its inputs needs a forward kernel";
  SMELT_CHECK(writes_mask == 0 || !def.expression)
      << "register_op '" << def.name << "': an op that writes its inputs cannot have an expression "
      << "(an expression computes values; it cannot store into an input)";

  std::lock_guard<std::mutex> lock(g_register_mutex);
  SMELT_CHECK(!custom_op_from_name(def.name, &existing))
      << "register_op: an op named '" << def.name << "' already exists (registered before); "
      << "choose another name";
  const int index = g_count.load(std::memory_order_relaxed);
  SMELT_CHECK(index < kMaxCustomOps) << "register_op: at most " << kMaxCustomOps << " ops can be registered";
  auto record = std::make_unique<CustomOpRecord>();
  record->def = std::move(def);
  // kRefusesValues: a user kernel may raise on values (a validation op), so passes never drop an
  // unused call nor fold one ahead of time: a compiled graph raises where eager code does.
  // A view op is Injective, as the built-in views: fusion takes it as index arithmetic. It
  // computes nothing, so it cannot refuse values.
  const bool is_view = bool(record->def.view);
  record->info = OpInfo{record->def.name.c_str(), is_view ? OpKind::Injective : OpKind::Opaque,
                        record->def.num_inputs,   record->def.num_outputs,
                        is_view ? 0u : uint32_t(kRefusesValues), is_view ? view(0, 0) : 0u,
                        writes_mask};
  // Without a backward, nothing is saved: the node only raises the error that says so.
  const bool saves = bool(record->def.backward);
  record->impl.saves = uint8_t((saves && record->def.backward_reads_inputs ? kSaveInputs : 0) |
                               (saves && record->def.backward_reads_outputs ? kSaveOutputs : 0));
  const std::string name = record->def.name;
  g_records[size_t(index)].store(record.release(), std::memory_order_release);
  g_count.store(index + 1, std::memory_order_release);
  return CustomOp(name, uint16_t(kOpCount + index));
}

CustomOp find_op(const std::string& name) {
  ops::OpId id;
  SMELT_CHECK(ops::custom_op_from_name(name, &id))
      << "no op named '" << name << "' is registered (smelt::register_op)";
  return CustomOp(name, uint16_t(id));
}

bool is_registered_op(const std::string& name) {
  ops::OpId id;
  return ops::custom_op_from_name(name, &id);
}

std::vector<Tensor> CustomOp::operator()(const std::vector<Tensor>& inputs, const Attrs& attrs) const {
  SMELT_CHECK(id_ != 0) << "a default-constructed CustomOp names no op; use register_op or find_op";
  return ops::call(ops::OpId(id_), inputs, attrs);
}

std::vector<Tensor> call_op(const std::string& name, const std::vector<Tensor>& inputs,
                            const Attrs& attrs) {
  return find_op(name)(inputs, attrs);
}

}  // namespace smelt
