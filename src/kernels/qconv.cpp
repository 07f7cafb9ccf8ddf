// The quantized 2-D convolution over NCHW images (kernels/quantize.h, docs/quantization.md).
//
// Each group is one weights-on-the-left integer GEMM (qgemm_s8u8): output channels are rows, so
// the result lands in NCHW as it is computed, and X's K rows (one per (channel, kh, kw) tap) are
// read where they lie:
// - the image is padded and split into its stride phases (split_phases; nothing is copied without
//   padding and stride): then the tap (c, i, j) of every output pixel is one contiguous run of a
//   phase, when the output is computed a phase's width wide; the columns past the output's width
//   are dropped by the GEMM's store. No im2col.
// - one input channel per group (depthwise): a direct loop per channel over the same phase frames
//   (kernels/qconv_depthwise.cpp), since a GEMM of one row would waste its tile.
// Padding reads the input's zero point, so it stands for 0.
// Where oneDNN's int8 convolution computes the same bytes (kernels/qconv_onednn.h), the faster of
// the two, measured on a shape's first call, runs it (choose_onednn).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/env.h"
#include "base/log.h"
#include "base/parallel.h"
#include "kernels/conv_select.h"
#include "kernels/qconv_frames.h"
#include "kernels/qconv_onednn.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_tiles.h"
#include "kernels/quantize.h"
#include "kernels/quantize_params.h"
#include "kernels/transpose.h"
#include "smelt/error.h"

