// DistributedDataParallel (include/smelt/distributed.h), eagerly: gradient buckets all-reduced
// from post-accumulate hooks while the backward runs, waited for by a callback at its end.
#include <cstring>
#include <sstream>

#include "distributed/ddp_state.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/nn.h"
#include "smelt/ops.h"

namespace smelt::distributed {

using detail::Kind;
using detail::Work;

namespace {

// One line per parameter: what every rank's module must agree on.
std::string describe_parameters(const nn::Module& module) {
  std::ostringstream s;
  for (const auto& [name, p] : module.named_parameters()) {
    s << "'" << name << "' " << dtype_name(p.dtype()) << " " << shape_str(p.shape())
      << (p.requires_grad() ? "" : " (frozen)") << "\n";
  }
  return s.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every rank's `text` (all_gather of the lengths, then of the padded bytes).
std::vector<std::string> gather_texts(detail::ProcessGroup& g, const std::string& text) {
  auto lengths = std::make_shared<Work>();
  lengths->kind = Kind::AllGather;
  lengths->data = from_vector<int64_t>({int64_t(text.size())}, {1});
  lengths->gathered = empty({g.world_size()}, DType::Int64);
  lengths->what = "DistributedDataParallel (comparing the ranks' parameters)";
  g.submit(lengths)->wait();
  int64_t longest = 0;
  for (int r = 0; r < g.world_size(); ++r) longest = std::max(longest, lengths->gathered.data<int64_t>()[r]);
  auto bytes = std::make_shared<Work>();
  bytes->kind = Kind::AllGather;
  bytes->data = zeros({std::max<int64_t>(longest, 1)}, DType::UInt8);
  std::memcpy(bytes->data.raw_data(), text.data(), text.size());
  bytes->gathered = empty({g.world_size(), bytes->data.numel()}, DType::UInt8);
  bytes->what = lengths->what;
  g.submit(bytes)->wait();
  std::vector<std::string> texts;
  for (int r = 0; r < g.world_size(); ++r) {
    const char* row = static_cast<const char*>(bytes->gathered.raw_data()) + r * bytes->data.numel();
    texts.emplace_back(row, size_t(lengths->gathered.data<int64_t>()[r]));
  }
  return texts;
}

// The error (on every rank alike) when some rank's parameters differ from rank 0's.
void check_same_parameters(detail::ProcessGroup& g, const nn::Module& module) {
  if (g.world_size() == 1) return;
  const std::vector<std::string> texts = gather_texts(g, describe_parameters(module));
  const std::vector<std::string> first = split_lines(texts[0]);
  for (int r = 1; r < g.world_size(); ++r) {
    if (texts[size_t(r)] == texts[0]) continue;
    const std::vector<std::string> other = split_lines(texts[size_t(r)]);
    size_t k = 0;
    while (k < first.size() && k < other.size() && first[k] == other[k]) ++k;
    auto line = [](const std::vector<std::string>& l, size_t i) {
      return i < l.size() ? "parameter " + l[i] : std::string("no parameter");
    };
    SMELT_CHECK(false) << "DistributedDataParallel: rank " << r << "'s module differs from rank 0's at parameter "
                       << k << ": " << line(first, k) << " on rank 0, " << line(other, k) << " on rank " << r
                       << " (" << first.size() << " vs " << other.size()
                       << " parameters); every rank must build the same module";
  }
}

// Rank 0's values of `tensors` to every rank, as raw bytes in one broadcast.
void broadcast_bytes(detail::ProcessGroup& g, const std::vector<Tensor>& tensors, const char* what) {
  if (g.world_size() == 1 || tensors.empty()) return;
  int64_t total = 0;
  for (const Tensor& t : tensors) total += t.numel() * int64_t(dtype_size(t.dtype()));
  if (total == 0) return;
  Tensor flat = empty({total}, DType::UInt8);
  char* at = static_cast<char*>(flat.raw_data());
  std::vector<Tensor> dense;
  for (const Tensor& t : tensors) {
    dense.push_back(t.detach().contiguous());
    const size_t n = size_t(t.numel()) * dtype_size(t.dtype());
    std::memcpy(at, dense.back().raw_data(), n);
    at += n;
  }
  auto w = std::make_shared<Work>();
  w->kind = Kind::Broadcast;
  w->data = flat;
  w->what = what;
  g.submit(w)->wait();
  NoGradGuard no_grad;
  at = static_cast<char*>(flat.raw_data());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t n = size_t(tensors[i].numel()) * dtype_size(tensors[i].dtype());
    std::memcpy(dense[i].raw_data(), at, n);
    if (dense[i].storage() != tensors[i].storage()) tensors[i].detach().copy_(dense[i]);
    tensors[i].storage()->bump_version();
    at += n;
  }
}

}  // namespace

std::vector<std::vector<size_t>> plan_buckets(const std::vector<std::pair<DType, int64_t>>& tensors, double cap_mb) {
  SMELT_CHECK(cap_mb > 0) << "DistributedDataParallel: bucket_cap_mb must be > 0, got " << cap_mb;
  const int64_t cap = int64_t(cap_mb * 1024 * 1024), first_cap = std::min<int64_t>(cap, 1 << 20);
  std::vector<std::vector<size_t>> buckets;
  std::vector<int64_t> bytes;
  std::vector<int> open(size_t(kDTypeCount), -1);  // per dtype: the bucket being filled
  for (size_t i = tensors.size(); i-- > 0;) {
    const auto [dtype, size] = tensors[i];
    int& b = open[size_t(dtype)];
    if (b >= 0 && bytes[size_t(b)] + size > (b == 0 ? first_cap : cap)) b = -1;
    if (b < 0) {
      b = int(buckets.size());
      buckets.emplace_back();
      bytes.push_back(0);
    }
    buckets[size_t(b)].push_back(i);
    bytes[size_t(b)] += size;
  }
  return buckets;
}

DistributedDataParallel::State::State(detail::ProcessGroup& g, nn::Module& module, double bucket_cap_mb)
    : group(&g) {
  std::vector<std::pair<DType, int64_t>> sizes;
  for (const auto& [name, p] : module.named_parameters()) {
    if (!p.requires_grad()) continue;
    params.push_back(Param{name, p, 0, 0, 0});
    sizes.emplace_back(p.dtype(), p.numel() * int64_t(dtype_size(p.dtype())));
  }
  for (const std::vector<size_t>& members : plan_buckets(sizes, bucket_cap_mb)) {
    Bucket b{params[members[0]].tensor.dtype(), members, 0, Tensor(), 0, nullptr};
    for (size_t i : members) {
      params[i].bucket = int(buckets.size());
      params[i].offset = b.numel;
      b.numel += params[i].tensor.numel();
    }
    // One more element per parameter: 1 where this rank had a gradient for it, so that the sum
    // counts the ranks that did.
    b.flat = empty({b.numel + int64_t(members.size())}, b.dtype);
    buckets.push_back(std::move(b));
  }
  ready.assign(params.size(), 0);
}

void DistributedDataParallel::State::on_gradient(size_t index) {
  if (!sync) return;
  if (!in_backward) {
    in_backward = true;
    std::fill(ready.begin(), ready.end(), 0);
    for (Bucket& b : buckets) {
      b.pending = int(b.params.size());
      b.work.reset();
    }
    next_launch = 0;
    stats = CommStats{};
    std::weak_ptr<State> weak = weak_from_this();
    autograd::queue_callback([weak] {
      if (auto s = weak.lock()) s->finish_backward();
    });
  }
  SMELT_CHECK(!ready[index]) << "DistributedDataParallel: parameter '" << params[index].name
                             << "' got a gradient twice in one backward; run one backward per forward (sum "
                                "the losses first)";
  ready[index] = 1;
  copy_in(index, true);
  if (--buckets[size_t(params[index].bucket)].pending == 0) launch_ready();
}

void DistributedDataParallel::State::copy_in(size_t index, bool used) {
  const Param& p = params[index];
  Bucket& b = buckets[size_t(p.bucket)];
  NoGradGuard no_grad;
  const Tensor grad = p.tensor.grad();
  Tensor slot = b.flat.narrow(0, p.offset, p.tensor.numel());
  if (grad.defined()) {
    SMELT_CHECK(grad.shape() == p.tensor.shape())
        << "DistributedDataParallel: the .grad of '" << p.name << "' has shape " << shape_str(grad.shape())
        << ", its parameter " << shape_str(p.tensor.shape());
    slot.copy_(grad.reshape({p.tensor.numel()}));
  } else {
    slot.fill_(0.0);
  }
  const size_t k = size_t(std::find(b.params.begin(), b.params.end(), index) - b.params.begin());
  b.flat.narrow(0, b.numel + int64_t(k), 1).fill_(used || grad.defined() ? 1.0 : 0.0);
}

void DistributedDataParallel::State::launch_ready() {
  while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
    Bucket& b = buckets[next_launch];
    auto w = std::make_shared<Work>();
    w->kind = Kind::AllReduce;
    w->data = b.flat;
    w->what = "DistributedDataParallel: all_reduce of gradient bucket " + std::to_string(next_launch) + " (" +
              std::to_string(b.params.size()) + " parameters, " + dtype_name(b.dtype) + ")";
    b.work = group->submit(w);
    ++stats.buckets;
    stats.bytes += b.flat.numel() * int64_t(dtype_size(b.dtype));
    ++next_launch;
  }
}

