#include "ops/inplace.h"

#include <algorithm>

#include "autograd/node.h"
#include "kernels/reduce.h"
#include "kernels/transpose.h"
#include "ops/custom_ops.h"
#include "ops/dispatch.h"
#include "smelt/autograd.h"
#include "smelt/ops.h"
#include "tensor/capture.h"
#include "tensor/overlap.h"

namespace smelt::ops {

namespace {

// How a view is made from its root: a chain of view ops, the last one here.
class ViewStep final : public ViewFn {
 public:
  Ref<ViewStep> parent;  // null: this op was applied to the root itself
  OpId op = OpId::reshape;
  Attrs attrs;
  bool replayable = false;  // every op in the chain is a pure view op of its first input
};

bool is_replayable_view_op(OpId op) {
  if (const CustomOpRecord* custom = custom_op(op)) return bool(custom->def.view);
  return op == OpId::reshape || op == OpId::permute || op == OpId::slice || op == OpId::expand;
}

// The view ops of `step`'s chain applied to `root` (any tensor of the root's shape: the root to
// rebuild a view's history, a gradient to cut out the view's region).
Tensor replay(const ViewStep& step, Tensor root) {
  std::vector<const ViewStep*> chain;
  for (const ViewStep* s = &step; s; s = s->parent.get()) chain.push_back(s);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    root = call1((*it)->op, {root}, (*it)->attrs);
  return root;
}

// Where a tensor's elements lie: enough to find, at backward time, which elements of a root
// an in-place write through a view covered.
struct Layout {
  Shape shape, strides;
  int64_t offset = 0;
  explicit Layout(const Tensor& t) : shape(t.shape()), strides(t.strides()), offset(t.offset()) {}
};

// Calls f(offset) for each element of `t` in row-major order (offsets in elements from the
// storage start).
template <class F>
void for_each_offset(const Layout& t, F f) {
  const int64_t n = shape_numel(t.shape), rank = int64_t(t.shape.size());
  std::vector<int64_t> index(size_t(rank), 0);
  int64_t off = t.offset;
  for (int64_t i = 0; i < n; ++i) {
    f(off);
    for (int64_t d = rank - 1; d >= 0; --d) {
      off += t.strides[d];
      if (++index[d] < t.shape[d]) break;
      off -= t.strides[d] * t.shape[d];
      index[d] = 0;
    }
  }
}

// Bool (root's shape): true where the root's element lies in memory that `view` covers.
Tensor region_mask(const Layout& root, const Layout& view) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for_each_offset(view, [&](int64_t off) {
    lo = std::min(lo, off);
    hi = std::max(hi, off);
  });
  std::vector<uint8_t> covered(lo <= hi ? size_t(hi - lo + 1) : 0, 0);
  for_each_offset(view, [&](int64_t off) { covered[size_t(off - lo)] = 1; });
  Tensor mask = empty(root.shape, DType::Bool);
  bool* m = mask.data<bool>();
  for_each_offset(root,
                  [&](int64_t off) { *m++ = off >= lo && off <= hi && covered[size_t(off - lo)]; });
  return mask;
}

// The history of a root after an in-place write through one of its views: the root's old
// history gets the gradient outside the view's region, the written result gets the region.
class CopySlices final : public autograd::Node {
 public:
  CopySlices(Ref<ViewStep> view, const Tensor& root, const Tensor& written)
      : Node(1), view_(std::move(view)), root_(root), written_(written) {}
  const char* name() const override { return "CopySlices"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {};
    // where() rather than a multiply by a mask: an inf or NaN gradient outside stays exact.
    // The region is found from layouts here, so a forward that never runs backward pays nothing.
    Tensor outside = where(region_mask(root_, written_), scalar_like(g, 0.0), g);
    return {outside, replay(*view_, g)};
  }

