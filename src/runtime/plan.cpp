#include "runtime/plan.h"

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "codegen/lower.h"
#include "ops/dispatch.h"
#include "runtime/contraction_step.h"
#include "runtime/kernel_step.h"
#include "runtime/memory_plan.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "trace/interpreter.h"

namespace smelt::runtime {

namespace {

enum class SlotKind : uint8_t { Input, Constant, Arena, Output, Alias };

struct Slot {
  SlotKind kind = SlotKind::Arena;
  ops::TensorMeta meta;
  int index = 0;       // Input: graph input; Output: graph output; Alias: the slot it aliases
  int64_t offset = 0;  // Arena: byte offset (after planning)
  int request = -1;    // Arena: its memory-plan request
  Tensor constant;     // Constant
};

enum class StepKind : uint8_t { Kernel, Op, Interpret, TiledContraction };

struct Step {
  StepKind kind = StepKind::Op;
  std::string what;  // for describe(): the op or the kernel's name, and why interpreted
  std::vector<int> in_slots, out_slots;
  // Op
  ops::OpId op{};
  ops::Attrs attrs;
  // Kernel: arguments in the kernel's order
  std::unique_ptr<KernelStep> kernel;
  std::vector<int> arg_slots;
  // Interpret
  std::unique_ptr<ir::Graph> body;
  // TiledContraction: the op (op, attrs) reads op_slots and writes its product into product_slot;
  // `kernel` (tiled) is the epilogue, run on each finished tile (in_slots: the group's inputs).
  std::vector<int> op_slots;
  int product_slot = -1;
};

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

struct Plan::Impl {
  PlanOptions options;
  std::vector<Slot> slots;
  std::vector<Step> steps;
  std::vector<int> input_slots, output_slots;
  std::vector<ops::TensorMeta> input_metas;
  std::vector<BufferRequest> requests;
  MemoryPlan memory;
  Ref<Storage> arena;
  std::vector<Tensor> arena_tensors;  // per slot, for Arena slots (views into the arena)
  PlanStats stats;
  std::mutex mutex;  // one run at a time: the arena is shared by the calls
  Profile profile;
  std::vector<int32_t> step_profile_id;  // per step: its profile kernel id, bytes and flops
  std::vector<int64_t> step_bytes, step_flops;

  // Per run: each slot's tensor and data pointer.
  std::vector<Tensor> tensors;
  std::vector<void*> pointers;

  int64_t runs = 0;
  // SMELT_SYNC_COMPILE=1 asks for compiled kernels from the first call: no deferral then.
  bool defer_compile() const {
    return options.backend == KernelBackend::Tiered && options.compile_after_runs > 1 &&
           !codegen::KernelCache::global().options().sync_compile;
  }

  int add_slot(Slot s) {
    slots.push_back(std::move(s));
    return int(slots.size()) - 1;
  }

  // The slot holding `v`, made on first sight for inputs and constants.
  std::map<const ir::Value*, int> slot_of;

  int root(int slot) const {
    while (slots[size_t(slot)].kind == SlotKind::Alias) slot = slots[size_t(slot)].index;
    return slot;
  }

  // Records that `slot` is read at step `step` (extends its buffer's lifetime).
  void read_at(int slot, int step) {
    const Slot& s = slots[size_t(root(slot))];
    if (s.kind == SlotKind::Arena) {
      BufferRequest& r = requests[size_t(s.request)];
      r.last_step = std::max<int64_t>(r.last_step, step);
    }
  }

  int new_value_slot(const ir::Value* v, int step, const std::map<const ir::Value*, int>& output_index) {
    Slot s;
    s.meta = v->meta;
    auto out = output_index.find(v);
    if (out != output_index.end()) {
      s.kind = SlotKind::Output;
      s.index = out->second;
    } else {
      s.kind = SlotKind::Arena;
      s.request = int(requests.size());
      BufferRequest r;
      r.bytes = shape_numel(v->meta.shape) * int64_t(dtype_size(v->meta.dtype));
      r.first_step = step;
      r.last_step = step;
      r.label = "%" + std::to_string(v->id);
      requests.push_back(r);
    }
    const int slot = add_slot(std::move(s));
    slot_of[v] = slot;
    return slot;
  }

  int temp_slot(const ops::TensorMeta& meta, int step) {
    Slot s;
    s.meta = meta;
    s.request = int(requests.size());
    BufferRequest r;
    r.bytes = shape_numel(meta.shape) * int64_t(dtype_size(meta.dtype));
    r.first_step = step;
    r.last_step = step + 1;
    requests.push_back(r);
    return add_slot(std::move(s));
  }

