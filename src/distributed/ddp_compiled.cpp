// DistributedDataParallel::compile_step: the bucketed all-reduce as steps of the training plan.
//
// Two registered ops (smelt/custom_op.h) carry it through the compiler: `all_reduce_start` copies
// a bucket's gradients into a staging buffer, starts its all-reduce on the communication thread
// and returns a ticket; `all_reduce_wait` waits for the ticket and returns the summed bucket.
// Their placements (Early, Late) make the plan issue each start right after the bucket's last
// gradient is computed and each wait right before the update reads it, with the rest of the
// backward in between (runtime/schedule_placement.h). Each start also reads the previous bucket's
// ticket, so that every rank's plan starts the buckets in the same order, whatever order the
// compiler chose for the rest: MPI matches collectives by the order they are issued.
#include <map>
#include <mutex>

#include "distributed/ddp_state.h"
#include "smelt/creation.h"
#include "smelt/custom_op.h"
#include "smelt/nn.h"
#include "smelt/ops.h"

namespace smelt::distributed {

using detail::Kind;
using detail::Work;
using detail::WorkPtr;

namespace {

struct InFlight {
  Tensor staging;
  WorkPtr work;
};

// Tickets of all-reduces started and not yet waited for, and staging buffers to reuse.
struct Tickets {
  std::mutex mutex;
  int64_t next = 1;
  std::map<int64_t, InFlight> in_flight;
  std::map<std::pair<DType, int64_t>, std::vector<Tensor>> spare;
};
Tickets& tickets() {
  static Tickets* t = new Tickets();  // outlives every plan (never destroyed)
  return *t;
}

// The stats of the compiled step running on this thread (DistributedStep::operator()).
thread_local CommStats* t_stats = nullptr;

// The first bucket of a step first compares the whole step's bucket layout (a hash of every
// gradient's dtype and size, in bucket order) across the ranks: ranks that compiled different
// steps (a parameter one rank's loss does not reach) would otherwise all-reduce buffers of
// different sizes.
void check_same_layout(detail::ProcessGroup& g, int64_t layout) {
  auto w = std::make_shared<Work>();
  w->kind = Kind::AllGather;
  w->data = from_vector<int64_t>({layout}, {1});
  w->gathered = empty({g.world_size()}, DType::Int64);
  w->what = "compiled step: comparing the ranks' gradient buckets";
  g.submit(w)->wait();
  for (int r = 1; r < g.world_size(); ++r) {
    SMELT_CHECK(w->gathered.data<int64_t>()[r] == w->gathered.data<int64_t>()[0])
        << "DistributedDataParallel::compile_step: rank " << r
        << "'s step all-reduces other gradients than rank 0's (a parameter that one rank's loss "
           "reaches and another's does not, or another module); every rank must compile the same step";
  }
}

void start_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  detail::ProcessGroup& g = detail::ProcessGroup::get("all_reduce_start");
  if (attrs.has("layout")) check_same_layout(g, attrs.get_int("layout"));
  const size_t first = size_t(attrs.get_int("chained"));
  const int64_t numel = attrs.get_int("numel");
  const DType dtype = in[first].dtype();
  Tensor staging;
  Tickets& t = tickets();
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto& spare = t.spare[{dtype, numel}];
    if (!spare.empty()) {
      staging = spare.back();
      spare.pop_back();
    }
  }
  if (!staging.defined()) staging = empty({numel}, dtype);
  int64_t at = 0;
  for (size_t i = first; i < in.size(); ++i) {
    staging.narrow(0, at, in[i].numel()).view(in[i].shape()).copy_(in[i]);
    at += in[i].numel();
  }
  auto w = std::make_shared<Work>();
  w->kind = Kind::AllReduce;
  w->data = staging;
  w->what = "compiled step: all_reduce of a gradient bucket (" + std::to_string(in.size() - first) + " gradients, " +
            dtype_name(dtype) + ")";
  g.submit(w);
  std::lock_guard<std::mutex> lock(t.mutex);
  const int64_t ticket = t.next++;
  t.in_flight.emplace(ticket, InFlight{staging, w});
  out[0].data<int64_t>()[0] = ticket;
}

void wait_kernel(const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
  const int64_t ticket = in[0].data<int64_t>()[0];
  Tickets& t = tickets();
  InFlight f;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.in_flight.find(ticket);
    SMELT_INTERNAL_CHECK(it != t.in_flight.end()) << "all_reduce_wait: unknown ticket " << ticket;
    f = std::move(it->second);
    t.in_flight.erase(it);
  }
  const double blocked = f.work->wait();
  if (t_stats) {
    ++t_stats->buckets;
    t_stats->bytes += f.staging.numel() * int64_t(dtype_size(f.staging.dtype()));
    t_stats->blocked_seconds += blocked;
    t_stats->comm_seconds += f.work->seconds();
  }
  Tensor result = out[0];
  result.copy_(f.staging);
  std::lock_guard<std::mutex> lock(t.mutex);
  t.spare[{f.staging.dtype(), f.staging.numel()}].push_back(f.staging);
}

