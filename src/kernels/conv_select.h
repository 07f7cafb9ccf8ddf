// Which implementation runs a conv2d forward, per shape.
//
// Implementations (conv_impl_supports says which apply to a geometry and dtype):
//   gemm            im2col (none for stride-1 unpadded 1x1 convs: the image is its own column
//                   matrix) + gemm with GemmImpl::Auto (kernels/gemm.h chooses own or OpenBLAS)
//   gemm_own        the same with smelt's own GEMM
//   gemm_openblas   the same with OpenBLAS's GEMM
//   depthwise       kernels/conv_depthwise.h (groups == C == O only)
//   onednn          oneDNN's convolution (kernels/conv_onednn.h; float32, when built with it)
//   onednn_winograd oneDNN's Winograd convolution (3x3 stride 1, groups 1, where oneDNN has one)
//   direct          kernels/conv_direct.h: few taps per output (C kH kW <= 32, groups 1), a stem
//
// The choice for a shape, in order:
//   1. SMELT_CONV=<name> pins one implementation wherever it applies (elsewhere, step 3);
//   2. the tuning table: an entry measured by conv_tune (by `smelt tune model.onnx`, or earlier
//      in this process) and kept by the installed ConvTuningStore (runtime/tuning_file.h: a file
//      in the cache dir), so every process on this machine makes the same choice;
//   3. a heuristic (measured on this project's bench machine, see conv_select.cpp): direct for
//      stems (few taps per output), oneDNN's Winograd for 3x3 stride-1 convolutions where it
//      exists, oneDNN for other convolutions with a spatial kernel (groups 1) and for depthwise
//      ones on small images, depthwise for other depthwise shapes, else gemm.
// The choice is fixed per shape within a process (lookups are cached), so repeated calls are
// bitwise identical. With SMELT_DEBUG >= 2 each shape's first choice is printed with its source.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/conv.h"

namespace smelt::kernels {

enum class ConvImpl : uint8_t { Auto, Gemm, GemmOwn, GemmOpenBlas, Depthwise, OneDnn, OneDnnWinograd, Direct };
inline constexpr ConvImpl kConvImpls[] = {ConvImpl::Gemm,      ConvImpl::GemmOwn, ConvImpl::GemmOpenBlas,
                                          ConvImpl::Depthwise, ConvImpl::OneDnn,  ConvImpl::OneDnnWinograd,
                                          ConvImpl::Direct};

const char* conv_impl_name(ConvImpl impl);
// nullopt for an unknown name.
std::optional<ConvImpl> conv_impl_from_name(const std::string& name);

bool conv_impl_supports(ConvImpl impl, const Conv2dGeometry& g, DType dtype);

// The tuning-table key of a forward conv: dtype, thread count, the whole geometry, and whether the
// weight is constant (a compiled plan's: oneDNN then keeps it in its own layout, which changes
// what is fastest).
std::string conv_tuning_key(const Conv2dGeometry& g, DType dtype, bool weight_constant = false);

// Where tuning decisions persist across processes (installed by runtime/tuning_file.cpp).
class ConvTuningStore {
 public:
  virtual ~ConvTuningStore() = default;
  // The implementation name recorded for `key`, if any.
  virtual std::optional<std::string> lookup(const std::string& key) = 0;
  // Records (and persists) a decision; `detail` is a human-readable line of the measurements.
  virtual void record(const std::string& key, const std::string& impl, const std::string& detail) = 0;
};
// nullptr uninstalls. The store must outlive every later conv call.
void conv_set_tuning_store(ConvTuningStore* store);
// The installed store's decision for `key`, or records one (and persists it): decisions other than
// a conv's implementation (the blocked layout's, runtime/layout_choice.h) keep to the same file.
// Without a store: nullopt, and nothing recorded.
std::optional<std::string> tuning_store_lookup(const std::string& key);
void tuning_store_record(const std::string& key, const std::string& choice, const std::string& detail);

// The implementation conv2d_forward uses for (g, dtype) (never Auto).
ConvImpl conv_choice(const Conv2dGeometry& g, DType dtype, bool weight_constant = false);

struct ConvCandidateTime {
  ConvImpl impl;
  double ms;  // best of the timed runs
};
struct ConvTuneResult {
  std::string key;
  ConvImpl best = ConvImpl::Gemm;
  std::vector<ConvCandidateTime> times;
};
// Measures every supported implementation on scratch tensors of the shape (one warm-up and
// `runs` timed runs each), records the fastest in the tuning table and store, and returns it.
ConvTuneResult conv_tune(const Conv2dGeometry& g, DType dtype, int runs = 3, bool weight_constant = false);

// Runs one implementation (conv_impl_supports(impl, g, dtype) must hold; Auto: conv_choice).
// Arguments as conv2d_forward (kernels/conv.h).
void conv2d_forward_with(ConvImpl impl, const Conv2dGeometry& g, const Tensor& y, const Tensor& x, const Tensor& w,
                         const GemmEpilogue* epilogue = nullptr, bool weight_constant = false);

// Forgets the in-process cache of choices (tests).
void conv_choice_reset();

}  // namespace smelt::kernels