  void build(const ir::Graph& graph);
  bool hoist_constant_node(const ir::Node& node, const std::vector<int>& in,
                           const std::map<const ir::Value*, int>& output_index);
  void add_group(const ir::Node& node, const std::vector<int>& in, const std::vector<int>& out);
  bool add_tiled_contraction(const ir::Graph& body, const std::string& name, const std::vector<int>& in,
                             const std::vector<int>& out);
  void add_kernel_step(const ir::Graph& body, const std::string& name, const std::vector<int>& in,
                       const std::vector<int>& out);
  void instantiate();
  void measure_steps();
  void offer_inplace();
  void bind(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);
  void run_step(Step& step);
};

void Plan::Impl::build(const ir::Graph& graph) {
  std::map<const ir::Value*, int> output_index;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const ir::Value* v = graph.outputs()[i];
    // A value that is an output twice, or an input or constant, is copied out once per slot.
    if (v->kind == ir::ValueKind::Computed && !output_index.count(v)) output_index[v] = int(i);
  }
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    Slot s;
    s.kind = SlotKind::Input;
    s.meta = graph.inputs()[i]->meta;
    s.index = int(i);
    input_slots.push_back(add_slot(s));
    slot_of[graph.inputs()[i]] = input_slots.back();
    input_metas.push_back(s.meta);
  }
  for (const ir::Value* c : graph.constants()) {
    Slot s;
    s.kind = SlotKind::Constant;
    s.meta = c->meta;
    s.constant = c->constant.contiguous();
    slot_of[c] = add_slot(s);
  }
  for (const auto& node_ptr : graph.nodes()) {
    const ir::Node& node = *node_ptr;
    const int step = int(steps.size());
    std::vector<int> in;
    for (const ir::Value* v : node.inputs) {
      in.push_back(slot_of.at(v));
      read_at(in.back(), step);
    }
    // A reshape of a contiguous value that is not a graph output is the same memory.
    if (is_free_view(node.op) && !output_index.count(node.outputs[0])) {
      Slot s;
      s.kind = SlotKind::Alias;
      s.meta = node.outputs[0]->meta;
      s.index = in[0];
      slot_of[node.outputs[0]] = add_slot(s);
      continue;
    }
    if (hoist_constant_node(node, in, output_index)) continue;
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
          const Slot& slot = p.slots[size_t(s)];
          if (slot.kind == SlotKind::Arena) {
            p.requests[size_t(slot.request)].first_step = last;
            p.requests[size_t(slot.request)].last_step = std::max<int64_t>(p.requests[size_t(slot.request)].last_step, last);
          }
        }
      }
    } last_step{*this, in, out};
    if (node.is_group()) {
      add_group(node, in, out);
    } else if (ops::op_info(node.op).views != 0) {
      add_kernel_step(*single_node_body(node), node.name(), in, out);
    } else {
      Step s;
      s.kind = StepKind::Op;
      s.what = node.name();
      s.op = node.op;
      s.attrs = node.attrs;
      s.in_slots = in;
      s.out_slots = out;
      steps.push_back(std::move(s));
      ++stats.op_steps;
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
    Slot s;
    s.kind = SlotKind::Output;
    s.meta = v->meta;
    s.index = int(i);
    const int slot = add_slot(s);
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
  stats.steps = int(steps.size());
}

namespace {

bool pure_graph(const ir::Graph& g) {
  for (const auto& n : g.nodes()) {
    if (n->body ? !pure_graph(*n->body) : !ops::is_pure(n->op)) return false;
  }
  return true;
}

}  // namespace

// A pure node reading only constants (a transpose of a captured weight that `fold` left because
// of its size limit) is computed once, here: its results become constants of the plan instead of
// work on every call. Graph outputs are left to run (each call returns fresh tensors).
bool Plan::Impl::hoist_constant_node(const ir::Node& node, const std::vector<int>& in,
                                     const std::map<const ir::Value*, int>& output_index) {
  for (int slot : in) {
    if (slots[size_t(slot)].kind != SlotKind::Constant) return false;
  }
  for (const ir::Value* v : node.outputs) {
    if (output_index.count(v)) return false;
  }
  if (node.body ? !pure_graph(*node.body) : !ops::is_pure(node.op)) return false;
  std::vector<Tensor> args;
  for (int slot : in) args.push_back(slots[size_t(slot)].constant);
  std::vector<ops::TensorMeta> metas;
  for (const ir::Value* v : node.outputs) metas.push_back(v->meta);
  NoGradGuard no_grad;
  std::vector<Tensor> results;
  try {
    results = node.body ? trace::interpret(*node.body, args) : ops::compute(node.op, args, node.attrs, metas);
  } catch (const Error&) {
    return false;  // a node that fails on its data fails when run, as the unoptimized graph does
  }
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    Slot c;
    c.kind = SlotKind::Constant;
    c.meta = node.outputs[k]->meta;
    c.constant = results[k].contiguous();
    slot_of[node.outputs[k]] = add_slot(c);
  }
  ++stats.hoisted;
  return true;
}

