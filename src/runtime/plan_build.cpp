// Plan::build's first half: the graph's nodes as steps over slots (plan_impl.h), with each
// intermediate's lifetime recorded as a memory-plan request.
#include <map>

#include "codegen/lower.h"
#include "fusion/fuse.h"
#include "ops/constant_weight.h"
#include "ops/dispatch.h"
#include "runtime/contraction_step.h"
#include "runtime/plan_impl.h"

namespace smelt::runtime {

namespace {

bool is_free_view(ops::OpId op) { return op == ops::OpId::reshape || op == ops::OpId::contiguous; }

// A graph with one node applying `node`'s op to fresh inputs: how a lone view is lowered to a
// copy kernel.
std::unique_ptr<ir::Graph> single_node_body(const ir::Node& node) {
  auto body = std::make_unique<ir::Graph>();
  std::vector<ir::Value*> in;
  for (const ir::Value* v : node.inputs) in.push_back(body->add_input(v->meta));
  ir::Node* n = body->add_node(node.op, in, node.attrs);
  for (ir::Value* v : n->outputs) body->add_output(v);
  return body;
}

}  // namespace

bool Plan::Impl::defer_compile() const {
  return options.backend == KernelBackend::Tiered && options.compile_after_runs > 1 &&
         !codegen::KernelCache::global().options().sync_compile;
}

void Plan::Impl::request_kernels() {
  std::vector<KernelStep*> pending;
  std::vector<std::shared_ptr<codegen::KernelHandle>> own;
  for (Step& s : steps) {
    if (s.kernel && !s.kernel->handle()) {
      pending.push_back(s.kernel.get());
      own.push_back(s.kernel->own_handle());
    }
  }
  if (own.empty()) return;
  std::vector<std::shared_ptr<codegen::KernelHandle>> handles =
      codegen::KernelCache::global().compile_handles(std::move(own));
  for (size_t i = 0; i < pending.size(); ++i) pending[i]->attach(handles[i]);
}

int Plan::Impl::add_slot(Slot s) {
  slots.push_back(std::move(s));
  return int(slots.size()) - 1;
}

int Plan::Impl::constant_slot(const Tensor& value) {
  return add_slot({ops::meta_of(value), ConstantSlot{value.contiguous()}});
}

int Plan::Impl::arena_slot(const ops::TensorMeta& meta, int first_step, int last_step,
                           std::string label) {
  Slot s{meta, ArenaSlot{int(requests.size())}};
  BufferRequest r;
  r.bytes = meta.nbytes();
  r.first_step = first_step;
  r.last_step = last_step;
  r.label = std::move(label);
  requests.push_back(r);
  return add_slot(std::move(s));
}

void Plan::Impl::read_at(int slot, int step) {
  if (const ArenaSlot* a = slots[size_t(root(slot))].as<ArenaSlot>()) {
    BufferRequest& r = requests[size_t(a->request)];
    r.last_step = std::max<int64_t>(r.last_step, step);
  }
}

// The graph output that `v` is read as only: a reshape (or contiguous) of `v` returned by the
// graph, `v` read nowhere else. Null otherwise.
const ir::Value* reshaped_output(const ir::Value* v, const std::map<const ir::Value*, int>& output_index) {
  if (v->uses.size() != 1 || output_index.count(v)) return nullptr;
  const ir::Node* reader = v->uses[0].node;
  if (!is_free_view(reader->op) || reader->inputs[0] != v) return nullptr;
  const ir::Value* r = reader->outputs[0];
  auto out = output_index.find(r);
  return out != output_index.end() && r->meta.nbytes() == v->meta.nbytes() ? r : nullptr;
}

// A graph output's own slot (allocated per call), or an arena slot. A value whose only reader
// reshapes it into a graph output is written straight into that output's memory (the reshape is
// then the same memory, not a copy: a bias gradient summed to (1, N) and returned as (N)).
int Plan::Impl::new_value_slot(const ir::Value* v, int step,
                               const std::map<const ir::Value*, int>& output_index) {
  int slot;
  auto out = output_index.find(v);
  if (out != output_index.end()) {
    slot = add_slot({v->meta, OutputSlot{out->second}});
  } else if (const ir::Value* r = cat_slices.count(v) ? nullptr : reshaped_output(v, output_index)) {
    const int output = add_slot({r->meta, OutputSlot{output_index.at(r)}});
    slot_of[r] = output;  // the reshape, when its node comes, finds its slot made
    slot = add_slot({v->meta, AliasSlot{output}});
  } else if (cat_slices.count(v)) {
    slot = cat_slice_slot(v, step);
  } else {
    std::string label = "%";
    label += std::to_string(v->id);
    slot = arena_slot(v->meta, step, step, std::move(label));
  }
  slot_of[v] = slot;
  return slot;
}

void Plan::Impl::build(const ir::Graph& graph) {
  lower =
      options.lower
          ? options.lower
          : LowerFn([](const ir::Graph& body, const std::string& name,
                       const codegen::LowerOptions& o) { return codegen::lower(body, name, o); });
  std::map<const ir::Value*, int> output_index;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const ir::Value* v = graph.outputs()[i];
    // A value that is an output twice, or an input or constant, is copied out once per slot.
    if (v->kind == ir::ValueKind::Computed && !output_index.count(v)) output_index[v] = int(i);
  }
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const ops::TensorMeta& meta = graph.inputs()[i]->meta;
    input_slots.push_back(add_slot({meta, InputSlot{int(i)}}));
    slot_of[graph.inputs()[i]] = input_slots.back();
    input_metas.push_back(meta);
  }
  for (const ir::Value* c : graph.constants()) slot_of[c] = constant_slot(c->constant);
  if (options.cat_in_place) plan_cat_slices(graph, output_index);
  for (const auto& node_ptr : graph.nodes()) {
    const ir::Node& node = *node_ptr;
    const int step = int(steps.size());
    std::vector<int> in;
    for (const ir::Value* v : node.inputs) {
      in.push_back(slot_of.at(v));
      read_at(in.back(), step);
    }
    // A slice, reshape or permute of a computed value whose readers all take strided operands (a
    // transformer's QKV split on its way to the attention products): a view, no copy.
    if (!in.empty() && strided_view(node, in[0], output_index)) {
      slot_of[node.outputs[0]] = strided_alias(node, in[0]);
      continue;
    }
    // Only strided_view's readers ever read a strided alias (it checked the whole chain).
    for (int slot : in) {
      SMELT_INTERNAL_CHECK(
          !is_strided(slot) || node.op == ops::OpId::matmul ||
          (!node.is_group() && ops::op_info(node.op).kind == ops::OpKind::Elementwise) ||
          fusion::group_pattern(node) == fusion::Pattern::Contraction)
          << "plan: " << node.name() << " would read a strided view as contiguous memory";
    }
    // A reshape whose operand was written into the output it reshapes to (new_value_slot).
    if (is_free_view(node.op) && slot_of.count(node.outputs[0])) continue;
    // A reshape of a contiguous value that is not a graph output is the same memory.
    if (is_free_view(node.op) && !output_index.count(node.outputs[0])) {
      slot_of[node.outputs[0]] = add_slot({node.outputs[0]->meta, AliasSlot{in[0]}});
      continue;
    }
    // A slice that is contiguous where it lies (one step of a sequence): that memory.
    if (std::optional<int64_t> at = in.empty() ? std::nullopt : contiguous_slice_offset(node, in[0], output_index)) {
      slot_of[node.outputs[0]] = add_slot({node.outputs[0]->meta, AliasSlot{in[0], *at}});
      continue;
    }
    if (add_cat(node, in)) continue;
    // A transpose read only as a matmul operand is handed over as a strided view: the GEMM takes
    // any strides, and the copy would cost a pass over the operand on every call.
    if (strided_operand_only(node, output_index)) {
      slot_of[node.outputs[0]] = strided_alias(node, in[0]);
      continue;
    }
    std::vector<int> out;
    for (const ir::Value* v : node.outputs) out.push_back(new_value_slot(v, step, output_index));
    // A node may become several steps (a contraction group: the product, then its epilogue): its
    // inputs are read until the last one, which writes its outputs.
    struct LastStep {
      Impl& p;
      const std::vector<int>& in;
      const std::vector<int>& out;
      ~LastStep() {
        const int last = int(p.steps.size()) - 1;
        for (int s : in) p.read_at(s, last);
        for (int s : out) {
          if (const ArenaSlot* a = p.slots[size_t(s)].as<ArenaSlot>()) {
            BufferRequest& r = p.requests[size_t(a->request)];
            r.first_step = last;
            r.last_step = std::max<int64_t>(r.last_step, last);
          }
        }
      }
    } last_step{*this, in, out};
    if (node.is_group()) {
      add_group(node, in, out);
    } else if (ops::is_view_op(node.op)) {
      add_kernel_step(*single_node_body(node), node.name(), in, out);
    } else {
      add_op_step(node, in, out);
    }
  }
  // Graph outputs that are inputs, constants or repeated values: copied at the end of a run.
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const ir::Value* v = graph.outputs()[i];
    auto it = output_index.find(v);
    if (it != output_index.end() && it->second == int(i)) {
      output_slots.push_back(slot_of.at(v));
      continue;
    }
    const int slot = add_slot({v->meta, OutputSlot{int(i)}});
    read_at(slot_of.at(v), int(steps.size()));
    Step copy;
    copy.kind = StepKind::Op;
    copy.what = "copy to output";
    copy.op = ops::OpId::contiguous;
    copy.in_slots = {slot_of.at(v)};
    copy.out_slots = {slot};
    steps.push_back(std::move(copy));
    output_slots.push_back(slot);
  }
  plan_updates(graph);
  stats.steps = int(steps.size());
}

