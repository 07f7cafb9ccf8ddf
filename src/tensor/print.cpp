// Printing in PyTorch's style:
//   tensor([[ 1.5000, -2.0000],
//           [ 0.2500,  3.0000]], requires_grad=True)
// Integral floats print as "1.", a wide range switches to scientific notation, and more than
// 1000 elements are summarized with "..." (three items at each edge).
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "smelt/tensor.h"

namespace smelt {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Format {
  enum Mode { Bool, Int, IntFloat, Fixed, Sci } mode = Fixed;
  int width = 1;
  std::string format(double v) const {
    char buf[64];
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    switch (mode) {
      case Bool: return v != 0 ? "True" : "False";
      case Int: std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v)); break;
      case IntFloat: std::snprintf(buf, sizeof buf, "%.0f.", v); break;
      case Fixed: std::snprintf(buf, sizeof buf, "%.4f", v); break;
      case Sci: std::snprintf(buf, sizeof buf, "%.4e", v); break;
    }
    return buf;
  }
};

Format choose_format(const std::vector<double>& values, DType dtype) {
  Format f;
  if (dtype == DType::Bool) {
    f.mode = Format::Bool;
  } else if (!dtype_is_floating(dtype)) {
    f.mode = Format::Int;
  } else {
    bool integral = true;
    double max_abs = 0, min_abs = INFINITY;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      integral &= v == std::round(v);
      max_abs = std::max(max_abs, std::fabs(v));
      if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
    }
    if (integral) f.mode = max_abs < 1e8 ? Format::IntFloat : Format::Sci;
    else f.mode = (max_abs >= 1e8 || (min_abs < 1e-4) || max_abs / min_abs > 1000) ? Format::Sci : Format::Fixed;
  }
  for (double v : values) f.width = std::max<int>(f.width, int(f.format(v).size()));
  return f;
}

class Printer {
 public:
  Printer(const Tensor& t, bool summarize) : t_(t), summarize_(summarize) {}

  // Values that will be shown (for choosing the format).
  void collect(std::vector<double>* out) { walk(0, t_.offset(), [&](double v) { out->push_back(v); }); }

  void print(std::ostream& os, const Format& f, int indent) {
    os_ = &os;
    format_ = &f;
    indent_ = indent;
    emit(0, t_.offset());
  }

 private:
  double load(int64_t off) const {
    const char* base = static_cast<const char*>(t_.storage()->data());
    switch (t_.dtype()) {
      case DType::Float32: return reinterpret_cast<const float*>(base)[off];
      case DType::Float64: return reinterpret_cast<const double*>(base)[off];
      case DType::Int64: return double(reinterpret_cast<const int64_t*>(base)[off]);
      case DType::Bool: return reinterpret_cast<const bool*>(base)[off];
      case DType::UInt8: return reinterpret_cast<const uint8_t*>(base)[off];
      case DType::Int8: return reinterpret_cast<const int8_t*>(base)[off];
      case DType::Int32: return reinterpret_cast<const int32_t*>(base)[off];
    }
    return 0;
  }

  // The indices shown along a dim of size n.
  std::vector<int64_t> shown(int64_t n) const {
    std::vector<int64_t> idx;
    if (summarize_ && n > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
      idx.push_back(-1);  // the ellipsis
      for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    }
    return idx;
  }

  template <class F>
  void walk(int64_t d, int64_t off, const F& f) {
    if (d == t_.dim()) { f(load(off)); return; }
    for (int64_t i : shown(t_.size(d))) {
      if (i >= 0) walk(d + 1, off + i * t_.stride(d), f);
    }
  }

  void emit(int64_t d, int64_t off) {
    std::ostream& os = *os_;
    if (d == t_.dim()) {
      std::string s = format_->format(load(off));
      os << std::string(size_t(format_->width) - s.size(), ' ') << s;
      return;
    }
    os << "[";
    auto idx = shown(t_.size(d));
    for (size_t k = 0; k < idx.size(); ++k) {
      if (k > 0) {
        os << ",";
        if (d == t_.dim() - 1) os << " ";
        else os << std::string(size_t(t_.dim() - d - 1), '\n') << std::string(size_t(indent_ + d + 1), ' ');
      }
      if (idx[k] < 0) os << (d == t_.dim() - 1 ? " ..." : "...");  // PyTorch pads it in a row
      else emit(d + 1, off + idx[k] * t_.stride(d));
    }
    os << "]";
  }

  const Tensor& t_;
  bool summarize_;
  std::ostream* os_ = nullptr;
  const Format* format_ = nullptr;
  int indent_ = 0;
};

}  // namespace

std::string Tensor::to_string() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  if (!t.storage()) {
    return os << "tensor(symbolic, shape=" << shape_str(t.shape()) << ", dtype=" << dtype_name(t.dtype())
              << ")";
  }
  os << "tensor(";
  if (t.numel() == 0) {
    os << "[]";
    if (t.dim() > 1) os << ", size=" << shape_str(t.shape());
  } else {
    Printer printer(t, t.numel() > kSummarizeAbove);
    std::vector<double> values;
    printer.collect(&values);
    Format f = choose_format(values, t.dtype());
    printer.print(os, f, 7);
  }
  if (t.dtype() != DType::Float32 && t.dtype() != DType::Int64 && t.dtype() != DType::Bool) {
    os << ", dtype=" << dtype_name(t.dtype());
  }
  if (t.grad_fn()) os << ", grad_fn=<" << t.grad_fn()->name() << "Backward>";
  else if (t.requires_grad()) os << ", requires_grad=True";
  os << ")";
  return os;
}

}  // namespace smelt
