#include "kernels/qconv_onednn.h"

#include "base/parallel.h"
#include "kernels/qgemm.h"
#include "kernels/transpose.h"
#include "smelt/error.h"

#if SMELT_HAVE_ONEDNN

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace smelt::kernels {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

constexpr int64_t kExactBound = int64_t(1) << 24;  // integers a float holds exactly

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// One call shape's primitive: the geometry, the dtypes, the output scales (fixed at creation:
// oneDNN 2.6 has no int8 convolution with run-time output scales), whether there is a bias, and
// what the choice between the implementations depends on besides (threads, a constant weight).
// The key holds the scales' hash; the entries under it, the scales themselves. A lookup allocates
// nothing.
using QKey = std::array<int64_t, 19>;

}  // namespace

struct QConvOneDnn {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward conv;
  memory::desc x_user, y_user, w_user;
  bool x_direct = false, y_direct = false;
  uint64_t weight_layout = 0;  // a hash of the primitive's weight format (kept conversions' key)
  int64_t groups = 1;
  std::atomic<QConvChoice> choice{QConvChoice::Unchosen};
};

namespace {

struct Shape4 {
  int64_t N, C, H, W, O, Cg, kH, kW, Ho, Wo;
};

Shape4 shape_of(const Tensor& y, const QuantizedTensor& x, const QuantizedTensor& w) {
  return {x.values.size(0), x.values.size(1), x.values.size(2), x.values.size(3), w.values.size(0),
          w.values.size(1), w.values.size(2), w.values.size(3), y.size(2), y.size(3)};
}

memory::dims weight_dims(const Shape4& s, int64_t groups) {
  if (groups == 1) return {s.O, s.Cg, s.kH, s.kW};
  return {groups, s.O / groups, s.Cg, s.kH, s.kW};
}

// Whether oneDNN writes int8 (a uint8 result with zero point 128 is made from it) or uint8.
bool writes_signed(const Tensor& y, const Requant& r) { return y.dtype() == DType::Int8 || r.zero_point == 128; }

// A hash of n bytes, eight at a time (the scales are hashed on every call).
uint64_t hash_bytes(const void* data, size_t n) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes + i, std::min<size_t>(8, n - i));
    h = (h ^ word) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return h;
}

std::shared_ptr<QConvOneDnn> prepare(const Shape4& s, const QConvGeometry& g, bool x_signed, bool y_signed,
                                     bool bias, bool weight_constant, const std::vector<float>& scales) {
  const int64_t flags = int64_t(x_signed) | int64_t(y_signed) << 1 | int64_t(bias) << 2 | int64_t(weight_constant) << 3;
  const QKey key{s.N, s.C, s.H, s.W, s.O, s.kH, s.kW, g.stride[0], g.stride[1], g.pad_begin[0], g.pad_begin[1],
                 g.pad_end[0], g.pad_end[1], g.dilation[0], g.dilation[1], g.groups, num_threads(), flags,
                 int64_t(hash_bytes(scales.data(), scales.size() * sizeof(float)))};
  static std::mutex mutex;
  static std::map<QKey, std::vector<std::pair<std::vector<float>, std::shared_ptr<QConvOneDnn>>>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& entries = cache[key];
  for (const auto& [entry_scales, entry] : entries) {
    if (entry_scales.size() == scales.size() &&
        std::memcmp(entry_scales.data(), scales.data(), scales.size() * sizeof(float)) == 0) {
      return entry;
    }
  }
  std::shared_ptr<QConvOneDnn> p;
  try {
    using DT = memory::data_type;
    const DT x_type = x_signed ? DT::s8 : DT::u8, y_type = y_signed ? DT::s8 : DT::u8;
    const memory::dims x_dims{s.N, s.C, s.H, s.W}, y_dims{s.N, s.O, s.Ho, s.Wo}, w_dims = weight_dims(s, g.groups);
    const memory::desc x_any(x_dims, x_type, Tag::any), y_any(y_dims, y_type, Tag::any),
        w_any(w_dims, DT::s8, Tag::any), bias_desc({s.O}, DT::s32, Tag::a);
    const memory::dims strides{g.stride[0], g.stride[1]}, dilation{g.dilation[0] - 1, g.dilation[1] - 1},
        pad_l{g.pad_begin[0], g.pad_begin[1]}, pad_r{g.pad_end[0], g.pad_end[1]};
    const auto kind = dnnl::prop_kind::forward_inference;
    const auto direct = dnnl::algorithm::convolution_direct;
    const dnnl::convolution_forward::desc desc =
        bias ? dnnl::convolution_forward::desc(kind, direct, x_any, w_any, bias_desc, y_any, strides, dilation, pad_l, pad_r)
             : dnnl::convolution_forward::desc(kind, direct, x_any, w_any, y_any, strides, dilation, pad_l, pad_r);
    dnnl::primitive_attr attr;
    attr.set_output_scales(scales.size() == 1 ? 0 : 1 << 1, scales);
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine());
    p = std::make_shared<QConvOneDnn>();
    p->pd = pd;
    p->conv = dnnl::convolution_forward(pd);
    p->x_user = memory::desc(x_dims, x_type, Tag::nchw);
    p->y_user = memory::desc(y_dims, y_type, Tag::nchw);
    p->w_user = memory::desc(w_dims, DT::s8, g.groups == 1 ? Tag::oihw : Tag::goihw);
    p->groups = g.groups;
    p->x_direct = pd.src_desc() == p->x_user;
    p->y_direct = pd.dst_desc() == p->y_user;
    const dnnl_memory_desc_t& layout = pd.weights_desc().data;
    p->weight_layout = hash_bytes(&layout, sizeof layout);
  } catch (const dnnl::error&) {
    p = nullptr;  // no implementation for this shape
  }
  entries.emplace_back(scales, p);
  return p;
}