void DistributedDataParallel::State::finish_backward() {
  // Parameters this backward did not reach: their .grad (accumulated under no_sync) or zeros.
  for (size_t b = next_launch; b < buckets.size(); ++b) {
    for (size_t i : buckets[b].params) {
      if (!ready[i]) copy_in(i, false);
    }
    buckets[b].pending = 0;
  }
  launch_ready();
  in_backward = false;
  for (Bucket& b : buckets) {
    stats.blocked_seconds += b.work->wait();
    stats.comm_seconds += b.work->seconds();
  }
  NoGradGuard no_grad;
  const double scale = 1.0 / group->world_size();
  for (Bucket& b : buckets) {
    const std::vector<double> users = b.flat.narrow(0, b.numel, int64_t(b.params.size())).to_vector();
    for (size_t k = 0; k < b.params.size(); ++k) {
      Param& p = params[b.params[k]];
      if (users[k] == 0) continue;  // no rank had a gradient for it: it keeps none
      const Tensor mean = b.flat.narrow(0, p.offset, p.tensor.numel()).reshape(p.tensor.shape()) * scale;
      Tensor grad = p.tensor.grad();
      if (grad.defined()) grad.copy_(mean);
      else p.tensor.set_grad(mean);
    }
  }
}

void DistributedDataParallel::State::drain() {
  for (Bucket& b : buckets) {
    if (b.work && !b.work->done()) b.work->wait();
    b.work.reset();
  }
  in_backward = false;
}

