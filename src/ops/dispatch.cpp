#include "ops/dispatch.h"

#include "autograd/node.h"
#include "kernels/transpose.h"
#include "ops/anomaly.h"
#include "ops/custom_ops.h"
#include "ops/inplace.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "tensor/memory_tracking.h"

namespace smelt::ops {

namespace {

thread_local DispatchHook* t_hook = nullptr;

// While set, tensors saved for backward that live in this storage are saved as private copies:
// an in-place op is about to overwrite it (see SaveCopiesOf).
thread_local const Storage* t_save_copies_of = nullptr;
thread_local std::vector<const Storage*>* t_saved_log = nullptr;

// A tensor saved for backward. The values are held by an impl of their own, without history,
// next to the history they had when saved (grad_fn, output_nr), so that later in-place ops that
// rebase the original tensor change neither (and no cycle node -> tensor -> node forms through
// a rebased tensor). Leaves that require grad are held as themselves: a second-order backward
// must reach their accumulator. The version guards against in-place changes after saving.
struct SavedTensor {
  Tensor data;
  Ref<GradNode> grad_fn;     // inputs: the history when saved (outputs get the node back)
  uint32_t output_nr = 0;
  bool is_output = false;
  uint64_t version = 0;
};

// The autograd node of one op call.
class OpNode final : public autograd::Node {
 public:
  OpNode(OpId op, Attrs attrs, uint32_t num_outputs)
      : Node(num_outputs), op_(op), attrs_(std::move(attrs)) {}

  const char* name() const override { return op_name(op_); }

  void save(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
    uint8_t saves = op_impl(op_).saves;
    if (saves & kSaveInputs) {
      const uint32_t unread = op_impl(op_).unread_inputs;
      for (size_t i = 0; i < inputs.size(); ++i) {
        bool keep_meta_only = i < 32 && ((unread >> i) & 1u);
        SavedTensor s;
        if (keep_meta_only) s.data = meta_stand_in(meta_of(inputs[i]));
        saved_inputs_.push_back(keep_meta_only ? std::move(s) : saved(inputs[i], false));
      }
    } else {
      // The rule still needs input shapes/dtypes (zeros, sum_to): keep metas only.
      for (const Tensor& t : inputs) input_metas_.push_back(meta_of(t));
    }
    for (const Tensor& t : outputs) output_metas_.push_back(meta_of(t));
    if (saves & kSaveOutputs) {
      for (const Tensor& t : outputs) saved_outputs_.push_back(saved(t, true));
    }
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> inputs = unpack(saved_inputs_);
    std::vector<Tensor> outputs = unpack(saved_outputs_);
    if (inputs.empty()) {
      // Stand-ins carrying only shape and dtype, for rules that do not read input values.
      for (const TensorMeta& m : input_metas_) inputs.push_back(meta_stand_in(m));
    }
    if (!(op_impl(op_).saves & kSaveOutputs)) {
      for (const TensorMeta& m : output_metas_) outputs.push_back(meta_stand_in(m));
    }
    for (size_t k = 0; k < grads.size(); ++k) {
      if (!grads[k].defined()) grads[k] = zeros(output_metas_[k].shape, output_metas_[k].dtype);
    }
    std::vector<bool> needs(next.size());
    for (size_t i = 0; i < next.size(); ++i) needs[i] = bool(next[i].node);
    GradContext ctx{inputs, outputs, grads, attrs_, needs};
    const CustomOpRecord* custom = custom_op(op_);
    std::vector<Tensor> result = custom ? custom_grad(*custom, ctx) : op_impl(op_).grad(ctx);
    SMELT_INTERNAL_CHECK(result.size() <= next.size())
        << op_name(op_) << ": gradient rule returned " << result.size() << " gradients for "
        << next.size() << " inputs";
    for (size_t i = 0; i < result.size(); ++i) {
      if (!result[i].defined() || !needs[i]) { result[i] = Tensor(); continue; }
      const Shape& want = inputs[i].shape();
      if (result[i].shape() != want) result[i] = sum_to(result[i], want);
    }
    return result;
  }