 private:
  Ref<ViewStep> view_;
  Layout root_, written_;
};

TensorImpl* root_of(const Tensor& t) {
  return t.impl()->view_base ? t.impl()->view_base.get() : t.impl();
}

bool is_leaf_requiring_grad(const TensorImpl* t) { return t->requires_grad && !t->grad_fn; }

const bool kRefresherRegistered = [] {
  autograd::set_view_history_refresher(refresh_view_history);
  return true;
}();

}  // namespace

void record_views(OpId op, const Attrs& attrs, const std::vector<Tensor>& inputs,
                  const std::vector<Tensor>& outputs) {
  (void)kRefresherRegistered;
  for (const Tensor& out : outputs) {
    if (!out.defined() || !out.storage()) continue;
    for (size_t j = 0; j < inputs.size(); ++j) {
      const Tensor& in = inputs[j];
      if (in.storage() != out.storage() || in.impl() == out.impl()) continue;
      TensorImpl* o = out.impl();
      const TensorImpl* i = in.impl();
      auto* parent = static_cast<ViewStep*>(i->view_fn.get());
      auto step = make_ref<ViewStep>();
      step->parent = parent;
      step->op = op;
      step->attrs = attrs;
      step->replayable = j == 0 && is_replayable_view_op(op) && (!parent || parent->replayable);
      o->view_base = i->view_base ? i->view_base : in.impl_ref();
      o->view_fn = step;
      const bool without_history =
          !autograd::grad_enabled() || (i->view_base && i->view_history == kViewWithoutHistory);
      o->view_history = without_history ? kViewWithoutHistory : o->view_base->history_version;
      break;
    }
  }
}

void refresh_view_history(TensorImpl* v) {
  if (!v->view_base || v->view_history == kViewWithoutHistory) return;
  TensorImpl* root = v->view_base.get();
  if (v->view_history == root->history_version) return;
  const auto& step = static_cast<const ViewStep&>(*v->view_fn);
  SMELT_CHECK(step.replayable)
      << "a view made by " << op_name(step.op) << " of a tensor that was changed in place "
      << "afterwards cannot take the tensor's new autograd history; clone() the view, or make "
         "it again after the in-place change";
  autograd::EnableGradGuard grad_on;
  Tensor rebuilt = replay(step, Tensor(v->view_base));
  v->requires_grad = rebuilt.requires_grad();
  v->grad_fn = rebuilt.impl()->grad_fn;
  v->output_nr = rebuilt.impl()->output_nr;
  v->view_history = root->history_version;
}

void check_inplace_target(const Tensor& self, const char* op) {
  SMELT_CHECK(self.defined()) << op << ": the tensor is undefined (default-constructed)";
  SMELT_CHECK(self.storage()) << op
                              << ": the tensor has no data (a symbolic tensor inside a "
                                 "trace); in-place ops cannot be traced, use the "
                                 "functional form";
  SMELT_CHECK(!detail::captured_from_outside(self.storage().get()))
      << op << ": a compiled function changes a tensor it captured (" << dtype_name(self.dtype())
      << " " << shape_str(self.shape())
      << ") in place while it is traced; the change would happen once, at the trace, not on "
         "every call. Valid: compute the new value with the functional form, return it, and copy_ "
         "it into the tensor outside the compiled function";
  SMELT_CHECK(!has_internal_overlap(self))
      << op << ": the tensor " << shape_str(self.shape()) << " with strides "
      << shape_str(self.strides())
      << " has several elements at one memory address (an expanded or overlapping view), so "
         "an in-place write is ambiguous; write into a clone() instead";
  if (!autograd::grad_enabled()) return;
  SMELT_CHECK(!is_leaf_requiring_grad(self.impl()))
      << op
      << ": a leaf tensor that requires grad cannot be changed in place while grad mode "
         "is on; wrap the update in a NoGradGuard";
  SMELT_CHECK(!is_leaf_requiring_grad(root_of(self)))
      << op
      << ": the tensor is a view of a leaf tensor that requires grad, which cannot be "
         "changed in place while grad mode is on; wrap the update in a NoGradGuard, or "
         "change a clone() of the leaf";
}

