// Parameter initializers. Each draws a fresh tensor from the generator and copies it in, so the
// numbers depend only on the seed and the order of initialization (as with PyTorch's).
#include <cmath>

#include "smelt/autograd.h"
#include "smelt/nn.h"

namespace smelt::nn::init {

namespace {
void check_floating(const Tensor& t, const char* where) {
  SMELT_CHECK(t.defined() && dtype_is_floating(t.dtype()))
      << where << ": needs a defined float32/float64 tensor"
      << (t.defined() ? std::string(", got ") + dtype_name(t.dtype()) : std::string());
}

void overwrite(const Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  Tensor(t).copy_(values);
}
}  // namespace

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  SMELT_CHECK(t.dim() >= 2) << "fan_in_and_fan_out: needs a tensor of rank >= 2, got shape "
                            << shape_str(t.shape());
  int64_t receptive_field = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive_field *= t.size(d);
  return {t.size(1) * receptive_field, t.size(0) * receptive_field};
}

void uniform_(const Tensor& t, double low, double high, Generator* gen) {
  check_floating(t, "init::uniform_");
  overwrite(t, uniform(t.shape(), low, high, t.dtype(), gen));
}

void normal_(const Tensor& t, double mean, double std, Generator* gen) {
  check_floating(t, "init::normal_");
  overwrite(t, normal(t.shape(), mean, std, t.dtype(), gen));
}

void constant_(const Tensor& t, double value) {
  SMELT_CHECK(t.defined()) << "init::constant_: the tensor is undefined";
  NoGradGuard no_grad;
  Tensor(t).fill_(value);
}

void kaiming_uniform_(const Tensor& t, double a, Generator* gen) {
  check_floating(t, "init::kaiming_uniform_");
  int64_t fan_in = fan_in_and_fan_out(t).first;
  SMELT_CHECK(fan_in > 0) << "init::kaiming_uniform_: fan_in is 0 for shape "
                          << shape_str(t.shape());
  double gain = std::sqrt(2.0 / (1.0 + a * a));
  double bound = std::sqrt(3.0) * gain / std::sqrt(double(fan_in));
  uniform_(t, -bound, bound, gen);
}

void xavier_uniform_(const Tensor& t, double gain, Generator* gen) {
  check_floating(t, "init::xavier_uniform_");
  auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  SMELT_CHECK(fan_in + fan_out > 0)
      << "init::xavier_uniform_: empty shape " << shape_str(t.shape());
  double bound = gain * std::sqrt(6.0 / double(fan_in + fan_out));
  uniform_(t, -bound, bound, gen);
}

}  // namespace smelt::nn::init