void Plan::Impl::add_group(const ir::Node& node, const std::vector<int>& in, const std::vector<int>& out) {
  const ir::Graph& body = *node.body;
  const bool contraction = node.attrs.has("fusion") && node.attrs.get_string("fusion") == "contraction" &&
                           !body.nodes().empty();
  std::string name;
  for (const auto& n : body.nodes()) name += (name.empty() ? "" : "_") + std::string(n->name());
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
      Slot cs;
      cs.kind = SlotKind::Constant;
      cs.meta = v->meta;
      cs.constant = v->constant.contiguous();
      first_in.push_back(add_slot(cs));
      continue;
    }
    SMELT_INTERNAL_CHECK(v->is_graph_input()) << "plan: a contraction group's first node reads a computed value";
    size_t i = 0;
    while (body.inputs()[i] != v) ++i;
    first_in.push_back(in[i]);
  }
  const int step = int(steps.size());
  const int temp = temp_slot(first.outputs[0]->meta, step);
  Step s;
  s.kind = StepKind::Op;
  s.what = first.name();
  s.op = first.op;
  s.attrs = first.attrs;
  s.in_slots = first_in;
  s.out_slots = {temp};
  steps.push_back(std::move(s));
  ++stats.op_steps;
  std::vector<int> epilogue_in = in;
  epilogue_in.push_back(temp);
  add_kernel_step(*contraction_epilogue_body(body), name, epilogue_in, out);
}

void Plan::Impl::add_kernel_step(const ir::Graph& body, const std::string& name,
                                 const std::vector<int>& in, const std::vector<int>& out) {
  codegen::LowerResult lowered = codegen::lower(body, name);
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
    for (const Tensor& c : lowered.constants) {
      Slot cs;
      cs.kind = SlotKind::Constant;
      cs.meta = ops::meta_of(c);
      cs.constant = c;
      s.arg_slots.push_back(add_slot(cs));
    }
    s.arg_slots.insert(s.arg_slots.end(), out.begin(), out.end());
    s.kernel = std::make_unique<KernelStep>(std::move(*lowered.kernel), options.backend, defer_compile());
    ++stats.kernels;
  }
  steps.push_back(std::move(s));
}

// Bytes a step moves (each distinct slot it reads or writes, once) and the flops of its work
// (a multiply-add counts two; elementwise math one per call; copies none).
void Plan::Impl::measure_steps() {
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    std::set<int> seen;
    int64_t bytes = 0;
    for (const std::vector<int>* list : {&s.in_slots, &s.out_slots, &s.arg_slots, &s.op_slots}) {
      for (int slot : *list) {
        if (!seen.insert(root(slot)).second) continue;
        const ops::TensorMeta& m = slots[size_t(slot)].meta;
        bytes += shape_numel(m.shape) * int64_t(dtype_size(m.dtype));
      }
    }
    int64_t flops = 0;
    if (s.kernel) {  // a kernel step, or a tiled contraction's epilogue
      const codegen::LoopKernel& k = s.kernel->kernel();
      int64_t points = 1;
      for (int64_t e : k.outer) points *= e;
      for (int64_t e : k.inner) points *= e;
      for (const codegen::Expr& e : k.exprs) flops += e.kind == codegen::ExprKind::Call ? points : 0;
    }
    const bool contraction_op = s.op == ops::OpId::matmul || s.op == ops::OpId::conv2d;
    if ((s.kind == StepKind::Op || s.kind == StepKind::TiledContraction) && contraction_op) {
      const std::vector<int>& operands = s.kind == StepKind::Op ? s.in_slots : s.op_slots;
      const int product = s.kind == StepKind::Op ? s.out_slots[0] : s.product_slot;
      const ops::TensorMeta& b = slots[size_t(operands[1])].meta;
      // matmul: K is the last dim of the first operand; conv2d: the weight's elements per output channel.
      const int64_t per_output = s.op == ops::OpId::matmul
                                     ? slots[size_t(operands[0])].meta.shape.back()
                                     : shape_numel(b.shape) / std::max<int64_t>(b.shape[0], 1);
      flops += 2 * shape_numel(slots[size_t(product)].meta.shape) * per_output;
    }
    step_profile_id.push_back(profile.kernel_id("step " + std::to_string(i) + " " + s.what));
    step_bytes.push_back(bytes);
    step_flops.push_back(flops);
  }
}

