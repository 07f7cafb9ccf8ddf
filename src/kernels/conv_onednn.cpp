#include "kernels/conv_onednn.h"
#include "kernels/conv_operand_scan.h"

#include "base/env.h"
#include "base/parallel.h"

#include "smelt/error.h"

#if SMELT_HAVE_ONEDNN

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <new>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>

namespace smelt::kernels {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Rows of y handed to the epilogue at once: 16 channels of a 56x56 image are 200 KiB, in L2.
constexpr int64_t kEpilogueRowElements = 1 << 16;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One geometry's primitive and the user (plain) formats around it.
struct Prepared {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward conv;
  memory::desc x_user, w_user, y_user;
  // Whether the primitive reads x and writes y in the user formats (no reorder around the call),
  // and whether w needs one: asked once here instead of querying oneDNN on every call.
  bool x_direct = false, y_direct = false, w_convert = true;
};

memory::dims weight_dims(const Conv2dGeometry& g) {
  if (g.groups == 1) return {g.O, g.C, g.kH, g.kW};
  return {g.groups, g.O / g.groups, g.C / g.groups, g.kH, g.kW};
}

// A primitive's key: the geometry, the algorithm and the layouts (their weight layouts differ
// too), and the post-ops. Compared as plain numbers: a conv call looks its primitive up every
// time, and building text keys (with a stream for the clamp's bounds) cost microseconds a call.
struct PrimitiveKey {
  std::array<int64_t, 14> dims;
  int32_t flags;         // winograd, layout
  uint32_t lo, hi;       // the clamp's bounds' bits ([-inf, inf]: none; -0 and +0 differ)
  bool bias, residual;
  auto tie() const { return std::tie(dims, flags, lo, hi, bias, residual); }
  bool operator<(const PrimitiveKey& o) const { return tie() < o.tie(); }
};

// The post-ops a primitive applies after the convolution (kernels/gemm.h EpilogueAsPostOps): a bias
// and a clamp [lo, hi] (none when unbounded).
struct PostOps {
  bool bias = false;
  bool residual = false;  // a binary add of a tensor laid out like y, after the bias
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  bool clamp() const { return lo > -std::numeric_limits<float>::infinity() || hi < std::numeric_limits<float>::infinity(); }
  bool any() const { return bias || residual || clamp(); }
};

PrimitiveKey key_of(const Conv2dGeometry& g, bool winograd, ConvLayout layout, const PostOps& post = {}) {
  PrimitiveKey k{{g.N, g.C, g.H, g.W, g.O, g.kH, g.kW, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h, g.dil_w, g.groups},
                 int32_t(winograd) | int32_t(layout) << 1,
                 std::bit_cast<uint32_t>(post.lo),
                 std::bit_cast<uint32_t>(post.hi),
                 post.bias,
                 post.residual};
  return k;
}

// nullptr when oneDNN has no implementation for g (with `winograd`: no Winograd one; oneDNN has
// them for 3x3 stride-1 float32 convolutions on AVX-512 machines).
// Blocked layouts: x and y fixed to nChw16c (kernels/conv_blocked.h; PlainToBlocked: x nchw)
// instead of chosen by oneDNN.
std::shared_ptr<const Prepared> prepare(const Conv2dGeometry& g, bool winograd, ConvLayout layout,
                                        const PostOps& post = {}) {
  static std::mutex mutex;
  static std::map<PrimitiveKey, std::shared_ptr<const Prepared>> cache;
  const PrimitiveKey key = key_of(g, winograd, layout, post);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::shared_ptr<Prepared> p;
  try {
    const auto f32 = memory::data_type::f32;
    const memory::dims x_dims{g.N, g.C, g.H, g.W}, y_dims{g.N, g.O, g.Ho, g.Wo}, w_dims = weight_dims(g);
    const Tag x_user = layout == ConvLayout::Blocked ? Tag::nChw16c : Tag::nchw;
    const Tag y_user = layout == ConvLayout::Plain ? Tag::nchw : Tag::nChw16c;
    const memory::desc x_any(x_dims, f32, layout == ConvLayout::Plain ? Tag::any : x_user);
    const memory::desc y_any(y_dims, f32, layout == ConvLayout::Plain ? Tag::any : y_user);
    const memory::desc w_any(w_dims, f32, Tag::any);
    // oneDNN counts dilation from 0 (no gap) where smelt counts from 1.
    const dnnl::algorithm algorithm =
        winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
    const memory::desc bias_desc({g.O}, f32, Tag::a);
    const dnnl::convolution_forward::desc desc =
        post.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm, x_any, w_any,
                                                    bias_desc, y_any, {g.stride_h, g.stride_w},
                                                    {g.dil_h - 1, g.dil_w - 1}, {g.pad_h, g.pad_w}, {g.pad_h, g.pad_w})
                  : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm, x_any, w_any, y_any,
                                                    {g.stride_h, g.stride_w}, {g.dil_h - 1, g.dil_w - 1},
                                                    {g.pad_h, g.pad_w}, {g.pad_h, g.pad_w});
    dnnl::primitive_attr attr;
    if (post.residual || post.clamp()) {
      dnnl::post_ops ops;  // in smelt's order: (conv + bias) + residual, then the clamp
      if (post.residual) ops.append_binary(dnnl::algorithm::binary_add, memory::desc(y_dims, f32, y_user));
      if (post.clamp()) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, post.lo, post.hi);
      attr.set_post_ops(ops);
    }
    auto pd = dnnl::convolution_forward::primitive_desc(desc, attr, cpu_engine());
    p = std::make_shared<Prepared>(Prepared{pd, dnnl::convolution_forward(pd), memory::desc(x_dims, f32, x_user),
                                            memory::desc(w_dims, f32, g.groups == 1 ? Tag::oihw : Tag::goihw),
                                            memory::desc(y_dims, f32, y_user)});
    p->x_direct = pd.src_desc() == p->x_user;
    p->y_direct = pd.dst_desc() == p->y_user;
    p->w_convert = pd.weights_desc() != p->w_user;
  } catch (const dnnl::error&) {
    p = nullptr;  // no implementation for this geometry
  }
  cache.emplace(key, p);
  return p;
}