  void release_saved() override {
    saved_inputs_.clear();
    saved_outputs_.clear();
    released = !(op_impl(op_).saves == kSaveNothing);
  }

 private:
  SavedTensor saved(const Tensor& t, bool is_output) {
    SavedTensor s;
    s.is_output = is_output;
    const bool keep_leaf = !is_output && t.requires_grad() && t.is_leaf();
    if (t.storage() && t.storage().get() == t_save_copies_of) {
      // The in-place op that runs this node overwrites t next: save the values as they are now.
      s.data = kernels::contiguous_copy(Tensor(alias_impl(t)));
      s.data.impl()->trace_id = t.impl()->trace_id;
      SMELT_CHECK(!keep_leaf) << "internal: an in-place write to a leaf that requires grad";
    } else {
      s.data = keep_leaf ? t : Tensor(alias_impl(t));
    }
    s.version = s.data.storage() ? s.data.storage()->version() : 0;
    if (t_saved_log && s.data.storage()) t_saved_log->push_back(s.data.storage().get());
    if (!is_output && !keep_leaf && t.impl()->grad_fn) {
      s.grad_fn = t.impl()->grad_fn;
      s.output_nr = t.impl()->output_nr;
    }
    return s;
  }

  std::vector<Tensor> unpack(const std::vector<SavedTensor>& saved) {
    std::vector<Tensor> out;
    for (size_t k = 0; k < saved.size(); ++k) {
      const SavedTensor& s = saved[k];
      const Tensor& t = s.data;
      SMELT_CHECK(!t.storage() || t.storage()->version() == s.version)
          << "backward of " << op_name(op_) << ": a tensor " << shape_str(t.shape())
          << " saved for the gradient was modified in place afterwards (version " << s.version
          << " when saved, " << t.storage()->version()
          << " now); clone it before changing it, or change it after backward";
      if (!s.is_output && !s.grad_fn) { out.push_back(t); continue; }
      // Saved values get their history back, so a create_graph backward can differentiate
      // through them; outputs point at this node.
      Ref<TensorImpl> impl = alias_impl(t);
      impl->requires_grad = true;
      impl->grad_fn = s.is_output ? Ref<GradNode>(this) : s.grad_fn;
      impl->output_nr = s.is_output ? static_cast<uint32_t>(k) : s.output_nr;
      out.emplace_back(impl);
    }
    return out;
  }

  // A new impl over t's data with none of its autograd history. A saved output must not hold its
  // own grad_fn (a cycle through this node).
  static Ref<TensorImpl> alias_impl(const Tensor& t) {
    auto impl = make_ref<TensorImpl>();
    impl->storage = t.storage();
    impl->shape = t.shape();
    impl->strides = t.strides();
    impl->offset = t.offset();
    impl->dtype = t.dtype();
    impl->trace_id = t.impl()->trace_id;
    return impl;
  }

  static Tensor meta_stand_in(const TensorMeta& m) {
    auto impl = make_ref<TensorImpl>();
    impl->shape = m.shape;
    impl->strides = contiguous_strides(m.shape);
    impl->dtype = m.dtype;
    return Tensor(impl);
  }