namespace smelt::kernels {
namespace {

// A buffer of the calling thread, grown as needed and kept: a model's convolutions reuse it.
uint8_t* scratch(std::vector<uint8_t>& buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

double best_ms_of(const std::function<void()>& run, int runs) {
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

std::atomic<bool> remeasure_choices{false};
std::mutex choice_mutex;  // one measurement at a time (two would time each other), and the log
std::vector<std::string> measured_log;  // "key -> choice (times)" of each measurement

// Which implementation runs a shape both compute alike, decided on its first call and kept with
// the shape's oneDNN primitive: the tuning store's record for the shape (runtime/tuning_file.h:
// every process on the machine agrees), or a measurement (a warm-up and three timed runs of each,
// alternating; each run writes the same y), recorded there. qconv_remeasure_choices() skips the
// record (`smelt tune`: a choice measured on a loaded machine is not kept for good).
bool choose_onednn(QConvOneDnn& conv, const std::function<std::string()>& key_of, const std::function<void()>& smelt,
                   const std::function<void()>& onednn) {
  std::atomic<QConvChoice>& slot = qconv_onednn_choice(conv);
  if (const QConvChoice known = slot.load(std::memory_order_acquire); known != QConvChoice::Unchosen) {
    return known == QConvChoice::OneDnn;
  }
  std::lock_guard<std::mutex> lock(choice_mutex);
  if (const QConvChoice known = slot.load(std::memory_order_acquire); known != QConvChoice::Unchosen) {
    return known == QConvChoice::OneDnn;
  }
  bool use_onednn = false;
  const std::string key = key_of();
  const std::optional<std::string> recorded =
      remeasure_choices.load() ? std::nullopt : tuning_store_lookup(key);
  if (recorded) {
    use_onednn = *recorded == "onednn";
    debug_log(2, key + " -> " + *recorded + " (tuning file)");
  } else {
    smelt();
    onednn();
    double smelt_ms = 1e300, onednn_ms = 1e300;
    for (int round = 0; round < 3; ++round) {
      smelt_ms = std::min(smelt_ms, best_ms_of(smelt, 1));
      onednn_ms = std::min(onednn_ms, best_ms_of(onednn, 1));
    }
    use_onednn = onednn_ms < smelt_ms;
    const std::string detail = "smelt " + std::to_string(smelt_ms) + " ms, onednn " + std::to_string(onednn_ms) + " ms";
    tuning_store_record(key, use_onednn ? "onednn" : "smelt", detail);
    const std::string line = key + " -> " + (use_onednn ? "onednn" : "smelt") + " (measured: " + detail + ")";
    debug_log(2, line);
    measured_log.push_back(line);
  }
  slot.store(use_onednn ? QConvChoice::OneDnn : QConvChoice::Smelt, std::memory_order_release);
  return use_onednn;
}

void quantized_conv2d_own(const Tensor& y, const QuantizedTensor& x, const QuantizedTensor& w, const Tensor& bias,
                          const Requant& r, const QConvGeometry& g, bool weight_constant);

std::string qconv_key(const QuantizedTensor& x, const QuantizedTensor& w, const Tensor& y, const QConvGeometry& g,
                      bool bias, bool weight_constant) {
  std::string k = "qconv threads=" + std::to_string(num_threads()) + " x=" + dtype_name(x.values.dtype()) +
                  shape_str(x.values.shape()) + " w=" + shape_str(w.values.shape()) + " y=" + dtype_name(y.dtype());
  k += " stride=" + std::to_string(g.stride[0]) + "," + std::to_string(g.stride[1]);
  k += " pad=" + std::to_string(g.pad_begin[0]) + "," + std::to_string(g.pad_begin[1]) + "," +
       std::to_string(g.pad_end[0]) + "," + std::to_string(g.pad_end[1]);
  k += " dilation=" + std::to_string(g.dilation[0]) + "," + std::to_string(g.dilation[1]);
  k += " groups=" + std::to_string(g.groups) + (bias ? " bias" : "") + (weight_constant ? " constant" : "");
  return k;
}

}  // namespace

void qconv_remeasure_choices(bool on) { remeasure_choices.store(on); }

std::vector<std::string> qconv_take_measurements() {
  std::lock_guard<std::mutex> lock(choice_mutex);
  return std::exchange(measured_log, {});
}

int64_t qconv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                          int64_t pad_end, int64_t dilation) {
  const int64_t room = in + pad_begin + pad_end - dilation * (kernel - 1) - 1;
  return room < 0 ? 0 : room / stride + 1;
}

void quantized_conv2d_forward(const Tensor& y, const QuantizedTensor& x, const QuantizedTensor& w,
                              const Tensor& bias, const Tensor& y_scale,
                              const Tensor& y_zero_point, const QConvGeometry& g, bool weight_constant) {
  const char* op = y.dtype() == DType::Int32 ? "conv2d_integer" : "qlinear_conv2d";
  const Requant r = make_requant(y, x, w, y_scale, y_zero_point, w.values.size(0), op);
  if (y.numel() == 0) return;
  const auto own = [&] { quantized_conv2d_own(y, x, w, bias, r, g, weight_constant); };
  // SMELT_QCONV=smelt|onednn pins the implementation (docs/env.md); read first, so that a pinned
  // smelt does none of oneDNN's checks.
  const std::string pinned = env_choice("SMELT_QCONV", "auto", {"auto", "smelt", "onednn"});
  if (pinned == "smelt") return own();
  const std::shared_ptr<QConvOneDnn> conv = qconv_onednn_for(y, x, w, bias, r, g, weight_constant);
  if (conv) {
    const auto theirs = [&] { qconv_onednn_forward(*conv, y, x, w, bias, r, weight_constant); };
    if (pinned == "onednn" || choose_onednn(*conv, [&] { return qconv_key(x, w, y, g, bias.defined(), weight_constant); }, own, theirs)) {
      return theirs();
    }
  }
  own();
}

namespace {

// smelt's own kernels: depthwise windows, AMX's direct convolution, or the phase-frame GEMM.
void quantized_conv2d_own(const Tensor& y, const QuantizedTensor& x, const QuantizedTensor& w, const Tensor& bias,
                          const Requant& r, const QConvGeometry& g, bool weight_constant) {
  using namespace qconv;
  ConvShape s;
  s.N = x.values.size(0), s.C = x.values.size(1), s.H = x.values.size(2), s.W = x.values.size(3);
  s.O = w.values.size(0), s.Cg = w.values.size(1), s.kH = w.values.size(2), s.kW = w.values.size(3);
  s.Ho = y.size(2), s.Wo = y.size(3), s.groups = g.groups, s.Og = s.O / s.groups, s.K = s.Cg * s.kH * s.kW;
  const int64_t P = s.Ho * s.Wo;
  const bool x_int8 = x.values.dtype() == DType::Int8;
  const int32_t zx = zero_point_values(x.zero_point).at(0);
  const uint8_t pad_byte = uint8_t(zx);  // the zero point's own byte, in x's dtype
  const std::vector<int32_t> zw = zero_point_values(w.zero_point);
  const Tensor bias_c = bias.defined() ? contiguous_copy(bias) : Tensor();
  const int32_t* bias_data = bias_c.defined() ? bias_c.data<int32_t>() : nullptr;
  const Tensor xc = x.values.is_contiguous() ? x.values : contiguous_copy(x.values);
  const uint8_t* xv = static_cast<const uint8_t*>(xc.raw_data());
  if (s.Cg == 1) {
    const Tensor wv = contiguous_copy(w.values);
    return depthwise(xv, x_int8, zx, wv, zw, bias_data, r, s, g, y);
  }
  if (amx_direct_fits(s, zw, w.values.dtype() == DType::Int8)) {
    return amx_direct(xv, x_int8, zx, w.values, weight_constant, bias_data, r, s, g, y);
  }
  const size_t out_bytes = dtype_size(y.dtype());
  std::vector<std::shared_ptr<const QPackedW>> packed(size_t(s.groups));
  for (int64_t grp = 0; grp < s.groups; ++grp) {
    std::vector<int32_t> zw_group(1, zw.at(0));
    if (zw.size() != 1) zw_group.assign(zw.begin() + grp * s.Og, zw.begin() + (grp + 1) * s.Og);
    const WeightPacking packing{WeightPacking::Kind::ConvW, s.K, s.Og, s.groups, grp, 0};
    packed[size_t(grp)] = kept_packing_of<QPackedW>(w.values, weight_constant, zw_group, packing, [&] {
      const Tensor wv = contiguous_copy(w.values);  // (O, Cg, kH, kW): a group's rows are (Og, K)
      return qgemm_pack_w(static_cast<const uint8_t*>(wv.raw_data()) + grp * s.Og * s.K,
                          wv.dtype() == DType::UInt8, s.Og, s.K, s.K, zw_group, qgemm_s8u8_best_isa());
    });
  }
  // Without padding or stride the image is its own frame; otherwise it is split into phases.
  const bool in_place = g.stride[0] == 1 && g.stride[1] == 1 && !g.pad_begin[0] && !g.pad_begin[1] &&
                        !g.pad_end[0] && !g.pad_end[1];
  const Phases ph = in_place ? Phases{s.H, s.W, 1, 1} : phases_of(s, g);
  thread_local std::vector<uint8_t> frame_buffer;
  std::vector<const uint8_t*> rows(size_t(s.K));
  std::vector<int64_t> tap_offset(size_t(s.kH * s.kW));
  for (int64_t n = 0; n < s.N; ++n) {
    const uint8_t* frame = xv + n * s.C * s.H * s.W;
    if (!in_place) {
      uint8_t* split = scratch(frame_buffer, size_t(s.C * ph.s0 * ph.s1 * ph.Hq * ph.Wq));
      split_phases(frame, s, g, ph, pad_byte, split);
      frame = split;
    }
    for (int64_t grp = 0; grp < s.groups; ++grp) {
      // Row k = (c, i, j): the output computed Wq wide, the columns past Wo dropped by the store.
      // Tap (i, j) sits at the same place in every channel's frame (offset(0, ...)), and the
      // channels' frames follow one another: no division per row.
      const int64_t per_channel = ph.s0 * ph.s1 * ph.Hq * ph.Wq;
      for (int64_t i = 0, k = 0; i < s.kH; ++i) {
        for (int64_t j = 0; j < s.kW; ++j, ++k) tap_offset[size_t(k)] = ph.offset(0, i * g.dilation[0], j * g.dilation[1]);
      }
      const int64_t taps = s.kH * s.kW;
      for (int64_t c = 0; c < s.Cg; ++c) {
        const uint8_t* channel = frame + (grp * s.Cg + c) * per_channel;
        for (int64_t t = 0; t < taps; ++t) rows[size_t(c * taps + t)] = channel + tap_offset[size_t(t)];
      }
      QGemmX operand;
      operand.rows = rows.data();
      operand.n = (s.Ho - 1) * ph.Wq + s.Wo;
      operand.zero_point = zx + (x_int8 ? 128 : 0);
      operand.flip_sign = x_int8;
      QGemmRowOutput out;
      out.type = r.type;
      out.data = static_cast<char*>(y.raw_data()) + size_t((n * s.O + grp * s.Og) * P) * out_bytes;
      out.ldc = P;
      out.bias = bias_data ? bias_data + grp * s.Og : nullptr;
      if (!r.column.empty()) out.scale = r.column.data() + grp * s.Og;
      out.zero_point = r.zero_point;
      if (ph.Wq != s.Wo) out.padded_width = ph.Wq, out.width = s.Wo;
      qgemm_s8u8(*packed[size_t(grp)], operand, out);
    }
  }
}

}  // namespace

}  // namespace smelt::kernels