void Plan::Impl::add_group(const ir::Node& node, const std::vector<int>& in,
                           const std::vector<int>& out) {
  const ir::Graph& body = *node.body;
  const bool contraction =
      fusion::group_pattern(node) == fusion::Pattern::Contraction && !body.nodes().empty();
  std::string name;
  for (const auto& n : body.nodes()) {
    if (!name.empty()) name += '_';
    name += n->name();
  }
  if (!contraction) {
    add_kernel_step(body, name, in, out);
    return;
  }
  if (options.epilogue_in_tile && add_tiled_contraction(body, name, in, out)) return;
  // The contraction into a temporary, then the epilogue reading it as its last argument.
  const ir::Node& first = *body.nodes().front();
  std::vector<int> first_in;
  for (const ir::Value* v : first.inputs) {
    if (v->kind == ir::ValueKind::Constant) {  // fusion moves constants into the body (a weight)
      first_in.push_back(constant_slot(v->constant));
      continue;
    }
    SMELT_INTERNAL_CHECK(v->is_graph_input())
        << "plan: a contraction group's first node reads a computed value";
    size_t i = 0;
    while (body.inputs()[i] != v) ++i;
    first_in.push_back(in[i]);
  }
  const int step = int(steps.size());
  const int temp = arena_slot(first.outputs[0]->meta, step, step + 1);
  add_op_step(first, first_in, {temp});
  std::vector<int> epilogue_in = in;
  epilogue_in.push_back(temp);
  add_kernel_step(*codegen::contraction_epilogue_body(body), name, epilogue_in, out);
}

