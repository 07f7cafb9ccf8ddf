// 2-D convolution kernels (cross-correlation, as PyTorch).
//
// Letters: N batch, C input channels, H W input size, O output channels, G groups (C and O split
// into G equal parts Cg = C / G, Og = O / G), kH kW kernel size, Ho Wo output size,
// R = Cg kH kW the rows of an image's column matrix.
//
//   forward      y[n, g] (Og, Ho Wo) = w[g] (Og, R) @ col(x[n, g]) (R, Ho Wo)
//   grad input   dx[n, g] = col2im( w[g]^T (R, Og) @ dy[n, g] (Og, Ho Wo) )
//   grad weight  dw[g] (Og, R) = sum_n dy[n, g] (Og, Ho Wo) @ col(x[n, g])^T (Ho Wo, R)
//
// The forward has several implementations, chosen per shape by kernels/conv_select.h: im2col +
// GEMM here (with smelt's or OpenBLAS's GEMM), the depthwise kernels (conv_depthwise.h) and
// oneDNN (conv_onednn.h). Here: 1x1 kernels with stride 1 and no padding skip im2col (the image
// already is its column matrix); other forward convolutions build the column matrix one band of
// output rows at a time, small enough to stay in L2 for the GEMM that reads it, and threads take
// (image, group, band) tasks. The gradients thread over images when there are enough of them
// (each with its own column buffer), otherwise into im2col / col2im (over channels) and the GEMM;
// depthwise shapes take the depthwise kernels.
#pragma once

#include <cstdint>

#include "kernels/gemm.h"
#include "smelt/tensor.h"

namespace smelt::kernels {

struct Conv2dGeometry {
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t O = 0, kH = 0, kW = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  int64_t groups = 1;
  int64_t Ho = 0, Wo = 0;
};

// Output extent of a convolution or pooling window along one dim; 0 when the dilated window
// does not fit the padded input.
inline int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                int64_t dilation) {
  const int64_t room = in + 2 * pad - dilation * (kernel - 1) - 1;  // < 0: no window fits
  return room < 0 ? 0 : room / stride + 1;
}

// While a scope is open on this thread, implementations keep no converted copy of a weight that
// is not marked constant: every call converts afresh (tests compare kept conversions with fresh
// ones). A compiled plan needs none: its generated kernels write the arena through raw pointers,
// which leave storage versions as they are, but a kept conversion of a weight that is not constant
// is used only while the weight's bytes equal a copy taken when it was converted
// (kernels/conv_onednn.h).
class UnversionedWritesScope {
 public:
  UnversionedWritesScope();
  ~UnversionedWritesScope();
  UnversionedWritesScope(const UnversionedWritesScope&) = delete;
  UnversionedWritesScope& operator=(const UnversionedWritesScope&) = delete;
  static bool active();
};

// What a compiled plan's step knows about the values it wrote, kept for the next step only. A plan
// runs its steps one after another on one thread, and nothing writes its arena between the end of
// one step and the start of the next: a fact about the memory a step wrote still holds when the
// next step starts, and no later (a later step may reuse that memory). Plan::run opens a scope
// around its steps and calls next() before each one. Outside a scope (eager calls, whose tensors
// the caller may write at any time) nothing is recorded or trusted; a scope forgets every fact
// when it opens and when it closes (a plan run from inside another plan's step).
class PlanStepScope {
 public:
  PlanStepScope();
  ~PlanStepScope();
  PlanStepScope(const PlanStepScope&) = delete;
  PlanStepScope& operator=(const PlanStepScope&) = delete;
  static void next();  // a step starts
};
// The running step wrote `n` floats at `p`, every one with |v| <= 2^40 (no NaN, no infinity): a
// oneDNN clamp to such bounds (conv_onednn.cpp), which the next step's conv need not scan again.
void plan_step_record_moderate(const float* p, int64_t n);
// Whether the step just before the running one recorded exactly these n floats at p.
bool plan_step_moderate_known(const float* p, int64_t n);

// All tensors contiguous, same floating dtype; outputs allocated by the caller.
// `epilogue` (kernels/gemm.h) gets tiles of y seen as the matrix (N O, Ho Wo).
// `weight_constant`: the caller promises that w's memory never changes while the tensor lives (a
// compiled plan's constant), so an implementation may keep w converted to its own layout.
void conv2d_forward(const Conv2dGeometry& g, const Tensor& y /*(N, O, Ho, Wo)*/,
                    const Tensor& x /*(N, C, H, W)*/, const Tensor& w /*(O, Cg, kH, kW)*/,
                    const GemmEpilogue* epilogue = nullptr, bool weight_constant = false);
void conv2d_backward_input(const Conv2dGeometry& g, const Tensor& dx /*(N, C, H, W)*/,
                           const Tensor& dy /*(N, O, Ho, Wo)*/, const Tensor& w /*(O, Cg, kH, kW)*/);
void conv2d_backward_weight(const Conv2dGeometry& g, const Tensor& dw /*(O, Cg, kH, kW)*/,
                            const Tensor& x /*(N, C, H, W)*/, const Tensor& dy /*(N, O, Ho, Wo)*/);

}  // namespace smelt::kernels