EagerWhileTracing::EagerWhileTracing(const char* op, const std::vector<Tensor>& operands)
    : hook_(dispatch_hook()) {
  if (!hook_) return;
  for (const Tensor& t : operands) {
    SMELT_CHECK(!t.defined() || t.storage())
        << op
        << ": an operand is symbolic (inside a trace); in-place ops cannot be traced, use "
           "the functional form";
  }
  set_dispatch_hook(nullptr);
}
EagerWhileTracing::~EagerWhileTracing() {
  if (hook_) set_dispatch_hook(hook_);
}

void write_into(const Tensor& dst, const Tensor& src) {
  SMELT_INTERNAL_CHECK(src.dtype() == dst.dtype()) << "write_into: dtypes differ";
  switch (mem_overlap(dst, src)) {
    case MemOverlap::Same:
      break;  // src is dst's memory in dst's layout: the values are already there
    case MemOverlap::Partial:
      kernels::copy_strided(dst, kernels::contiguous_copy(src.detach()));
      break;
    case MemOverlap::None: kernels::copy_strided(dst, src); break;
  }
  dst.storage()->bump_version();
}

Tensor& inplace_apply(Tensor& self, const char* op, const std::vector<Tensor>& operands,
                      const InplaceFn& f) {
  check_inplace_target(self, op);
  TensorImpl* s = self.impl();
  TensorImpl* root = root_of(self);
  bool recording = false;
  if (autograd::grad_enabled()) {
    refresh_view_history(s);
    recording = s->requires_grad || root->requires_grad;
    for (const Tensor& t : operands) recording |= t.defined() && t.requires_grad();
  }
  const auto* step = static_cast<const ViewStep*>(s->view_fn.get());
  if (recording && s->view_base) {
    SMELT_CHECK(step->replayable)
        << op << ": the tensor is a view made by " << op_name(step->op)
        << ", which autograd cannot replay to record the in-place change; clone() it first";
    SMELT_CHECK(s->view_history != kViewWithoutHistory || !root->requires_grad)
        << op
        << ": the tensor is a view made under no_grad of a tensor that requires grad, so "
           "the change cannot be recorded; make the view with grad mode on, or change it "
           "under no_grad too";
  }

  Tensor result;
  {
    EagerWhileTracing eager(op, operands);
    SaveCopiesOf copies(self.storage().get());
    autograd::NoGradGuard no_grad_unless_recording;
    if (recording) autograd::set_grad_enabled(true);
    result = f(self);
  }
  SMELT_CHECK(result.shape() == self.shape())
      << op << ": the result has shape " << shape_str(result.shape())
      << " but the tensor written in place has shape " << shape_str(self.shape())
      << "; the operands must broadcast to the written tensor's shape";
  SMELT_CHECK(result.dtype() == self.dtype())
      << op << ": the result has dtype " << dtype_name(result.dtype())
      << " but the tensor written in place has dtype " << dtype_name(self.dtype());
  write_into(self, result);
  if (!recording || !result.requires_grad()) return self;

  // Rebase: the written tensor's history is now the result's.
  SMELT_INTERNAL_CHECK(result.grad_fn()) << op << ": the functional form returned a leaf";
  if (s->view_base) {
    Ref<autograd::Node> copy_slices(
        new CopySlices(Ref<ViewStep>(const_cast<ViewStep*>(step)), Tensor(s->view_base), self));
    copy_slices->next = {autograd::gradient_edge(Tensor(s->view_base)),
                         autograd::gradient_edge(result)};
    root->grad_fn = Ref<GradNode>(copy_slices.get());
    root->output_nr = 0;
    root->requires_grad = true;
  }
  ++root->history_version;
  s->grad_fn = result.impl()->grad_fn;
  s->output_nr = result.impl()->output_nr;
  s->requires_grad = true;
  if (s->view_base) s->view_history = root->history_version;
  return self;
}

}  // namespace smelt::ops