// An op whose weight is one of the plan's constants may keep it converted or packed
// (ops/constant_weight.h): the plan never writes its constants.
void Plan::Impl::mark_constant_weight(ops::OpId op, const std::vector<int>& operand_slots,
                                      ops::Attrs* attrs) const {
  const int w = ops::constant_weight_input(op);
  if (w >= 0 && size_t(w) < operand_slots.size() && slots[size_t(operand_slots[size_t(w)])].as<ConstantSlot>()) {
    attrs->set("weight_constant", int64_t(1));
  }
}

// `node`'s op by its out-variant eager kernel, reading `in` and writing `out`.
void Plan::Impl::add_op_step(const ir::Node& node, const std::vector<int>& in,
                             const std::vector<int>& out) {
  Step s;
  s.kind = StepKind::Op;
  s.what = node.name();
  s.op = node.op;
  s.attrs = node.attrs;
  mark_constant_weight(s.op, in, &s.attrs);
  std::vector<bool> used;
  for (const ir::Value* v : node.outputs) used.push_back(!v->is_dead());
  ops::mark_unused_outputs(s.op, used, &s.attrs);
  s.in_slots = in;
  s.out_slots = out;
  steps.push_back(std::move(s));
  ++stats.op_steps;
}

void Plan::Impl::add_kernel_step(const ir::Graph& body, const std::string& name,
                                 const std::vector<int>& in, const std::vector<int>& out) {
  codegen::LowerResult lowered = lower(body, name, codegen::LowerOptions{});
  Step s;
  s.in_slots = in;
  s.out_slots = out;
  if (!lowered.kernel) {
    s.kind = StepKind::Interpret;
    s.what = name + " (interpreted: " + lowered.reason + ")";
    s.body = body.clone();
    ++stats.interpreted;
  } else {
    s.kind = StepKind::Kernel;
    s.what = lowered.kernel->name;
    s.arg_slots = in;
    for (const Tensor& c : lowered.constants) s.arg_slots.push_back(constant_slot(c));
    s.arg_slots.insert(s.arg_slots.end(), out.begin(), out.end());
    s.kernel = std::make_unique<KernelStep>(std::move(*lowered.kernel));
    ++stats.kernels;
  }
  steps.push_back(std::move(s));
}