const CustomOp& start_op() {
  static const CustomOp op = [] {
    OpDefinition def;
    def.name = "all_reduce_start";
    def.num_inputs = -1;
    def.shape = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
      const size_t first = size_t(attrs.get_int("chained"));
      SMELT_CHECK(in.size() > first) << "all_reduce_start: no gradients";
      int64_t numel = 0;
      for (size_t i = first; i < in.size(); ++i) {
        SMELT_CHECK(in[i].dtype == in[first].dtype) << "all_reduce_start: a bucket holds one dtype";
        numel += shape_numel(in[i].shape);
      }
      SMELT_CHECK(numel == attrs.get_int("numel")) << "all_reduce_start: the bucket's size changed";
      return std::vector<TensorMeta>{{{}, DType::Int64}};
    };
    def.forward = start_kernel;
    def.placement = OpDefinition::Placement::Early;
    def.check_inputs_unchanged = false;
    return register_op(def);
  }();
  return op;
}

const CustomOp& wait_op() {
  static const CustomOp op = [] {
    OpDefinition def;
    def.name = "all_reduce_wait";
    def.num_inputs = 1;
    def.shape = [](const std::vector<TensorMeta>&, const Attrs& attrs) {
      return std::vector<TensorMeta>{{{attrs.get_int("numel")}, attrs.get_dtype("dtype")}};
    };
    def.forward = wait_kernel;
    def.placement = OpDefinition::Placement::Late;
    def.check_inputs_unchanged = false;
    return register_op(def);
  }();
  return op;
}

// The traced all-reduce of `grads` in buckets (StepOptions::reduce_gradients): the mean over the
// ranks of each gradient.
std::vector<Tensor> reduce_in_buckets(const std::vector<Tensor>& grads, double bucket_cap_mb, int world) {
  std::vector<std::pair<DType, int64_t>> sizes;
  for (const Tensor& g : grads) sizes.emplace_back(g.dtype(), g.numel() * int64_t(dtype_size(g.dtype())));
  const std::vector<std::vector<size_t>> buckets = plan_buckets(sizes, bucket_cap_mb);
  uint64_t layout = 1469598103934665603ull;  // FNV-1a over (dtype, numel) in bucket order
  for (const std::vector<size_t>& bucket : buckets) {
    for (size_t i : bucket) {
      for (uint64_t v : {uint64_t(grads[i].dtype()), uint64_t(grads[i].numel()), uint64_t(i)}) {
        layout = (layout ^ v) * 1099511628211ull;
      }
    }
  }
  std::vector<Tensor> out(grads.size());
  Tensor ticket;
  for (const std::vector<size_t>& bucket : buckets) {
    std::vector<Tensor> in;
    if (ticket.defined()) in.push_back(ticket);
    int64_t numel = 0;
    for (size_t i : bucket) {
      in.push_back(grads[i]);
      numel += grads[i].numel();
    }
    const DType dtype = grads[bucket[0]].dtype();
    Attrs attrs{{"chained", int64_t(ticket.defined())}, {"numel", numel}};
    if (!ticket.defined()) attrs.set("layout", int64_t(layout >> 1));
    ticket = start_op()(in, attrs)[0];
    const Tensor sum = wait_op()({ticket}, {{"numel", numel}, {"dtype", dtype}})[0];
    int64_t at = 0;
    for (size_t i : bucket) {
      out[i] = sum.narrow(0, at, grads[i].numel()).reshape(grads[i].shape()) * (1.0 / world);
      at += grads[i].numel();
    }
  }
  return out;
}

}  // namespace

DistributedStep DistributedDataParallel::compile_step(CompiledFunction::Fn loss_fn, optim::Optimizer& optimizer,
                                                      StepOptions step, CompileOptions options) {
  SMELT_CHECK(!step.reduce_gradients)
      << "DistributedDataParallel::compile_step: StepOptions::reduce_gradients is the all-reduce's place; leave it "
         "empty";
  const int world = state_->group->world_size();
  const double cap = options_.bucket_cap_mb;
  if (world > 1) {
    step.reduce_gradients = [cap, world](const std::vector<Tensor>& grads) {
      return reduce_in_buckets(grads, cap, world);
    };
  }
  auto stats = std::make_shared<CommStats>();
  return DistributedStep(*this, smelt::compile_step(module_, std::move(loss_fn), optimizer, std::move(step), options),
                         stats);
}

std::vector<Tensor> DistributedStep::operator()(const std::vector<Tensor>& inputs) {
  if (ddp_->options().broadcast_buffers) ddp_->broadcast_buffers();
  *stats_ = CommStats{};
  CommStats* previous = t_stats;
  t_stats = stats_.get();
  struct Restore {
    CommStats* previous;
    ~Restore() { t_stats = previous; }
  } restore{previous};
  std::vector<Tensor> out = compiled_(inputs);
  ddp_->state_->stats = *stats_;
  return out;
}

}  // namespace smelt::distributed