// Converted weights: (w's data pointer, geometry) -> w in the primitive's layout, oldest first out
// beyond the byte budget. Each entry holds w itself, so its memory stays w's.
constexpr size_t kWeightCacheBytes = size_t(512) << 20;

std::atomic<uint64_t> g_weight_conversions{0};
std::atomic<uint64_t> g_residual_post_ops{0};

struct CachedWeight {
  Tensor source;
  uint64_t version;  // source's storage version when converted: an in-place smelt op bumps it
  memory converted;
  // For a weight not marked constant: its bytes when converted. A write through a raw pointer
  // (Tensor::data, a NumPy view) leaves the version alone; comparing the bytes sees it, at the
  // price of one read of w per call (far less than converting: a Winograd weight transform).
  // Empty for a constant's conversion, which every caller may use (its memory never changes).
  std::vector<unsigned char> snapshot;
  size_t bytes;  // converted + snapshot
  uint64_t stamp;
};

memory cached_weight(const PrimitiveKey& primitive, const Prepared& p, const Tensor& w, bool weight_constant,
                     dnnl::stream& stream) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, PrimitiveKey>, CachedWeight> cache;
  static size_t total = 0;
  static uint64_t clock = 0;
  const auto key = std::make_pair(static_cast<const void*>(w.raw_data()), primitive);
  std::lock_guard<std::mutex> lock(mutex);
  const uint64_t version = w.storage()->version();
  auto it = cache.find(key);
  // The entry holds its source, so an address can only come back as the same storage; the
  // storage check still guards memory that two storages could share (wrapped external buffers).
  const size_t w_bytes = size_t(w.numel()) * sizeof(float);
  if (it != cache.end() && it->second.version == version && it->second.source.storage() == w.storage() &&
      (weight_constant || it->second.snapshot.empty() /* converted for a constant: the memory never changes */ ||
       (it->second.snapshot.size() == w_bytes && std::memcmp(it->second.snapshot.data(), w.raw_data(), w_bytes) == 0))) {
    it->second.stamp = ++clock;
    return it->second.converted;
  }
  if (it != cache.end()) {  // written in place since: convert again
    total -= it->second.bytes;
    cache.erase(it);
  }
  // Weights no one else holds any more (an eager loop's temporaries, a freed plan's constants)
  // can never be asked for again: they go first.
  for (auto e = cache.begin(); e != cache.end();) {
    const Tensor& s = e->second.source;
    if (s.impl()->ref_count() == 1 && s.storage()->ref_count() == 1) {
      total -= e->second.bytes;
      e = cache.erase(e);
    } else {
      ++e;
    }
  }
  g_weight_conversions.fetch_add(1, std::memory_order_relaxed);
  memory user(p.w_user, cpu_engine(), w.raw_data());
  memory converted(p.pd.weights_desc(), cpu_engine());
  dnnl::reorder(user, converted).execute(stream, user, converted);
  stream.wait();
  std::vector<unsigned char> snapshot;
  if (!weight_constant) {
    const auto* begin = static_cast<const unsigned char*>(w.raw_data());
    snapshot.assign(begin, begin + w_bytes);
  }
  const size_t bytes = p.pd.weights_desc().get_size() + snapshot.size();
  while (!cache.empty() && total + bytes > kWeightCacheBytes) {
    auto oldest = cache.begin();
    for (auto e = cache.begin(); e != cache.end(); ++e) {
      if (e->second.stamp < oldest->second.stamp) oldest = e;
    }
    total -= oldest->second.bytes;
    cache.erase(oldest);
  }
  cache.emplace(key, CachedWeight{w, version, converted, std::move(snapshot), bytes, ++clock});
  total += bytes;
  return converted;
}