// A contraction group in one step, its epilogue in the GEMM's tiles (runtime/contraction_step.h);
// false when the tile form does not apply (the caller then makes the two steps).
bool Plan::Impl::add_tiled_contraction(const ir::Graph& body, const std::string& name,
                                       const std::vector<int>& in, const std::vector<int>& out) {
  std::optional<TiledContraction> tiled = codegen::lower_tiled_contraction(body, name, lower);
  if (!tiled) return false;
  const ir::Node& first = *body.nodes().front();
  Step s;
  s.kind = StepKind::TiledContraction;
  s.what = name + " (epilogue in the GEMM's tiles)";
  s.op = first.op;
  s.attrs = first.attrs;
  for (int i : tiled->operand_inputs) s.op_slots.push_back(in[size_t(i)]);
  mark_constant_weight(s.op, s.op_slots, &s.attrs);
  s.product_slot =
      tiled->product_output >= 0
          ? out[size_t(tiled->product_output)]
          : arena_slot(first.outputs[0]->meta, int(steps.size()), int(steps.size()) + 1);
  s.in_slots = in;
  s.out_slots = out;
  s.arg_slots = in;
  s.arg_slots.push_back(s.product_slot);
  for (const Tensor& c : tiled->lowered.constants) s.arg_slots.push_back(constant_slot(c));
  s.arg_slots.insert(s.arg_slots.end(), out.begin(), out.end());
  s.kernel = std::make_unique<KernelStep>(std::move(*tiled->lowered.kernel));
  // The product finished in place in the group's one output: oneDNN may apply the epilogue itself.
  if (s.op == ops::OpId::conv2d_blocked && tiled->product_output == 0 && out.size() == 1) {
    s.post_ops = conv_epilogue_as_post_ops(body, [&](const ir::Value* v) -> const Tensor* {
      for (size_t i = 0; i < body.inputs().size(); ++i) {
        const ConstantSlot* c = slots[size_t(in[i])].as<ConstantSlot>();
        if (body.inputs()[i] == v && c) return &c->value;
      }
      return nullptr;
    });
    if (s.post_ops) {
      s.post_ops->ops.bias = s.post_ops->bias.defined() ? s.post_ops->bias.data<float>() : nullptr;
      s.what += s.post_ops->residual_input >= 0 ? " [bias/residual/clamp as oneDNN post-ops]"
                                                : " [bias/clamp as oneDNN post-ops]";
    }
  }
  steps.push_back(std::move(s));
  ++stats.kernels;
  ++stats.op_steps;
  ++stats.tiled_contractions;
  return true;
}

}  // namespace smelt::runtime