  OpId op_;
  Attrs attrs_;
  std::vector<SavedTensor> saved_inputs_;
  std::vector<SavedTensor> saved_outputs_;
  std::vector<TensorMeta> input_metas_;
  std::vector<TensorMeta> output_metas_;
};

// Registers `add` as the engine's way to sum gradients.
const bool kAdderRegistered = [] {
  autograd::set_gradient_adder([](const Tensor& a, const Tensor& b) { return smelt::add(a, b); });
  return true;
}();

void check_arity(OpId op, size_t n) {
  const OpInfo& info = op_info(op);
  SMELT_CHECK(info.arity < 0 || size_t(info.arity) == n)
      << op_name(op) << ": expected " << info.arity << " inputs, got " << n;
  SMELT_CHECK(info.arity >= 0 || n >= 1) << op_name(op) << ": expected at least one input";
}

// Records an OpNode for `outputs` when grad mode is on and an input requires grad.
std::vector<Tensor> record_autograd(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                                    std::vector<Tensor> outputs) {
  bool any_requires_grad = false;
  for (const Tensor& t : inputs) any_requires_grad |= t.requires_grad();
  if (!any_requires_grad || !autograd::grad_enabled() || !is_differentiable(op)) return outputs;

  Ref<OpNode> node(new OpNode(op, attrs, static_cast<uint32_t>(outputs.size())));
  node->next.reserve(inputs.size());
  for (const Tensor& t : inputs) node->next.push_back(autograd::gradient_edge(t));
  // Outputs that are views get fresh impls so that their history is their own.
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!dtype_is_floating(outputs[k].dtype())) continue;  // integer outputs carry no gradient
    TensorImpl* o = outputs[k].impl();
    if (o->ref_count() > 1 || o->requires_grad) {
      outputs[k] = make_tensor(outputs[k].storage(), o->shape, o->strides, o->offset, o->dtype);
      outputs[k].impl()->trace_id = o->trace_id;
    }
    outputs[k].impl()->requires_grad = true;
    outputs[k].impl()->grad_fn = Ref<GradNode>(node.get());
    outputs[k].impl()->output_nr = static_cast<uint32_t>(k);
  }
  node->save(inputs, outputs);
  return outputs;
}

std::vector<TensorMeta> input_metas(OpId op, const std::vector<Tensor>& inputs) {
  std::vector<TensorMeta> in_metas;
  in_metas.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    SMELT_CHECK(inputs[i].defined())
        << op_name(op) << ": input " << i << " is an undefined (default-constructed) tensor";
    // Eager kernels need data; a symbolic tensor kept after its trace ended has none.
    SMELT_CHECK(t_hook || inputs[i].storage())
        << op_name(op) << ": input " << i << " (" << dtype_name(inputs[i].dtype()) << " "
        << shape_str(inputs[i].shape()) << ") is a symbolic tensor, which stands for a value of a "
        << "trace and has no data; it is valid only inside its trace. Outside, use tensors with "
           "data (run the traced graph, e.g. with trace::interpret, to get its values)";
    in_metas.push_back(meta_of(inputs[i]));
  }
  return in_metas;
}

// What call_into requires of the outputs a plan hands in (see dispatch.h).
void check_given_outputs(OpId op, const std::vector<TensorMeta>& metas,
                         const std::vector<Tensor>& outputs) {
  const char* name = op_name(op);
  SMELT_CHECK(outputs.size() == metas.size())
      << "call_into: " << name << " has " << metas.size() << " outputs, got " << outputs.size();
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& o = outputs[k];
    SMELT_CHECK(o.defined() && o.storage())
        << "call_into: " << name << ": output " << k << " must be a concrete tensor of "
        << dtype_name(metas[k].dtype) << " " << shape_str(metas[k].shape) << ", got "
        << (o.defined() ? "a symbolic (traced) tensor" : "an undefined tensor");
    SMELT_CHECK(o.dtype() == metas[k].dtype && o.shape() == metas[k].shape)
        << "call_into: " << name << ": output " << k << " must be " << dtype_name(metas[k].dtype)
        << " " << shape_str(metas[k].shape) << " (the shape rule's), got " << dtype_name(o.dtype())
        << " " << shape_str(o.shape());
    SMELT_CHECK(o.is_contiguous())
        << "call_into: " << name << ": output " << k << " " << shape_str(o.shape())
        << " must be contiguous (row-major), got strides " << shape_str(o.strides());
    const size_t end = size_t(o.offset()) * dtype_size(o.dtype()) + size_t(o.nbytes());
    SMELT_CHECK(o.offset() >= 0 && end <= o.storage()->nbytes())
        << "call_into: " << name << ": output " << k << " (offset " << o.offset() << ", "
        << o.numel() << " elements) reaches past its storage of " << o.storage()->nbytes()
        << " bytes";
  }
  // Kernels write outputs independently: two that share bytes would overwrite each other.
  for (size_t a = 0; a < outputs.size(); ++a) {
    for (size_t b = a + 1; b < outputs.size(); ++b) {
      const Tensor &x = outputs[a], &y = outputs[b];
      if (x.storage().get() != y.storage().get() || x.numel() == 0 || y.numel() == 0) continue;
      const int64_t xs = x.offset() * int64_t(dtype_size(x.dtype())),
                    xe = xs + x.nbytes();
      const int64_t ys = y.offset() * int64_t(dtype_size(y.dtype())),
                    ye = ys + y.nbytes();
      SMELT_CHECK(xe <= ys || ye <= xs)
          << "call_into: " << name << ": outputs " << a << " and " << b
          << " overlap in memory (bytes [" << xs << ", " << xe << ") and [" << ys << ", " << ye
          << ") of one storage); give each output its own range";
    }
  }
}

}  // namespace