// Zeros into the lanes past g.O of y's last channel block (blocked y: (N, Ob, Ho, Wo, 16)).
// oneDNN's padding lanes hold 0 * x sums: NaN where x holds an infinity, which a later blocked conv
// would spread through its zero weights (and a clamp post-op with lo > 0 would leave lo there).
void clear_padding(const Conv2dGeometry& g, const Tensor& y) {
  const int64_t B = kOneDnnBlock, first = g.O % B, blocks = (g.O + B - 1) / B, pixels = g.Ho * g.Wo;
  if (first == 0) return;
  float* base = y.data<float>();
  for (int64_t n = 0; n < g.N; ++n) {
    float* lanes = base + (n * blocks + blocks - 1) * pixels * B + first;
    for (int64_t p = 0; p < pixels; ++p) std::fill(lanes + p * B, lanes + p * B + (B - first), 0.0f);
  }
}

// The bias post-op's argument: O floats at bias, wrapped (oneDNN reads it, never writes it).
memory bias_memory(const float* bias, int64_t O) {
  return memory(memory::desc({O}, memory::data_type::f32, Tag::a), cpu_engine(), const_cast<float*>(bias));
}

// The post-op arguments beside the convolution's own: the bias, and the residual (the binary
// add, post-op 0, laid out like y).
void add_post_op_args(std::unordered_map<int, memory>* args, const Prepared& p, const float* bias,
                      const float* residual, int64_t O) {
  if (bias) args->emplace(DNNL_ARG_BIAS, bias_memory(bias, O));
  if (residual) {
    args->emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                  memory(p.y_user, cpu_engine(), const_cast<float*>(residual)));
  }
}

// The arguments of one call site of a plan: a plan calls each conv with the same memory every
// time, so the oneDNN memory objects around x, the converted constant w, y and the bias, and the
// argument map, are kept per (primitive, x, w, y, bias) instead of created on every call (each
// call allocated a dozen small objects). Only for constant weights, whose conversion may be kept
// (weight_reusable); an entry holds w (its memory cannot be freed and reused while kept) and is
// rebuilt when w's storage version moved (an in-place smelt op). x, y and the bias are plain
// pointers wrapped with the primitive's formats: the same pointers give the same arguments.
struct ArgsKey {
  const Prepared* p;
  const void *x, *w, *y;
  const float *bias, *residual;
  auto tie() const { return std::tie(p, x, w, y, bias, residual); }
  bool operator<(const ArgsKey& o) const { return tie() < o.tie(); }
};

