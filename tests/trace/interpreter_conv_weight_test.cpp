// The interpreter lets a conv2d whose weight is a graph constant keep the weight converted to a
// library's layout between runs (an imported model run again and again): the results stay those
// of a fresh eager conv, also after the constant is written in place.
#include "kernels/conv_onednn.h"
#include "kernels/conv_select.h"
#include "ops/conv_geometry.h"
#include "support/check.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt {
namespace {

TEST(InterpreterConvWeight, ConstantWeightConvertedOnceAndWritesInPlaceAreSeen) {
  // Large enough (1.5e7 flops, 3x3) that the heuristic picks oneDNN where smelt has it.
  Tensor x = randn({1, 16, 40, 40}), w = randn({32, 16, 3, 3}), b = randn({32});
  auto g = trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    return std::vector<Tensor>{conv2d(in[0], w, b, 1, 1)};
  }, {x});
  ir::Value* weight = nullptr;
  for (ir::Value* c : g->constants()) {
    if (c->meta.shape == w.shape()) weight = c;
  }
  ASSERT_NE(weight, nullptr);
  Tensor held = weight->constant;  // the graph's tensor: writes to it are writes to the constant
  const kernels::Conv2dGeometry geo = ops::conv2d_geometry(x.shape(), w.shape(), {{"stride", std::vector<int64_t>{1, 1}},
      {"padding", std::vector<int64_t>{1, 1}}, {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t(1)}});
  const kernels::ConvImpl impl = kernels::conv_choice(geo, DType::Float32, /*weight_constant=*/true);
  const bool onednn = impl == kernels::ConvImpl::OneDnn || impl == kernels::ConvImpl::OneDnnWinograd;

  const uint64_t before = kernels::onednn_weight_conversions();
  const Tensor first = trace::interpret(*g, {x})[0];
  for (int run = 0; run < 3; ++run) {
    EXPECT_TRUE(testing::all_close(trace::interpret(*g, {x})[0], conv2d(x, held, b, 1, 1), 1e-4, 1e-5)) << run;
  }
  // Four runs, one conversion (the eager reference reuses it too: the same memory and version).
  if (onednn) {
    EXPECT_EQ(kernels::onednn_weight_conversions(), before + 1);
  }

  held.mul_(-2.0);  // in place: the storage version changes
  const Tensor changed = trace::interpret(*g, {x})[0];
  EXPECT_TRUE(testing::all_close(changed, conv2d(x, held, b, 1, 1), 1e-4, 1e-5));
  EXPECT_FALSE(testing::all_close(changed, first, 1e-4, 1e-5));
  if (onednn) {
    EXPECT_EQ(kernels::onednn_weight_conversions(), before + 2);
  }
}

}  // namespace
}  // namespace smelt