// A weight in the primitive's layout.
struct OneDnnWeights {
  std::vector<int8_t> bytes;
};

// A buffer of the calling thread, grown as needed and kept.
void* scratch(std::vector<uint8_t>& buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

// Whether every element of an integer tensor is 0 (all its bytes are).
bool all_zero(const Tensor& t) {
  const Tensor c = t.is_contiguous() ? t : contiguous_copy(t);
  const auto* bytes = static_cast<const unsigned char*>(c.raw_data());
  return std::all_of(bytes, bytes + c.numel() * int64_t(dtype_size(c.dtype())), [](unsigned char b) { return b == 0; });
}

bool within_exact_bound(const Tensor& bias) {
  const Tensor b = bias.is_contiguous() ? bias : contiguous_copy(bias);
  const int32_t* v = b.data<int32_t>();
  return std::all_of(v, v + b.numel(), [](int32_t x) { return std::abs(int64_t(x)) <= kExactBound; });
}

// oneDNN's failures (dnnl::error, say an out-of-memory in execute) as smelt::Errors.
template <class F>
void run_onednn(const char* what, const F& run) {
  try {
    run();
  } catch (const dnnl::error& e) {
    SMELT_CHECK(false) << "quantized conv2d: oneDNN failed to " << what << ": " << e.what()
                       << " (SMELT_QCONV=smelt runs smelt's own kernels)";
  }
}

}  // namespace

std::shared_ptr<QConvOneDnn> qconv_onednn_for(const Tensor& y, const QuantizedTensor& x, const QuantizedTensor& w,
                                              const Tensor& bias, const Requant& r, const QConvGeometry& g,
                                              bool weight_constant) {
  static const bool vnni = qgemm_isa_supported(QGemmIsa::Avx512Vnni);
  if (!vnni || y.numel() == 0 || !y.is_contiguous()) return nullptr;
  if (r.type == QGemmOutput::Type::Int32 || !r.row.empty() || r.column.empty()) return nullptr;
  if (x.values.dtype() != DType::UInt8 && x.values.dtype() != DType::Int8) return nullptr;
  if (w.values.dtype() != DType::Int8 || x.zero_point.numel() != 1) return nullptr;
  const bool zero_point_ok = r.zero_point == 0 || (y.dtype() == DType::UInt8 && r.zero_point == 128);
  if (!zero_point_ok || !all_zero(w.zero_point)) return nullptr;
  const int64_t K = w.values.size(1) * w.values.size(2) * w.values.size(3);
  if (K * 255 * 128 > kExactBound) return nullptr;
  if (bias.defined() && !within_exact_bound(bias)) return nullptr;
  return prepare(shape_of(y, x, w), g, x.values.dtype() == DType::Int8, writes_signed(y, r), bias.defined(),
                 weight_constant, r.column);
}

bool qconv_onednn_applies(const Tensor& y, const QuantizedTensor& x, const QuantizedTensor& w,
                          const Tensor& bias, const Requant& r, const QConvGeometry& g) {
  return qconv_onednn_for(y, x, w, bias, r, g, /*weight_constant=*/false) != nullptr;
}

std::atomic<QConvChoice>& qconv_onednn_choice(QConvOneDnn& conv) { return conv.choice; }

