#include "kernels/conv.h"

#include <algorithm>
#include <vector>

#include "base/parallel.h"
#include "kernels/conv_depthwise.h"
#include "kernels/conv_direct.h"
#include "kernels/conv_onednn.h"
#include "kernels/conv_select.h"
#include "kernels/gemm.h"
#include "kernels/loops.h"

namespace smelt::kernels {
namespace {

// Per-image work below this (flops) is cheap enough that images, not GEMMs, should be threaded.
constexpr double kSmallImageFlops = 2.0e7;
// Whole convolutions below this (flops) run on one thread: a fork-join costs a few microseconds.
constexpr double kMinParallelFlops = 2.0e6;

bool is_pointwise(const Conv2dGeometry& g) {
  return g.kH == 1 && g.kW == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 &&
         g.pad_w == 0;
}

int64_t col_rows(const Conv2dGeometry& g) { return g.C / g.groups * g.kH * g.kW; }

// The input pixel column range [ow_begin, ow_end) of output columns that read inside the image
// for kernel column kj; outside it the column matrix holds zeros.
void valid_columns(const Conv2dGeometry& g, int64_t kj, int64_t* ow_begin, int64_t* ow_end) {
  const int64_t offset = kj * g.dil_w - g.pad_w;  // iw = ow * stride + offset
  int64_t lo = offset >= 0 ? 0 : (-offset + g.stride_w - 1) / g.stride_w;
  int64_t hi = g.W - offset <= 0 ? 0 : (g.W - offset + g.stride_w - 1) / g.stride_w;
  *ow_begin = std::min(lo, g.Wo);
  *ow_end = std::clamp(hi, *ow_begin, g.Wo);
}

// Channels per thread chunk of im2col / col2im (threaded only outside a parallel region).
int64_t channel_grain(const Conv2dGeometry& g) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, g.kH * g.kW * g.Ho * g.Wo));
}

// The rows of col (R, rows [oh0, oh1) of the output flattened) that channels [c0, c1) of one image's
// group x (Cg, H, W) fill: im2col of a band of output rows.
template <class T>
void im2col_rows(const Conv2dGeometry& g, const T* x, int64_t c0, int64_t c1, int64_t oh0, int64_t oh1, T* col) {
  const int64_t cols = (oh1 - oh0) * g.Wo;
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t ki = 0; ki < g.kH; ++ki) {
      for (int64_t kj = 0; kj < g.kW; ++kj) {
        T* row = col + ((c * g.kH + ki) * g.kW + kj) * cols;
        int64_t ow_begin, ow_end;
        valid_columns(g, kj, &ow_begin, &ow_end);
        const int64_t iw0 = kj * g.dil_w - g.pad_w;
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          T* out = row + (oh - oh0) * g.Wo;
          const int64_t ih = oh * g.stride_h - g.pad_h + ki * g.dil_h;
          if (ih < 0 || ih >= g.H) {
            std::fill(out, out + g.Wo, T(0));
            continue;
          }
          const T* in = x + (c * g.H + ih) * g.W + iw0;
          std::fill(out, out + ow_begin, T(0));
          if (g.stride_w == 1) {
            std::copy(in + ow_begin, in + ow_end, out + ow_begin);
          } else {
            for (int64_t ow = ow_begin; ow < ow_end; ++ow) out[ow] = in[ow * g.stride_w];
          }
          std::fill(out + ow_end, out + g.Wo, T(0));
        }
      }
    }
  }
}

// col (R, Ho Wo) from one image's channels of one group: x (Cg, H, W).
template <class T>
void im2col(const Conv2dGeometry& g, const T* x, T* col) {
  parallel_for(g.C / g.groups, channel_grain(g), [&](int64_t c_begin, int64_t c_end) {
    im2col_rows(g, x, c_begin, c_end, 0, g.Ho, col);
  });
}

// col (R, rows [oh0, oh1) of the output flattened) for one image's group: im2col of a band.
template <class T>
void im2col_band(const Conv2dGeometry& g, const T* x, int64_t oh0, int64_t oh1, T* col) {
  im2col_rows(g, x, 0, g.C / g.groups, oh0, oh1, col);
}