// In-place offers for the memory planner: a pointwise kernel may write an output over an input
// that dies at this step when they have the same size and the kernel reads that input only at
// the positions it stores the output (each element is read before it is overwritten, by the
// same iteration: no other iteration, lane or tile reads it later).
void Plan::Impl::offer_inplace() {
  std::set<int> offered;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (s.kind != StepKind::Kernel) continue;
    const codegen::LoopKernel& k = s.kernel->kernel();
    if (k.stages != 1 || !k.reductions.empty()) continue;
    for (size_t out = 0; out < k.args.size(); ++out) {
      const Slot& o = slots[size_t(s.arg_slots[out])];
      if (!k.args[out].output || o.kind != SlotKind::Arena || requests[size_t(o.request)].inplace_of >= 0) continue;
      const codegen::Access* store = nullptr;
      for (const codegen::Store& st : k.stores) {
        if (k.accesses[size_t(st.access)].arg == int(out)) store = &k.accesses[size_t(st.access)];
      }
      if (!store) continue;
      for (size_t in = 0; in < k.args.size(); ++in) {
        const int root_slot = root(s.arg_slots[in]);
        const Slot& a = slots[size_t(root_slot)];
        if (k.args[in].output || a.kind != SlotKind::Arena || offered.count(root_slot)) continue;
        const BufferRequest& r = requests[size_t(a.request)];
        if (r.last_step != int64_t(i) || r.bytes != requests[size_t(o.request)].bytes) continue;
        // Positions are counted in elements: equal accesses over elements of different sizes
        // (an f32 input cast to f64 of the same byte size) touch different bytes.
        if (dtype_size(k.args[in].dtype) != dtype_size(k.args[out].dtype)) continue;
        // Every argument of this kernel backed by that buffer reads it exactly where `out` is stored.
        bool same_positions = true;
        for (size_t arg = 0; arg < k.args.size(); ++arg) {
          if (arg == out || root(s.arg_slots[arg]) != root_slot) continue;
          for (const codegen::Access& acc : k.accesses) {
            if (acc.arg != int(arg)) continue;
            same_positions &= acc.offset == store->offset && acc.outer_strides == store->outer_strides &&
                              acc.inner_strides == store->inner_strides;
          }
        }
        if (!same_positions) continue;
        requests[size_t(o.request)].inplace_of = a.request;
        offered.insert(root_slot);
        break;
      }
    }
  }
}

void Plan::Impl::instantiate() {
  measure_steps();
  if (options.memory_plan) offer_inplace();
  MemoryPlanOptions memory_options;
  memory_options.enabled = options.memory_plan;
  if (options.edit_requests) options.edit_requests(requests);
  memory = plan_memory(requests, memory_options);
  check_plan(requests, memory);  // a plan with overlapping live buffers would corrupt results
  stats.arena_bytes = memory.arena_bytes;
  stats.naive_bytes = memory.naive_bytes;
  stats.lower_bound = memory.lower_bound_bytes;
  Tensor arena_tensor = empty({std::max<int64_t>(memory.arena_bytes, 1)}, DType::UInt8);
  arena = arena_tensor.storage();
  const int64_t arena_offset = arena_tensor.offset();
  tensors.resize(slots.size());
  pointers.resize(slots.size());
  arena_tensors.resize(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& s = slots[i];
    if (s.kind == SlotKind::Arena) {
      s.offset = memory.offsets[size_t(s.request)];
      const int64_t elem = int64_t(dtype_size(s.meta.dtype));
      SMELT_INTERNAL_CHECK((arena_offset + s.offset) % elem == 0) << "plan: a misaligned arena slot";
      arena_tensors[i] = make_tensor(arena, s.meta.shape, contiguous_strides(s.meta.shape),
                                     (arena_offset + s.offset) / elem, s.meta.dtype);
    }
  }
}

