// Plan::build's second half: each step's cost for the profile, the in-place offers, the memory
// plan (checked) and the arena.
#include <set>
#include <sstream>

#include "ops/op_util.h"
#include "runtime/plan_impl.h"
#include "smelt/creation.h"

namespace smelt::runtime {
namespace {

// " [conv 3x3/2 3->64 224x224]" (kernel / stride, channels in -> out, input size; "g32" for
// groups) or " [matmul (M, K) @ (K, N)]".
std::string contraction_shape(ops::OpId op, const Shape& a, const Shape& b, const ops::Attrs& attrs) {
  std::ostringstream out;
  out << " [";
  if ((op == ops::OpId::conv2d || op == ops::OpId::conv2d_blocked) && b.size() == 4) {
    const std::vector<int64_t> stride = ops::pair_attr(attrs, "stride", "conv2d", 1);
    const int64_t groups = attrs.get_int("groups", 1);
    out << "conv " << b[2] << "x" << b[3];
    if (stride[0] != 1) out << "/" << stride[0];
    // a blocked input (N, Cb, H, W, 16) holds padding lanes: the real count is an attribute; a
    // blocked conv reading NCHW (a stem) has it in a[1] like conv2d
    const int64_t channels = a.size() == 4 ? a[1] : attrs.get_int("channels", 0);
    out << " " << channels << "->" << b[0] << " " << a[2] << "x" << a[3];
    if (groups != 1) out << " g" << groups;
    if (op == ops::OpId::conv2d_blocked) out << " blocked";
  } else {
    out << ops::op_name(op) << " " << shape_str(a) << " @ " << shape_str(b);
  }
  out << "]";
  return out.str();
}

}  // namespace

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
        bytes += m.nbytes();
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
    const bool contraction_op =
        s.op == ops::OpId::matmul || s.op == ops::OpId::conv2d || s.op == ops::OpId::conv2d_blocked;
    std::string shape;  // the contraction's shape in the profile's name: which conv is slow
    if ((s.kind == StepKind::Op || s.kind == StepKind::TiledContraction) && contraction_op) {
      const std::vector<int>& operands = s.kind == StepKind::Op ? s.in_slots : s.op_slots;
      const int product = s.kind == StepKind::Op ? s.out_slots[0] : s.product_slot;
      const ops::TensorMeta& b = slots[size_t(operands[1])].meta;
      // matmul: K is the last dim of the first operand; conv2d: the weight's elements per output channel.
      const int64_t per_output = s.op == ops::OpId::matmul
                                     ? slots[size_t(operands[0])].meta.shape.back()
                                     : shape_numel(b.shape) / std::max<int64_t>(b.shape[0], 1);
      flops += 2 * shape_numel(slots[size_t(product)].meta.shape) * per_output;
      shape = contraction_shape(s.op, slots[size_t(operands[0])].meta.shape, b.shape, s.attrs);
    }
    step_profile_id.push_back(profile.kernel_id("step " + std::to_string(i) + " " + s.what + shape));
    step_bytes.push_back(bytes);
    step_flops.push_back(flops);
  }
}

// Each element is read before it is overwritten, by the same iteration: no other iteration, lane
// or tile reads it later.
bool stores_over_reads(const codegen::LoopKernel& k, size_t out, const std::vector<size_t>& over) {
  if (k.stages != 1 || !k.reductions.empty() || !k.args[out].output) return false;
  const codegen::Access* store = nullptr;
  for (const codegen::Store& st : k.stores) {
    if (k.accesses[size_t(st.access)].arg == int(out)) store = &k.accesses[size_t(st.access)];
  }
  if (!store) return false;
  for (size_t arg : over) {
    if (arg == out) continue;
    // Positions are counted in elements: equal accesses over elements of different sizes (an f32
    // input cast to f64 of the same byte size) touch different bytes.
    if (k.args[arg].output || dtype_size(k.args[arg].dtype) != dtype_size(k.args[out].dtype)) return false;
    for (const codegen::Access& acc : k.accesses) {
      if (acc.arg != int(arg)) continue;
      if (acc.index >= 0 || acc.offset != store->offset || acc.outer_strides != store->outer_strides ||
          acc.inner_strides != store->inner_strides)
        return false;
    }
  }
  return true;
}

std::vector<size_t> Plan::Impl::args_rooted_at(const Step& s, int root_slot) const {
  std::vector<size_t> args;
  for (size_t a = 0; a < s.arg_slots.size(); ++a) {
    if (root(s.arg_slots[a]) == root_slot) args.push_back(a);
  }
  return args;
}

// In-place offers for the memory planner: a pointwise kernel may write an output over an input
// that dies at this step when they have the same size and the kernel reads that input only at
// the positions it stores the output.
void Plan::Impl::offer_inplace() {
  std::set<int> offered;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (s.kind != StepKind::Kernel) continue;
    const codegen::LoopKernel& k = s.kernel->kernel();
    if (k.stages != 1 || !k.reductions.empty()) continue;
    for (size_t out = 0; out < k.args.size(); ++out) {
      const ArenaSlot* o = slots[size_t(s.arg_slots[out])].as<ArenaSlot>();
      if (!k.args[out].output || !o || requests[size_t(o->request)].inplace_of >= 0) continue;
      for (size_t in = 0; in < k.args.size(); ++in) {
        const int root_slot = root(s.arg_slots[in]);
        const ArenaSlot* a = slots[size_t(root_slot)].as<ArenaSlot>();
        if (k.args[in].output || !a || offered.count(root_slot)) continue;
        const BufferRequest& r = requests[size_t(a->request)];
        if (r.last_step != int64_t(i) || r.bytes != requests[size_t(o->request)].bytes) continue;
        // Every argument of this kernel backed by that buffer reads it exactly where `out` is stored.
        if (!stores_over_reads(k, out, args_rooted_at(s, root_slot))) continue;
        requests[size_t(o->request)].inplace_of = a->request;
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
    if (ArenaSlot* a = s.as<ArenaSlot>()) {
      a->offset = memory.offsets[size_t(a->request)];
      const int64_t elem = int64_t(dtype_size(s.meta.dtype));
      SMELT_INTERNAL_CHECK((arena_offset + a->offset) % elem == 0) << "plan: a misaligned arena slot";
      arena_tensors[i] = make_tensor(arena, s.meta.shape, contiguous_strides(s.meta.shape),
                                     (arena_offset + a->offset) / elem, s.meta.dtype);
    }
  }
}

}  // namespace smelt::runtime