// dx (Cg, H, W) += col2im(col (R, Ho Wo)): the adjoint of im2col.
template <class T>
void col2im_add(const Conv2dGeometry& g, const T* col, T* dx) {
  const int64_t Cg = g.C / g.groups, HoWo = g.Ho * g.Wo;
  parallel_for(Cg, channel_grain(g), [&](int64_t c_begin, int64_t c_end) {
    for (int64_t c = c_begin; c < c_end; ++c) {
      for (int64_t ki = 0; ki < g.kH; ++ki) {
        for (int64_t kj = 0; kj < g.kW; ++kj) {
          const T* row = col + ((c * g.kH + ki) * g.kW + kj) * HoWo;
          int64_t ow_begin, ow_end;
          valid_columns(g, kj, &ow_begin, &ow_end);
          const int64_t iw0 = kj * g.dil_w - g.pad_w;
          for (int64_t oh = 0; oh < g.Ho; ++oh) {
            const int64_t ih = oh * g.stride_h - g.pad_h + ki * g.dil_h;
            if (ih < 0 || ih >= g.H) continue;
            const T* in = row + oh * g.Wo;
            T* out = dx + (c * g.H + ih) * g.W + iw0;
            for (int64_t ow = ow_begin; ow < ow_end; ++ow) out[ow * g.stride_w] += in[ow];
          }
        }
      }
    }
  });
}

// Runs fn(image, column_buffer) for every image: in parallel over images (one buffer per thread)
// when that keeps the threads busy, else one image at a time (threads inside the GEMM).
template <class T, class F>
void for_each_image(const Conv2dGeometry& g, double image_flops, const F& fn) {
  const int threads = num_threads();
  const size_t col_size = is_pointwise(g) ? 0 : size_t(col_rows(g) * g.Ho * g.Wo);
  const bool over_images = threads > 1 && g.N >= threads &&
                           image_flops * double(g.N) >= kMinParallelFlops &&
                           (image_flops < kSmallImageFlops || g.N % threads == 0 ||
                            g.N >= 4 * threads);
  if (!over_images) {
    std::vector<T> col(col_size);
    for (int64_t n = 0; n < g.N; ++n) fn(n, col.data());
    return;
  }
  parallel_for(g.N, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> col(col_size);
    for (int64_t n = begin; n < end; ++n) fn(n, col.data());
  });
}

// Column-matrix elements per band of output rows: 128 Ki floats (512 KiB) sit in L2 next to the
// weights, so the GEMM reads its B operand from cache instead of memory.
constexpr int64_t kBandElements = int64_t(1) << 17;

// An epilogue seen from the sub-matrix of C at (row0, col0): tiles reach `outer` in the whole
// output's coordinates.
struct ShiftedEpilogue {
  const GemmEpilogue* outer;
  int64_t row0, col0;
  GemmEpilogue get() const {
    GemmEpilogue e;
    e.ctx = const_cast<ShiftedEpilogue*>(this);
    e.fn = [](void* ctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      const auto* s = static_cast<const ShiftedEpilogue*>(ctx);
      (*s->outer)(s->row0 + r0, s->row0 + r1, s->col0 + c0, s->col0 + c1);
    };
    return e;
  }
};


// Pointwise convolutions: one GEMM per image and group on the image itself (threads inside the
// GEMM, or over images when there are enough).
template <class T>
void forward_pointwise(const Conv2dGeometry& g, T* y, const T* x, const T* w, const GemmEpilogue* epilogue,
                       GemmImpl impl) {
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups, R = col_rows(g), HoWo = g.Ho * g.Wo;
  const double image_flops = 2.0 * double(g.O) * double(R) * double(HoWo);
  for_each_image<T>(g, image_flops, [&](int64_t n, T*) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const GemmEpilogueShift shift(epilogue, n * g.O + grp * Og);
      gemm<T>(Og, HoWo, R, T(1), w + grp * Og * R, R, 1, x + (n * g.C + grp * Cg) * g.H * g.W, HoWo, 1, T(0),
              y + (n * g.O + grp * Og) * HoWo, HoWo, 1, impl, shift.get());
    }
  });
}