void qconv_onednn_forward(const QConvOneDnn& conv, const Tensor& y, const QuantizedTensor& x,
                          const QuantizedTensor& w, const Tensor& bias, const Requant& r, bool weight_constant) {
  const QConvOneDnn* p = &conv;
  static thread_local dnnl::stream stream(engine());
  static thread_local std::vector<uint8_t> x_buffer, y_buffer;
  const Shape4 s = shape_of(y, x, w);
  const Tensor xc = x.values.is_contiguous() ? x.values : contiguous_copy(x.values);
  memory x_user(p->x_user, engine(), const_cast<void*>(xc.raw_data()));
  memory x_mem = x_user;
  if (!p->x_direct) {
    x_mem = memory(p->pd.src_desc(), engine(), scratch(x_buffer, p->pd.src_desc().get_size()));
    run_onednn("reorder the input", [&] { dnnl::reorder(x_user, x_mem).execute(stream, x_user, x_mem); });
  }
  const WeightPacking packing{WeightPacking::Kind::OneDnnConvW, s.Cg * s.kH * s.kW, s.O, p->groups, 0, p->weight_layout};
  // The weights' zero points are all 0 (qconv_onednn_for): they do not change the conversion.
  const std::shared_ptr<const OneDnnWeights> converted =
      kept_packing_of<OneDnnWeights>(w.values, weight_constant, {}, packing, [&] {
        const Tensor wc = contiguous_copy(w.values);
        OneDnnWeights out;
        out.bytes.resize(p->pd.weights_desc().get_size());
        memory user(p->w_user, engine(), const_cast<void*>(wc.raw_data()));
        memory into(p->pd.weights_desc(), engine(), out.bytes.data());
        run_onednn("convert the weights", [&] {
          dnnl::reorder(user, into).execute(stream, user, into);
          stream.wait();
        });
        return out;
      });
  memory w_mem(p->pd.weights_desc(), engine(), const_cast<int8_t*>(converted->bytes.data()));
  memory y_user(p->y_user, engine(), y.raw_data());
  memory y_mem = p->y_direct ? y_user : memory(p->pd.dst_desc(), engine(), scratch(y_buffer, p->pd.dst_desc().get_size()));
  int32_t zx = zero_point_values(x.zero_point).at(0);
  memory zx_mem(memory::desc({1}, memory::data_type::s32, Tag::a), engine(), &zx);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x_mem},
                                       {DNNL_ARG_WEIGHTS, w_mem},
                                       {DNNL_ARG_DST, y_mem},
                                       {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zx_mem}};
  Tensor bias_c;
  if (bias.defined()) {
    bias_c = bias.is_contiguous() ? bias : contiguous_copy(bias);
    args.emplace(DNNL_ARG_BIAS, memory(memory::desc({s.O}, memory::data_type::s32, Tag::a), engine(),
                                       const_cast<void*>(bias_c.raw_data())));
  }
  run_onednn("run the convolution", [&] {
    p->conv.execute(stream, args);
    if (!p->y_direct) dnnl::reorder(y_mem, y_user).execute(stream, y_mem, y_user);
    stream.wait();
  });
  if (y.dtype() == DType::UInt8 && r.zero_point == 128) {  // int8 with zero point 0 -> uint8 with 128
    uint8_t* out = static_cast<uint8_t*>(y.raw_data());
    const int64_t n = y.numel();
    for (int64_t i = 0; i < n; ++i) out[i] ^= 0x80;
  }
}

}  // namespace smelt::kernels

#else

namespace smelt::kernels {

struct QConvOneDnn {
  std::atomic<QConvChoice> choice{QConvChoice::Smelt};
};

std::shared_ptr<QConvOneDnn> qconv_onednn_for(const Tensor&, const QuantizedTensor&, const QuantizedTensor&,
                                              const Tensor&, const Requant&, const QConvGeometry&, bool) {
  return nullptr;
}

bool qconv_onednn_applies(const Tensor&, const QuantizedTensor&, const QuantizedTensor&, const Tensor&,
                          const Requant&, const QConvGeometry&) {
  return false;
}

std::atomic<QConvChoice>& qconv_onednn_choice(QConvOneDnn& conv) { return conv.choice; }

void qconv_onednn_forward(const QConvOneDnn&, const Tensor&, const QuantizedTensor&, const QuantizedTensor&,
                          const Tensor&, const Requant&, bool) {
  SMELT_INTERNAL_CHECK(false) << "qconv_onednn_forward: smelt was built without oneDNN";
}

}  // namespace smelt::kernels

#endif