Tensor DispatchHook::random_state() {
  SMELT_CHECK(false) << "random ops (dropout) cannot be recorded by this dispatch hook";
  return Tensor();
}
void DispatchHook::set_random_state(const Tensor&) {
  SMELT_CHECK(false) << "random ops (dropout) cannot be recorded by this dispatch hook";
}

DispatchHook* dispatch_hook() { return t_hook; }

DispatchHook* set_dispatch_hook(DispatchHook* hook) {
  DispatchHook* prev = t_hook;
  t_hook = hook;
  return prev;
}

TensorMeta meta_of(const Tensor& t) { return {t.shape(), t.dtype()}; }

void set_saved_storage_log(std::vector<const Storage*>* log) { t_saved_log = log; }

SaveCopiesOf::SaveCopiesOf(const Storage* storage) : prev_(t_save_copies_of) {
  t_save_copies_of = storage;
}
SaveCopiesOf::~SaveCopiesOf() { t_save_copies_of = prev_; }

std::vector<TensorMeta> infer_shape(OpId op, const std::vector<TensorMeta>& inputs,
                                    const Attrs& attrs) {
  check_arity(op, inputs.size());
  const CustomOpRecord* custom = custom_op(op);
  std::vector<TensorMeta> out = custom ? custom_shape(*custom, inputs, attrs) : op_impl(op).shape(inputs, attrs);
  for (const TensorMeta& m : out) shape_numel(m.shape, op_name(op));  // negative sizes, size overflow
  return out;
}

std::vector<Tensor> compute(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                            const std::vector<TensorMeta>& out_metas) {
  detail::CurrentOp current(op_name(op));  // the site of what it allocates (smelt/memory.h)
  const OpImpl& impl = op_impl(op);
  if (const CustomOpRecord* custom = custom_op(op)) {
    if (custom->def.view) return {custom_view(*custom, inputs[0], attrs, out_metas[0])};
    std::vector<Tensor> outputs;
    for (const TensorMeta& m : out_metas) outputs.push_back(empty(m.shape, m.dtype));
    custom_kernel(*custom, inputs, attrs, outputs);
    return outputs;
  }
  if (is_view_op(op)) {
    SMELT_INTERNAL_CHECK(impl.view_kernel && !impl.kernel)
        << op_name(op) << ": a view op (non-zero views column) needs a view kernel and no kernel";
    return impl.view_kernel(inputs, attrs, out_metas);
  }
  SMELT_INTERNAL_CHECK(impl.kernel && !impl.view_kernel)
      << op_name(op) << ": an op with fresh outputs (zero views column) needs an out-variant "
      << "kernel";
  std::vector<Tensor> outputs;
  outputs.reserve(out_metas.size());
  for (const TensorMeta& m : out_metas) outputs.push_back(empty(m.shape, m.dtype));
  impl.kernel(inputs, attrs, outputs);
  return outputs;
}