// Each slot's tensor and pointer for this run: arena and constant slots are fixed, inputs and
// outputs are this call's, aliases view their root with their own shape.
void Plan::Impl::bind(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    switch (s.kind) {
      case SlotKind::Input: tensors[i] = inputs[size_t(s.index)]; break;
      case SlotKind::Constant: tensors[i] = s.constant; break;
      case SlotKind::Arena: tensors[i] = arena_tensors[i]; break;
      case SlotKind::Output: tensors[i] = outputs[size_t(s.index)]; break;
      case SlotKind::Alias: {
        const Tensor& base = tensors[size_t(s.index)];  // aliases follow the slot they alias
        tensors[i] = make_tensor(base.storage(), s.meta.shape, contiguous_strides(s.meta.shape),
                                 base.offset(), s.meta.dtype);
        break;
      }
    }
    pointers[i] = tensors[i].raw_data();
  }
}

void Plan::Impl::run_step(Step& step) {
  switch (step.kind) {
    case StepKind::Kernel: {
      step.kernel->run(pointers, step.arg_slots);
      return;
    }
    case StepKind::Op: {
      std::vector<Tensor> in, out;
      for (int s : step.in_slots) in.push_back(tensors[size_t(s)]);
      for (int s : step.out_slots) out.push_back(tensors[size_t(s)]);
      if (step.op == ops::OpId::contiguous) {
        out[0].copy_(in[0]);
      } else {
        ops::call_into(step.op, in, step.attrs, out);
      }
      return;
    }
    case StepKind::TiledContraction: {
      std::vector<Tensor> in;
      for (int s : step.op_slots) in.push_back(tensors[size_t(s)]);
      step.kernel->bind(pointers, step.arg_slots);
      run_tiled_contraction(step.op, step.attrs, in, tensors[size_t(step.product_slot)], *step.kernel);
      return;
    }
    case StepKind::Interpret: {
      std::vector<Tensor> in;
      for (int s : step.in_slots) in.push_back(tensors[size_t(s)]);
      std::vector<Tensor> results = trace::interpret(*step.body, in);
      for (size_t k = 0; k < results.size(); ++k) tensors[size_t(step.out_slots[k])].copy_(results[k]);
      return;
    }
  }
}

// A contraction group in one step, its epilogue in the GEMM's tiles (runtime/contraction_step.h);
// false when the tile form does not apply (the caller then makes the two steps).
bool Plan::Impl::add_tiled_contraction(const ir::Graph& body, const std::string& name, const std::vector<int>& in,
                                       const std::vector<int>& out) {
  std::optional<TiledContraction> tiled = lower_tiled_contraction(body, name);
  if (!tiled) return false;
  const ir::Node& first = *body.nodes().front();
  Step s;
  s.kind = StepKind::TiledContraction;
  s.what = name + " (epilogue in the GEMM's tiles)";
  s.op = first.op;
  s.attrs = first.attrs;
  for (int i : tiled->operand_inputs) s.op_slots.push_back(in[size_t(i)]);
  s.product_slot = tiled->product_output >= 0 ? out[size_t(tiled->product_output)]
                                              : temp_slot(first.outputs[0]->meta, int(steps.size()));
  s.in_slots = in;
  s.out_slots = out;
  s.arg_slots = in;
  s.arg_slots.push_back(s.product_slot);
  for (const Tensor& c : tiled->lowered.constants) {
    Slot cs;
    cs.kind = SlotKind::Constant;
    cs.meta = ops::meta_of(c);
    cs.constant = c;
    s.arg_slots.push_back(add_slot(cs));
  }
  s.arg_slots.insert(s.arg_slots.end(), out.begin(), out.end());
  s.kernel = std::make_unique<KernelStep>(std::move(*tiled->lowered.kernel), options.backend, defer_compile());
  steps.push_back(std::move(s));
  ++stats.kernels;
  ++stats.op_steps;
  ++stats.tiled_contractions;
  return true;
}

Plan::Plan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Plan::~Plan() = default;

std::unique_ptr<Plan> Plan::build(const ir::Graph& graph, const PlanOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->build(graph);
  impl->instantiate();
  return std::unique_ptr<Plan>(new Plan(std::move(impl)));
}