// Other convolutions: the output is cut into bands of whole rows whose column matrix fits L2;
// each task (image, group, band) builds its band's columns and runs a single-threaded GEMM on
// them, and threads take tasks. The band size depends only on the geometry, so the bits do not
// depend on the thread count.
template <class T>
void forward_banded(const Conv2dGeometry& g, T* y, const T* x, const T* w, const GemmEpilogue* epilogue,
                    GemmImpl impl) {
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups, R = col_rows(g), HoWo = g.Ho * g.Wo;
  const int64_t band_rows = std::clamp<int64_t>(kBandElements / std::max<int64_t>(1, R * g.Wo), 1, g.Ho);
  const int64_t bands = (g.Ho + band_rows - 1) / band_rows;
  const int64_t tasks = g.N * g.groups * bands;
  const double flops = 2.0 * double(g.O) * double(R) * double(HoWo) * double(g.N);
  const int threads = flops >= kMinParallelFlops ? int(std::min<int64_t>(num_threads(), tasks)) : 1;
  auto run_task = [&](int64_t task, T* col) {
    const int64_t band = task % bands, grp = task / bands % g.groups, n = task / bands / g.groups;
    const int64_t oh0 = band * band_rows, oh1 = std::min(g.Ho, oh0 + band_rows), cols = (oh1 - oh0) * g.Wo;
    im2col_band(g, x + (n * g.C + grp * Cg) * g.H * g.W, oh0, oh1, col);
    const int64_t row0 = n * g.O + grp * Og, col0 = oh0 * g.Wo;
    const ShiftedEpilogue shifted{epilogue, row0, col0};
    const GemmEpilogue on_tile = shifted.get();
    gemm<T>(Og, cols, R, T(1), w + grp * Og * R, R, 1, col, cols, 1, T(0), y + row0 * HoWo + col0, HoWo, 1, impl,
            epilogue ? &on_tile : nullptr);
  };
  const size_t col_size = size_t(R * band_rows * g.Wo);
  if (threads <= 1) {
    std::vector<T> col(col_size);
    for (int64_t t = 0; t < tasks; ++t) run_task(t, col.data());
    return;
  }
  ParallelErrors errors;
#pragma omp parallel num_threads(threads)
  {
    std::vector<T> col;
    errors.run([&] { col.resize(col_size); });  // bad_alloc: recorded, every later task skipped
    // Every thread reaches the loop (a worksharing construct must be met by the whole team).
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) errors.run([&] { run_task(t, col.data()); });
  }
  errors.rethrow();
}

template <class T>
void forward_impl(const Conv2dGeometry& g, T* y, const T* x, const T* w, const GemmEpilogue* epilogue,
                  GemmImpl impl) {
  if (is_pointwise(g)) return forward_pointwise(g, y, x, w, epilogue, impl);
  forward_banded(g, y, x, w, epilogue, impl);
}

template <class T>
void backward_input_impl(const Conv2dGeometry& g, T* dx, const T* dy, const T* w) {
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups, R = col_rows(g), HoWo = g.Ho * g.Wo;
  const double image_flops = 2.0 * double(g.O) * double(R) * double(HoWo);
  for_each_image<T>(g, image_flops, [&](int64_t n, T* col) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      T* dxg = dx + (n * g.C + grp * Cg) * g.H * g.W;
      const T* wg = w + grp * Og * R;  // (Og, R), read transposed
      const T* dyg = dy + (n * g.O + grp * Og) * HoWo;
      if (is_pointwise(g)) {
        gemm<T>(R, HoWo, Og, T(1), wg, 1, R, dyg, HoWo, 1, T(0), dxg, HoWo, 1);
        continue;
      }
      gemm<T>(R, HoWo, Og, T(1), wg, 1, R, dyg, HoWo, 1, T(0), col, HoWo, 1);
      std::fill(dxg, dxg + Cg * g.H * g.W, T(0));
      col2im_add(g, col, dxg);
    }
  });
}

template <class T>
void backward_weight_impl(const Conv2dGeometry& g, T* dw, const T* x, const T* dy) {
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups, R = col_rows(g), HoWo = g.Ho * g.Wo;
  const int64_t w_size = g.O * R;
  // Images are split into `parts` runs, each summed into its own dw; the parts are added last.
  const double flops = 2.0 * double(g.O) * double(R) * double(HoWo) * double(g.N);
  const int threads = flops >= kMinParallelFlops ? num_threads() : 1;
  const int parts = int(std::min<int64_t>(threads, g.N));
  std::vector<T> partials(size_t(std::max(parts - 1, 0)) * size_t(w_size));
  const size_t col_size = is_pointwise(g) ? 0 : size_t(R * HoWo);
  auto run_part = [&](int p) {
    T* acc = p == 0 ? dw : partials.data() + size_t(p - 1) * size_t(w_size);
    std::fill(acc, acc + w_size, T(0));
    std::vector<T> col(col_size);
    for (int64_t n = g.N * p / parts; n < g.N * (p + 1) / parts; ++n) {
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const T* xg = x + (n * g.C + grp * Cg) * g.H * g.W;
        const T* cols = xg;
        if (!is_pointwise(g)) {
          im2col(g, xg, col.data());
          cols = col.data();
        }
        gemm<T>(Og, R, HoWo, T(1), dy + (n * g.O + grp * Og) * HoWo, HoWo, 1, cols, 1, HoWo, T(1),
                acc + grp * Og * R, R, 1);
      }
    }
  };
  if (parts <= 1) {
    if (g.N == 0) std::fill(dw, dw + w_size, T(0));
    else run_part(0);
    return;
  }
  ParallelErrors errors;  // an exception in run_part (bad_alloc) reaches the caller
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int p = 0; p < parts; ++p) errors.run([&] { run_part(p); });
  errors.rethrow();
  for (int p = 1; p < parts; ++p) {
    const T* part = partials.data() + size_t(p - 1) * size_t(w_size);
    for (int64_t i = 0; i < w_size; ++i) dw[i] += part[i];
  }
}

}  // namespace

