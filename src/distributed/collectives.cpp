// smelt::distributed's functions on tensors (include/smelt/distributed.h), over the process group.
#include <cstdlib>
#include <sstream>

#include "distributed/process_group.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/distributed.h"
#include "smelt/nn.h"
#include "smelt/ops.h"

namespace smelt::distributed {

using detail::Kind;
using detail::ProcessGroup;
using detail::Work;
using detail::WorkPtr;

namespace {

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

void check_tensor(const Tensor& t, const char* where) {
  SMELT_CHECK(t.defined()) << where << ": the tensor is undefined";
  detail::check_wire_dtype(t.dtype(), where);
  SMELT_CHECK(t.is_contiguous())
      << where << ": the tensor " << shape_str(t.shape())
      << " is not contiguous; communicate t.contiguous() (and copy the result back)";
}

// What every rank must agree on before a collective moves data: the call, its root, the dtype
// and the shape. All-gathered and compared, so that a mismatch is an error on every rank (MPI
// would read past a buffer or hang).
void agree(ProcessGroup& g, const char* where, int64_t call, int64_t root, const Tensor& t) {
  if (g.world_size() == 1) return;
  constexpr int64_t kMaxDims = 8;
  const Shape& shape = t.shape();
  std::vector<int64_t> mine{call, root, int64_t(t.dtype()), int64_t(shape.size())};
  for (int64_t d = 0; d < kMaxDims; ++d) mine.push_back(d < int64_t(shape.size()) ? shape[size_t(d)] : -1);
  mine.push_back(t.numel());
  Tensor row = from_vector(mine, {int64_t(mine.size())});
  auto w = std::make_shared<Work>();
  w->kind = Kind::AllGather;
  w->data = row;
  w->gathered = empty({g.world_size(), int64_t(mine.size())}, DType::Int64);
  w->what = std::string(where) + " (agreeing on shapes)";
  g.submit(w)->wait();
  const int64_t* all = w->gathered.data<int64_t>();
  const size_t n = mine.size();
  auto describe = [&](int r) {
    const int64_t* v = all + size_t(r) * n;
    std::ostringstream s;
    s << dtype_name(DType(v[2])) << " (";
    for (int64_t d = 0; d < v[3] && d < kMaxDims; ++d) s << (d ? ", " : "") << v[4 + d];
    s << ")";
    if (v[1] != root) s << " with root " << v[1];
    return s.str();
  };
  for (int r = 0; r < g.world_size(); ++r) {
    const int64_t* v = all + size_t(r) * n;
    SMELT_CHECK(v[0] == call) << where << ": rank " << r
                              << " is in another collective; every rank must call the same collectives in the same order";
    bool same = true;
    for (size_t k = 0; k < n; ++k) same = same && v[k] == all[k];
    SMELT_CHECK(same) << where << ": rank " << r << " passed a " << describe(r) << " tensor but rank 0 a "
                      << describe(0) << "; every rank must pass the same shape and dtype";
  }
}

WorkPtr collective(ProcessGroup& g, Kind kind, const Tensor& data, std::string what) {
  auto w = std::make_shared<Work>();
  w->kind = kind;
  w->data = data;
  w->what = std::move(what);
  return w;
}

std::string describe(const char* name, const Tensor& t) {
  return std::string(name) + " of a " + dtype_name(t.dtype()) + " " + shape_str(t.shape());
}

}  // namespace

void init(const InitOptions& options) {
  double timeout = options.timeout_seconds;
  if (const char* env = std::getenv("SMELT_DISTRIBUTED_TIMEOUT")) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    SMELT_CHECK(end != env && *end == '\0' && v > 0)
        << "distributed::init: SMELT_DISTRIBUTED_TIMEOUT must be a number of seconds > 0, got '" << env << "'";
    timeout = v;
  }
  ProcessGroup::init(options.world_size, timeout);
}

bool is_initialized() { return ProcessGroup::initialized(); }
void report_failure(const std::string& message) {
  ProcessGroup::get("distributed::report_failure").notify_failure(message);
}
int rank() { return ProcessGroup::get("distributed::rank").rank(); }
int world_size() { return ProcessGroup::get("distributed::world_size").world_size(); }

void all_reduce(const Tensor& tensor, ReduceOp op) {
  ProcessGroup& g = ProcessGroup::get("distributed::all_reduce");
  check_tensor(tensor, "distributed::all_reduce");
  SMELT_CHECK(op != ReduceOp::Mean || dtype_is_floating(tensor.dtype()))
      << "distributed::all_reduce: mean of an integer tensor; use sum and divide as you need";
  agree(g, "distributed::all_reduce", 1 + int64_t(op), 0, tensor);
  if (g.world_size() == 1) return;
  WorkPtr w = collective(g, Kind::AllReduce, tensor, describe("all_reduce", tensor) + " (" + op_name(op) + ")");
  w->reduction = op == ReduceOp::Max   ? detail::Reduction::Max
                 : op == ReduceOp::Min ? detail::Reduction::Min
                                       : detail::Reduction::Sum;
  g.submit(w)->wait();
  tensor.storage()->bump_version();
  if (op == ReduceOp::Mean) {
    NoGradGuard no_grad;
    Tensor flat = tensor.detach();
    flat.mul_(1.0 / g.world_size());
  }
}

void broadcast(const Tensor& tensor, int root) {
  ProcessGroup& g = ProcessGroup::get("distributed::broadcast");
  check_tensor(tensor, "distributed::broadcast");
  SMELT_CHECK(root >= 0 && root < g.world_size())
      << "distributed::broadcast: root " << root << " is not a rank; valid: 0 .. " << g.world_size() - 1;
  agree(g, "distributed::broadcast", 10, root, tensor);
  if (g.world_size() == 1) return;
  WorkPtr w = collective(g, Kind::Broadcast, tensor, describe("broadcast", tensor));
  w->root = root;
  g.submit(w)->wait();
  tensor.storage()->bump_version();
}

std::vector<Tensor> all_gather(const Tensor& tensor) {
  ProcessGroup& g = ProcessGroup::get("distributed::all_gather");
  check_tensor(tensor, "distributed::all_gather");
  agree(g, "distributed::all_gather", 11, 0, tensor);
  Shape shape = tensor.shape();
  shape.insert(shape.begin(), g.world_size());
  WorkPtr w = collective(g, Kind::AllGather, tensor, describe("all_gather", tensor));
  w->gathered = empty(shape, tensor.dtype());
  g.submit(w)->wait();
  std::vector<Tensor> out;
  for (int r = 0; r < g.world_size(); ++r) out.push_back(w->gathered.select(0, r).clone());
  return out;
}

void barrier() {
  ProcessGroup& g = ProcessGroup::get("distributed::barrier");
  if (g.world_size() == 1) return;
  auto w = std::make_shared<Work>();
  w->kind = Kind::Barrier;
  w->what = "barrier";
  g.submit(w)->wait();
}

void save_checkpoint(const std::string& path, const nn::Module& module, const optim::Optimizer& optimizer,
                     const io::Metadata& metadata) {
  ProcessGroup& g = ProcessGroup::get("distributed::save_checkpoint");
  // Rank 0 writes (io::save_checkpoint writes a temporary file and renames it); its error, if any,
  // reaches the others as the barrier's failure notice when it escapes.
  if (g.rank() == 0) io::save_checkpoint(path, module, optimizer, metadata);
  barrier();
}

}  // namespace smelt::distributed