std::vector<Tensor> Plan::run(const std::vector<Tensor>& inputs) {
  Impl& p = *impl_;
  SMELT_CHECK(inputs.size() == p.input_metas.size())
      << "compiled plan: expected " << p.input_metas.size() << " inputs, got " << inputs.size();
  std::vector<Tensor> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ops::TensorMeta& m = p.input_metas[i];
    SMELT_CHECK(inputs[i].defined() && inputs[i].shape() == m.shape && inputs[i].dtype() == m.dtype)
        << "compiled plan: input " << i << " must be " << dtype_name(m.dtype) << " " << shape_str(m.shape)
        << ", got " << (inputs[i].defined() ? dtype_name(inputs[i].dtype()) + std::string(" ") + shape_str(inputs[i].shape())
                                            : std::string("an undefined tensor"));
    SMELT_CHECK(inputs[i].storage()) << "compiled plan: input " << i << " has no data (a symbolic tensor)";
    in[i] = inputs[i].is_contiguous() ? inputs[i] : inputs[i].contiguous();
  }
  std::lock_guard<std::mutex> lock(p.mutex);
  NoGradGuard no_grad;  // a plan computes values; autograd of compiled code is the joint graph's
  std::vector<Tensor> outputs;
  for (int s : p.output_slots) {
    const Slot& slot = p.slots[size_t(s)];
    outputs.push_back(empty(slot.meta.shape, slot.meta.dtype));
  }
  if (++p.runs == p.options.compile_after_runs && p.defer_compile()) {
    for (Step& step : p.steps) {
      if (step.kernel) step.kernel->start_compile();
    }
  }
  p.bind(in, outputs);
  if (!p.profile.enabled()) {
    for (Step& step : p.steps) p.run_step(step);
    return outputs;
  }
  for (size_t i = 0; i < p.steps.size(); ++i) {
    ProfileScope timed(p.profile, p.step_profile_id[i], p.step_bytes[i], p.step_flops[i]);
    p.run_step(p.steps[i]);
  }
  return outputs;
}

std::string Plan::wait_for_kernels() const {
  for (const Step& s : impl_->steps) {
    if (!s.kernel) continue;
    const std::string why = s.kernel->wait_compiled();
    if (!why.empty()) return s.what + ": " + why;
  }
  return "";
}

void Plan::fill_arena(uint8_t byte) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::memset(impl_->arena->data(), byte, impl_->arena->nbytes());
}

const PlanStats& Plan::stats() const { return impl_->stats; }

std::vector<const codegen::LoopKernel*> Plan::kernels() const {
  std::vector<const codegen::LoopKernel*> out;
  for (const Step& s : impl_->steps) {
    if (s.kernel) out.push_back(&s.kernel->kernel());
  }
  return out;
}

void Plan::set_profiling(bool on) { impl_->profile.set_enabled(on); }
const Profile& Plan::profile() const { return impl_->profile; }
std::string Plan::memory_report() const { return memory_plan_report(impl_->requests, impl_->memory); }
std::string Plan::arena_svg() const { return memory_plan_svg(impl_->requests, impl_->memory); }

std::string Plan::describe() const {
  const Impl& p = *impl_;
  std::ostringstream os;
  auto slot_text = [&](int s) {
    const Slot& slot = p.slots[size_t(s)];
    static const char* kinds[] = {"in", "const", "arena", "out", "alias"};
    std::ostringstream t;
    t << kinds[int(slot.kind)];
    if (slot.kind == SlotKind::Input || slot.kind == SlotKind::Output) t << slot.index;
    if (slot.kind == SlotKind::Arena) t << "@" << slot.offset;
    t << ":" << ops::dtype_short_name(slot.meta.dtype) << shape_str(slot.meta.shape);
    return t.str();
  };
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    static const char* kinds[] = {"kernel", "op", "interpret", "contraction"};
    os << "step " << i << " " << kinds[int(s.kind)] << " " << s.what << " (";
    for (size_t k = 0; k < s.in_slots.size(); ++k) os << (k ? ", " : "") << slot_text(s.in_slots[k]);
    os << ") -> (";
    for (size_t k = 0; k < s.out_slots.size(); ++k) os << (k ? ", " : "") << slot_text(s.out_slots[k]);
    os << ")";
    if (s.kernel) os << " [" << s.kernel->backend_name() << "]";
    os << "\n";
  }
  os << "arena: " << p.stats.arena_bytes << " bytes planned, " << p.stats.naive_bytes
     << " naive, lower bound " << p.stats.lower_bound << "\n";
  os << "kernels " << p.stats.kernels << ", op steps " << p.stats.op_steps << ", interpreted groups "
     << p.stats.interpreted << ", nodes computed once at build " << p.stats.hoisted << "\n";
  return os.str();
}

}  // namespace smelt::runtime