struct KeptArgs {
  std::shared_ptr<const Prepared> p;
  Tensor w;
  uint64_t w_version;
  std::unordered_map<int, memory> args;
};

// Entries a thread keeps at most (a plan has one per conv step).
constexpr size_t kKeptArgsMax = 1024;

const std::unordered_map<int, memory>& kept_args(const std::shared_ptr<const Prepared>& p, const PrimitiveKey& weight_key,
                                                 const Tensor& x, const Tensor& w, const Tensor& y, const float* bias,
                                                 const float* residual, int64_t O, dnnl::stream& stream) {
  static thread_local std::map<ArgsKey, KeptArgs> kept;
  const ArgsKey key{p.get(), x.raw_data(), w.raw_data(), y.raw_data(), bias, residual};
  auto it = kept.find(key);
  if (it != kept.end() && it->second.w.storage() == w.storage() && it->second.w_version == w.storage()->version()) {
    return it->second.args;
  }
  if (it != kept.end()) kept.erase(it);
  // Weights no one else holds any more (a freed plan's constants) can never be asked for again.
  std::erase_if(kept, [](const auto& e) {
    return e.second.w.impl()->ref_count() == 1 && e.second.w.storage()->ref_count() == 1;
  });
  if (kept.size() >= kKeptArgsMax) kept.clear();
  const uint64_t version = w.storage()->version();
  memory w_mem = p->w_convert ? cached_weight(weight_key, *p, w, /*weight_constant=*/true, stream)
                              : memory(p->w_user, cpu_engine(), w.raw_data());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(p->x_user, cpu_engine(), x.raw_data())},
                                       {DNNL_ARG_WEIGHTS, w_mem},
                                       {DNNL_ARG_DST, memory(p->y_user, cpu_engine(), y.raw_data())}};
  add_post_op_args(&args, *p, bias, residual, O);
  return kept.insert_or_assign(key, KeptArgs{p, w, version, std::move(args)}).first->second.args;
}

// A thread's buffer for converted activations, grown on demand and kept: a fresh allocation per
// call would page-fault its way through megabytes every time.
class Scratch {
 public:
  ~Scratch() { std::free(data_); }
  void* get(size_t bytes) {
    if (bytes > size_) {
      std::free(data_);
      data_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      if (!data_) throw std::bad_alloc();
      size_ = bytes;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// `user` as the primitive wants it: the same memory when the formats agree, else a reordered copy
// in `scratch`.
memory as_format(const memory& user, const memory::desc& wanted, dnnl::stream& stream, Scratch* scratch = nullptr) {
  if (user.get_desc() == wanted) return user;
  memory converted = scratch ? memory(wanted, cpu_engine(), scratch->get(wanted.get_size()))
                             : memory(wanted, cpu_engine());
  dnnl::reorder(user, converted).execute(stream, const_cast<memory&>(user), converted);
  return converted;
}

// Whether a residual of n floats is moderate: the step before recorded it so, or a scan says.
bool residual_moderate(const float* r, int64_t n) {
  return plan_step_moderate_known(r, n) || all_moderate_parallel(r, n);
}

// SMELT_CONV_POST_OPS=0 keeps every epilogue out of oneDNN (for measuring and bisecting).
bool post_ops_enabled() {
  static const bool on = env_int("SMELT_CONV_POST_OPS", 1, 0, 1) != 0;
  return on;
}

// Whether w's conversion may be kept (conv_onednn.h): a constant, or memory smelt allocated (whose
// writes through smelt bump its version; raw writes are caught by the snapshot comparison) outside
// an UnversionedWritesScope.
bool weight_reusable(const Tensor& w, bool weight_constant) {
  return weight_constant || (w.storage()->owned() && !UnversionedWritesScope::active());
}

// After the convolution: the padding lanes cleared, the step fact recorded, the epilogue run
// where the post-ops did not take it.
void finish(const Conv2dGeometry& g, const Tensor& y, const GemmEpilogue* epilogue, const PostOps& post,
            ConvLayout layout) {
  if (layout != ConvLayout::Plain) clear_padding(g, y);
  // oneDNN's clamp puts every output in [lo, hi] (NaN becomes lo): moderate when both bounds are.
  if (post.clamp() && std::fabs(post.lo) <= kWinogradMaxMagnitude && std::fabs(post.hi) <= kWinogradMaxMagnitude) {
    plan_step_record_moderate(y.data<float>(), y.numel());
  }
  if (!epilogue || post.any()) return;
  // The epilogue over threads (oneDNN used them all for the convolution; the bias and activation
  // over y on one thread cost as much as the stem convolution itself): every thread gets rows
  // when y is large enough to pay for the fork.
  // Blocked, a row is one pixel's block of 16 channels: (N Ob Ho Wo, 16).
  const bool blocked = layout != ConvLayout::Plain;
  const int64_t HoWo = blocked ? kOneDnnBlock : g.Ho * g.Wo;
  const int64_t rows = blocked ? g.N * ((g.O + kOneDnnBlock - 1) / kOneDnnBlock) * g.Ho * g.Wo : g.N * g.O;
  int64_t step = std::max<int64_t>(1, kEpilogueRowElements / std::max<int64_t>(1, HoWo));
  const int threads = num_threads();
  if (rows * HoWo >= kParallelGrain && threads > 1) step = std::min(step, (rows + threads - 1) / threads);
  parallel_for((rows + step - 1) / step, 1, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      (*epilogue)(chunk * step, std::min(rows, (chunk + 1) * step), 0, HoWo);
    }
  });
}

}  // namespace

