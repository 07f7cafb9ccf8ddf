// Linear and Conv2d: the contraction layers and their default initialization.
#include <cmath>
#include <sstream>

#include "smelt/nn.h"

namespace smelt::nn {

namespace {
// PyTorch's default for Linear/Conv: kaiming_uniform(a = sqrt(5)) weight, which works out to
// uniform(+-1/sqrt(fan_in)); the bias gets the same bound.
void reset_contraction(const Tensor& weight, const Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (!bias.defined()) return;
  int64_t fan_in = init::fan_in_and_fan_out(weight).first;
  double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
  init::uniform_(bias, -bound, bound);
}

std::string ints(const std::vector<int64_t>& v) {
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << ")";
  return s.str();
}

void check_pair(const std::vector<int64_t>& v, const char* what, int64_t min_value) {
  SMELT_CHECK(v.size() == 2 && v[0] >= min_value && v[1] >= min_value)
      << "Conv2d: " << what << " must be two values >= " << min_value << ", got " << ints(v);
}
}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, DType dtype)
    : in_features(in_features), out_features(out_features) {
  SMELT_CHECK(in_features > 0 && out_features > 0)
      << "Linear: in_features and out_features must be positive, got " << in_features << " and "
      << out_features;
  weight = empty({out_features, in_features}, dtype);
  register_parameter("weight", weight);
  if (with_bias) {
    bias = empty({out_features}, dtype);
    register_parameter("bias", bias);
  }
  reset_parameters();
}

void Linear::reset_parameters() { reset_contraction(weight, bias); }

Tensor Linear::forward(const Tensor& x) {
  SMELT_CHECK(x.dim() >= 1 && x.size(-1) == in_features)
      << "Linear: expected input (..., " << in_features << "), got " << shape_str(x.shape());
  return linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
  std::ostringstream s;
  s << "in_features=" << in_features << ", out_features=" << out_features
    << ", bias=" << (bias.defined() ? "true" : "false");
  return s.str();
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, IntOr2 kernel_size, Options options)
    : in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(kernel_size.pair()),
      options(std::move(options)) {
  const Options& o = this->options;
  SMELT_CHECK(in_channels > 0 && out_channels > 0 && o.groups > 0)
      << "Conv2d: in_channels, out_channels and groups must be positive, got " << in_channels
      << ", " << out_channels << ", " << o.groups;
  SMELT_CHECK(in_channels % o.groups == 0 && out_channels % o.groups == 0)
      << "Conv2d: in_channels (" << in_channels << ") and out_channels (" << out_channels
      << ") must both be divisible by groups (" << o.groups << ")";
  check_pair(this->kernel_size, "kernel_size", 1);
  check_pair(o.stride, "stride", 1);
  check_pair(o.padding, "padding", 0);
  check_pair(o.dilation, "dilation", 1);
  weight = empty({out_channels, in_channels / o.groups, this->kernel_size[0], this->kernel_size[1]},
                 o.dtype);
  register_parameter("weight", weight);
  if (o.bias) {
    bias = empty({out_channels}, o.dtype);
    register_parameter("bias", bias);
  }
  reset_parameters();
}

void Conv2d::reset_parameters() { reset_contraction(weight, bias); }

Tensor Conv2d::forward(const Tensor& x) {
  SMELT_CHECK(x.dim() == 4 && x.size(1) == in_channels)
      << "Conv2d: expected input (N, " << in_channels << ", H, W), got " << shape_str(x.shape());
  return conv2d(x, weight, bias, options.stride, options.padding, options.dilation, options.groups);
}

std::string Conv2d::extra_repr() const {
  std::ostringstream s;
  s << in_channels << ", " << out_channels << ", kernel_size=" << ints(kernel_size)
    << ", stride=" << ints(options.stride);
  if (options.padding != std::vector<int64_t>{0, 0}) s << ", padding=" << ints(options.padding);
  if (options.dilation != std::vector<int64_t>{1, 1}) s << ", dilation=" << ints(options.dilation);
  if (options.groups != 1) s << ", groups=" << options.groups;
  if (!bias.defined()) s << ", bias=false";
  return s.str();
}

}  // namespace smelt::nn
