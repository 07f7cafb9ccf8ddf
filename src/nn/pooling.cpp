// Pooling modules: thin wrappers over the pooling ops, with PyTorch's defaults.
#include <sstream>

#include "smelt/nn.h"

namespace smelt::nn {
namespace {

std::string list_str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ")";
  return os.str();
}

std::string window_repr(const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                        const std::vector<int64_t>& padding) {
  return "kernel_size=" + list_str(kernel) + ", stride=" + list_str(stride.empty() ? kernel : stride) +
         ", padding=" + list_str(padding);
}

}  // namespace

MaxPool2d::MaxPool2d(IntOr2 kernel_size, IntOr2 stride, IntOr2 padding)
    : kernel_size(kernel_size.pair()), stride(stride.pair()), padding(padding.pair()) {}

std::string MaxPool2d::extra_repr() const { return window_repr(kernel_size, stride, padding); }

AvgPool2d::AvgPool2d(IntOr2 kernel_size, IntOr2 stride, IntOr2 padding)
    : kernel_size(kernel_size.pair()), stride(stride.pair()), padding(padding.pair()) {}

std::string AvgPool2d::extra_repr() const { return window_repr(kernel_size, stride, padding); }

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + list_str(output_size); }

}  // namespace smelt::nn