bool conv2d_onednn_exact(const Conv2dGeometry& g, const Tensor& w, bool weight_constant) {
  return (g.pad_h == 0 && g.pad_w == 0) || weight_scan(w, weight_constant).finite;
}

bool conv2d_onednn_supports(const Conv2dGeometry& g, DType dtype, bool winograd, ConvLayout layout) {
  if (winograd && (g.kH != 3 || g.kW != 3 || g.stride_h != 1 || g.stride_w != 1 || g.dil_h != 1 || g.dil_w != 1 ||
                   g.groups != 1)) {
    return false;
  }
  return dtype == DType::Float32 && prepare(g, winograd, layout) != nullptr;
}

void conv2d_onednn_forward(const Conv2dGeometry& g, const Tensor& y, const Tensor& x, const Tensor& w,
                           const GemmEpilogue* epilogue, bool weight_constant, bool winograd, ConvLayout layout) {
  SMELT_INTERNAL_CHECK(x.dtype() == DType::Float32) << "conv2d (onednn): float32 only";
  const bool keep_weight = weight_reusable(w, weight_constant);
  // x is scanned at most once a call: Winograd and the post-ops both ask.
  std::optional<bool> x_moderate;
  auto moderate_x = [&] {
    if (!x_moderate) x_moderate = all_moderate_parallel(x.data<float>(), x.numel());
    return *x_moderate;
  };
  // The step before (in a plan) may have written x through a clamp to moderate bounds.
  if (plan_step_moderate_known(x.data<float>(), x.numel())) x_moderate = true;
  if (winograd && !(moderate_x() && weight_scan(w, weight_constant).moderate)) winograd = false;
  // The epilogue as oneDNN post-ops (bias, clamp) where it computes the same: on moderate operands
  // no NaN or infinity reaches it, and the clamp then agrees with smelt's relu, maximum and minimum
  // (up to the sign of a zero; oneDNN's clamp maps NaN to lo where smelt keeps it). The epilogue's
  // pass over y is saved.
  const EpilogueAsPostOps* as_data = epilogue ? epilogue->post_ops : nullptr;
  PostOps post;
  // The scan of x must cost less than the epilogue's pass over y it saves: x already scanned (for
  // Winograd), or no larger than y (measured on MobileNetV2 and SqueezeNet, one thread: scanning
  // larger inputs too saved nothing more).
  // A residual (laid out like y, never y itself) must be moderate too: the scan reads it once where
  // the epilogue's pass would read it and y and write y (x itself, the conv's input read again as
  // its residual, was scanned above).
  const float* residual = as_data ? as_data->residual : nullptr;
  if (as_data && layout != ConvLayout::Plain && post_ops_enabled() && (x_moderate || x.numel() <= y.numel()) &&
      (!as_data->bias || all_moderate(as_data->bias, g.O)) && weight_scan(w, weight_constant).moderate &&
      moderate_x() &&
      (!residual || (residual != y.data<float>() &&
                     ((residual == x.data<float>() && x.numel() == y.numel()) || residual_moderate(residual, y.numel()))))) {
    post.bias = as_data->bias != nullptr;
    post.residual = residual != nullptr;
    post.lo = as_data->lo;
    post.hi = as_data->hi;
  }
  std::shared_ptr<const Prepared> p = prepare(g, winograd, layout, post);
  if (!p && post.any()) {  // no implementation takes these post-ops: the epilogue runs
    post = PostOps{};
    p = prepare(g, winograd, layout);
  }
  SMELT_INTERNAL_CHECK(p) << "conv2d (onednn): no oneDNN implementation for this geometry";
  // One stream per thread, kept: creating one on every call cost an allocation.
  static thread_local dnnl::stream stream(cpu_engine());
  const float* bias = post.bias ? as_data->bias : nullptr;
  if (!post.residual) residual = nullptr;
  if (residual) g_residual_post_ops.fetch_add(1, std::memory_order_relaxed);
  if (weight_constant && keep_weight && p->x_direct && p->y_direct) {
    p->conv.execute(stream, kept_args(p, key_of(g, winograd, layout), x, w, y, bias, residual, g.O, stream));
    stream.wait();
    finish(g, y, epilogue, post, layout);
    return;
  }
  memory x_user(p->x_user, cpu_engine(), x.raw_data()), w_user(p->w_user, cpu_engine(), w.raw_data());
  memory y_user(p->y_user, cpu_engine(), y.raw_data());
  static thread_local Scratch x_scratch, y_scratch;
  memory x_mem = as_format(x_user, p->pd.src_desc(), stream, &x_scratch);
  const bool convert = p->pd.weights_desc() != p->w_user;
  if (convert && !keep_weight) g_weight_conversions.fetch_add(1, std::memory_order_relaxed);
  memory w_mem = convert && keep_weight ? cached_weight(key_of(g, winograd, layout), *p, w, weight_constant, stream)
                                        : as_format(w_user, p->pd.weights_desc(), stream);
  const bool y_direct = p->pd.dst_desc() == p->y_user;
  memory y_mem = y_direct ? y_user : memory(p->pd.dst_desc(), cpu_engine(), y_scratch.get(p->pd.dst_desc().get_size()));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, y_mem}};
  add_post_op_args(&args, *p, bias, residual, g.O);
  p->conv.execute(stream, args);
  if (!y_direct) dnnl::reorder(y_mem, y_user).execute(stream, y_mem, y_user);
  stream.wait();
  finish(g, y, epilogue, post, layout);
}

uint64_t onednn_weight_conversions() { return g_weight_conversions.load(std::memory_order_relaxed); }
uint64_t onednn_residual_post_ops() { return g_residual_post_ops.load(std::memory_order_relaxed); }

const char* onednn_version() {
  static const std::string v = [] {
    const dnnl_version_t* info = dnnl_version();
    return "oneDNN " + std::to_string(info->major) + "." + std::to_string(info->minor) + "." +
           std::to_string(info->patch);
  }();
  return v.c_str();
}

}  // namespace smelt::kernels

#else  // built without oneDNN

namespace smelt::kernels {

bool conv2d_onednn_supports(const Conv2dGeometry&, DType, bool, ConvLayout) { return false; }
bool conv2d_onednn_exact(const Conv2dGeometry&, const Tensor&, bool) { return true; }
void conv2d_onednn_forward(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&, const GemmEpilogue*, bool,
                           bool, ConvLayout) {
  SMELT_INTERNAL_CHECK(false) << "conv2d (onednn): smelt was built without oneDNN";
}
const char* onednn_version() { return ""; }
uint64_t onednn_weight_conversions() { return 0; }
uint64_t onednn_residual_post_ops() { return 0; }

}  // namespace smelt::kernels

#endif