void call_into(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs,
               const std::vector<Tensor>& outputs) {
  SMELT_CHECK(!is_view_op(op))
      << "call_into: " << op_name(op) << " is a view op (its output may share its input's memory), "
      << "so it cannot write into given outputs; run it with ops::call";
  for (size_t i = 0; i < inputs.size(); ++i) {
    SMELT_CHECK(!inputs[i].defined() || inputs[i].storage())
        << "call_into: " << op_name(op) << ": input " << i
        << " is symbolic (traced); call_into runs kernels on concrete tensors";
  }
  std::vector<TensorMeta> out_metas = infer_shape(op, input_metas(op, inputs), attrs);
  check_given_outputs(op, out_metas, outputs);
  if (const CustomOpRecord* custom = custom_op(op)) {
    custom_kernel(*custom, inputs, attrs, outputs);
  } else {
    op_impl(op).kernel(inputs, attrs, outputs);
  }
  // A write into existing memory, as an in-place op's: a tensor saved for backward that lives
  // there is refused on use instead of read with new values.
  for (const Tensor& o : outputs) o.storage()->bump_version();
}

// A user-defined op that writes inputs (OpDefinition::writes): eager only, never differentiated,
// its targets checked as an in-place op's are and their versions bumped after.
std::vector<Tensor> call_writing_op(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                                    const std::vector<TensorMeta>& out_metas) {
  const std::string name = std::string("custom op '") + op_name(op) + "'";
  SMELT_CHECK(!t_hook) << name << " writes its inputs in place, so it cannot be traced (smelt::compile, "
                       << "Graph::trace, ONNX import): traced graphs are functional. Call it eagerly, "
                       << "outside the traced function";
  if (autograd::grad_enabled()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      SMELT_CHECK(!inputs[i].requires_grad())
          << name << " writes its inputs in place, which is not differentiable, but input " << i
          << " requires grad; call it under NoGradGuard or on detached tensors";
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (mutates(op, int(i))) check_inplace_target(inputs[i], name.c_str());
  }
  std::vector<Tensor> outputs = compute(op, inputs, attrs, out_metas);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (mutates(op, int(i))) inputs[i].storage()->bump_version();
  }
  return outputs;
}

std::vector<Tensor> call(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  (void)kAdderRegistered;
  std::vector<TensorMeta> out_metas = infer_shape(op, input_metas(op, inputs), attrs);
  if (mutates_any(op)) return call_writing_op(op, inputs, attrs, out_metas);

  std::vector<Tensor> outputs = t_hook ? t_hook->record(op, inputs, attrs, out_metas)
                                       : compute(op, inputs, attrs, out_metas);
  SMELT_INTERNAL_CHECK(outputs.size() == out_metas.size())
      << op_name(op) << ": produced " << outputs.size() << " outputs, shape rule says "
      << out_metas.size();

  if (t_hook) return record_autograd(op, inputs, attrs, outputs);
  if (anomaly_detection_on()) check_anomaly(op, inputs, outputs);  // smelt/monitor.h
  // Views of a tensor that an in-place op rebased take its new history before being read.
  if (autograd::grad_enabled()) {
    for (const Tensor& t : inputs) {
      if (t.impl()->view_base) refresh_view_history(t.impl());
    }
  }
  outputs = record_autograd(op, inputs, attrs, std::move(outputs));
  record_views(op, attrs, inputs, outputs);
  return outputs;
}

Tensor call1(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  std::vector<Tensor> out = call(op, inputs, attrs);
  return out[0];
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  const int64_t lead = grad.dim() - int64_t(shape.size());
  SMELT_INTERNAL_CHECK(lead >= 0) << "sum_to: gradient " << shape_str(grad.shape())
                                  << " has fewer dims than " << shape_str(shape);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && grad.size(d) != 1)) dims.push_back(d);
  }
  Tensor r = dims.empty() ? grad : smelt::sum(grad, dims, /*keepdim=*/true);
  return r.shape() == shape ? r : r.reshape(shape);
}

}  // namespace smelt::ops