namespace {
thread_local int t_unversioned_writes = 0;
}  // namespace

UnversionedWritesScope::UnversionedWritesScope() { ++t_unversioned_writes; }
UnversionedWritesScope::~UnversionedWritesScope() { --t_unversioned_writes; }
bool UnversionedWritesScope::active() { return t_unversioned_writes > 0; }

namespace {
thread_local int t_plan_scopes = 0;
thread_local uint64_t t_plan_step = 0;
struct ModerateFact {
  const float* p = nullptr;
  int64_t n = 0;
  uint64_t step = 0;
};
thread_local ModerateFact t_moderate;
}  // namespace

PlanStepScope::PlanStepScope() {
  ++t_plan_scopes;
  t_moderate = {};
}
PlanStepScope::~PlanStepScope() {
  --t_plan_scopes;
  t_moderate = {};
}
void PlanStepScope::next() { ++t_plan_step; }

void plan_step_record_moderate(const float* p, int64_t n) {
  if (t_plan_scopes > 0) t_moderate = {p, n, t_plan_step};
}

bool plan_step_moderate_known(const float* p, int64_t n) {
  return t_plan_scopes > 0 && p && t_moderate.p == p && t_moderate.n == n && t_moderate.step + 1 == t_plan_step;
}

void conv2d_forward_with(ConvImpl impl, const Conv2dGeometry& g, const Tensor& y, const Tensor& x, const Tensor& w,
                         const GemmEpilogue* epilogue, bool weight_constant) {
  if (impl == ConvImpl::Auto) impl = conv_choice(g, x.dtype(), weight_constant);
  SMELT_INTERNAL_CHECK(conv_impl_supports(impl, g, x.dtype()))
      << "conv2d: implementation " << conv_impl_name(impl) << " does not apply to " << conv_tuning_key(g, x.dtype());
  if ((impl == ConvImpl::OneDnn || impl == ConvImpl::OneDnnWinograd) && !conv2d_onednn_exact(g, w, weight_constant)) {
    impl = ConvImpl::Gemm;  // a non-finite weight meets the padding: only the GEMM path multiplies it there
  }
  if (impl == ConvImpl::Depthwise) return conv2d_depthwise_forward(g, y, x, w, epilogue);
  if (impl == ConvImpl::Direct) return conv2d_direct_forward(g, y, x, w, epilogue);
  if (impl == ConvImpl::OneDnn) return conv2d_onednn_forward(g, y, x, w, epilogue, weight_constant);
  if (impl == ConvImpl::OneDnnWinograd) {
    return conv2d_onednn_forward(g, y, x, w, epilogue, weight_constant, /*winograd=*/true);
  }
  const GemmImpl gemm_impl = impl == ConvImpl::GemmOwn        ? GemmImpl::Own
                             : impl == ConvImpl::GemmOpenBlas ? GemmImpl::OpenBlas
                                                              : GemmImpl::Auto;
  SMELT_DISPATCH_FLOATING(x.dtype(), "conv2d", [&] {
    forward_impl<scalar_t>(g, y.data<scalar_t>(), x.data<scalar_t>(), w.data<scalar_t>(), epilogue, gemm_impl);
  });
}

void conv2d_forward(const Conv2dGeometry& g, const Tensor& y, const Tensor& x, const Tensor& w,
                    const GemmEpilogue* epilogue, bool weight_constant) {
  conv2d_forward_with(ConvImpl::Auto, g, y, x, w, epilogue, weight_constant);
}

// The gradients are not tuned: depthwise shapes take the depthwise kernels, the rest im2col + GEMM.
void conv2d_backward_input(const Conv2dGeometry& g, const Tensor& dx, const Tensor& dy,
                           const Tensor& w) {
  if (conv2d_is_depthwise(g)) return conv2d_depthwise_backward_input(g, dx, dy, w);
  SMELT_DISPATCH_FLOATING(dy.dtype(), "conv2d_grad_input", [&] {
    backward_input_impl<scalar_t>(g, dx.data<scalar_t>(), dy.data<scalar_t>(), w.data<scalar_t>());
  });
}

void conv2d_backward_weight(const Conv2dGeometry& g, const Tensor& dw, const Tensor& x,
                            const Tensor& dy) {
  if (conv2d_is_depthwise(g)) return conv2d_depthwise_backward_weight(g, dw, x, dy);
  SMELT_DISPATCH_FLOATING(x.dtype(), "conv2d_grad_weight", [&] {
    backward_weight_impl<scalar_t>(g, dw.data<scalar_t>(), x.data<scalar_t>(), dy.data<scalar_t>());
  });
}

}  // namespace smelt::kernels
