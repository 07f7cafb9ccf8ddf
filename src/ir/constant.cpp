#include "ir/constant.h"

#include <cmath>
#include <cstring>

namespace smelt::ir {

std::string constant_bytes(const Tensor& t) {
  Tensor c = t.is_contiguous() ? t : t.contiguous();
  const size_t n = size_t(c.nbytes());
  std::string bytes(n, '\0');
  if (n) std::memcpy(bytes.data(), c.raw_data(), n);
  return bytes;
}

namespace {

template <class T>
bool all_bits_equal(const std::string& bytes, T want) {
  for (size_t off = 0; off < bytes.size(); off += sizeof(T)) {
    if (std::memcmp(bytes.data() + off, &want, sizeof(T)) != 0) return false;
  }
  return true;
}

}  // namespace

bool all_elements_are(const Value* v, double value) {
  if (v->kind != ValueKind::Constant || v->constant.numel() == 0) return false;
  const std::string bytes = constant_bytes(v->constant);
  switch (v->meta.dtype) {
    case DType::Float32: return all_bits_equal(bytes, float(value));
    case DType::Float64: return all_bits_equal(bytes, value);
    case DType::Int64:
      if (value != std::trunc(value) || std::fabs(value) > 9.0e18) return false;
      return all_bits_equal(bytes, int64_t(value));
    case DType::Bool:
      if (value != 0 && value != 1) return false;
      return all_bits_equal(bytes, bool(value));
    case DType::UInt8:
      if (value != std::trunc(value) || value < 0 || value > 255) return false;
      return all_bits_equal(bytes, uint8_t(value));
    case DType::Int8:
      if (value != std::trunc(value) || value < -128 || value > 127) return false;
      return all_bits_equal(bytes, int8_t(value));
    case DType::Int32:
      if (value != std::trunc(value) || value < -2147483648.0 || value > 2147483647.0) return false;
      return all_bits_equal(bytes, int32_t(value));
  }
  return false;
}

bool is_integer_constant_without_zeros(const Value* v) {
  if (v->kind != ValueKind::Constant || dtype_is_floating(v->meta.dtype)) return false;
  const std::string bytes = constant_bytes(v->constant);
  const size_t size = dtype_size(v->meta.dtype);
  for (size_t at = 0; at + size <= bytes.size(); at += size) {
    if (bytes.find_first_not_of('\0', at) >= at + size) return false;  // every byte 0: the element is 0
  }
  return true;
}

bool is_positive_finite_constant(const Value* v) {
  if (v->kind != ValueKind::Constant || v->meta.dtype != DType::Float32) return false;
  const std::string bytes = constant_bytes(v->constant);
  for (size_t at = 0; at + 4 <= bytes.size(); at += 4) {
    float f;
    std::memcpy(&f, bytes.data() + at, 4);
    if (!(std::isfinite(f) && f > 0)) return false;
  }
  return true;
}

bool quantized_op_cannot_refuse(ops::OpId op, const std::vector<Value*>& inputs) {
  std::vector<size_t> scales;
  switch (op) {
    case ops::OpId::quantize_linear: scales = {1}; break;
    case ops::OpId::dequantize_linear:
      if (inputs[0]->meta.dtype == DType::Int32 && !all_elements_are(inputs[2], 0)) return false;
      scales = {1};
      break;
    case ops::OpId::qlinear_matmul: case ops::OpId::qlinear_conv2d: scales = {1, 4, 6}; break;
    default: return false;
  }
  for (size_t i : scales) {
    if (!is_positive_finite_constant(inputs[i])) return false;
  }
  return true;
}

}  // namespace smelt::ir