DistributedDataParallel::DistributedDataParallel(nn::Module& module, DDPOptions options)
    : module_(module), options_(options) {
  detail::ProcessGroup& g = detail::ProcessGroup::get("DistributedDataParallel");
  check_same_parameters(g, module);
  state_ = std::make_shared<State>(g, module, options.bucket_cap_mb);
  std::vector<Tensor> state = module.parameters();
  for (const Tensor& b : module.buffers()) state.push_back(b);
  broadcast_bytes(g, state, "DistributedDataParallel: rank 0's parameters and buffers to every rank");
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < state_->params.size(); ++i) {
    state_->params[i].hook = state_->params[i].tensor.register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (auto s = weak.lock()) s->on_gradient(i);
    });
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (const auto& p : state_->params) p.tensor.remove_post_accumulate_grad_hook(p.hook);
}

void DistributedDataParallel::prepare_forward() {
  if (state_->in_backward) state_->drain();  // a backward that threw left its buckets behind
  if (options_.broadcast_buffers) broadcast_buffers();
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  prepare_forward();
  return module_.forward(x);
}

void DistributedDataParallel::set_gradient_sync(bool on) { state_->sync = on; }
bool DistributedDataParallel::gradient_sync() const { return state_->sync; }

void DistributedDataParallel::broadcast_buffers() {
  broadcast_bytes(*state_->group, module_.buffers(), "DistributedDataParallel: rank 0's buffers to every rank");
}

const CommStats& DistributedDataParallel::last_stats() const { return state_->stats; }

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.state_->sync) {
  ddp.state_->sync = false;
}

DistributedDataParallel::NoSync::~NoSync() { ddp_.state_->sync = previous_; }

}  // namespace smelt::distributed
