#include "smelt/creation.h"

#include "tensor/capture.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <unordered_set>

namespace smelt {

// ---- Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11)

void Generator::block(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c[4] = {uint32_t(counter), uint32_t(counter >> 32), 0, 0};
  uint32_t k[2] = {uint32_t(seed), uint32_t(seed >> 32)};
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kMul0) * c[0];
    uint64_t p1 = uint64_t(kMul1) * c[2];
    uint32_t n0 = uint32_t(p1 >> 32) ^ c[1] ^ k[0];
    uint32_t n2 = uint32_t(p0 >> 32) ^ c[3] ^ k[1];
    c[0] = n0;
    c[1] = uint32_t(p1);
    c[2] = n2;
    c[3] = uint32_t(p0);
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  std::memcpy(out, c, sizeof(c));
}

Generator& Generator::operator=(const Generator& other) {
  if (this != &other) set_state(other.state());
  return *this;
}

GeneratorState Generator::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

void Generator::set_state(const GeneratorState& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = state;
}

GeneratorState Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  GeneratorState first = state_;
  state_.counter += n;
  return first;
}

Generator& default_generator() {
  static Generator gen;
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

Tensor generator_state_tensor(const GeneratorState& state) {
  Tensor t = empty({2}, DType::Int64);
  std::memcpy(t.data<int64_t>(), &state.seed, sizeof(uint64_t));
  std::memcpy(t.data<int64_t>() + 1, &state.counter, sizeof(uint64_t));
  return t;
}

GeneratorState generator_state_from_tensor(const Tensor& t) {
  SMELT_CHECK(t.defined() && t.dtype() == DType::Int64 && t.shape() == Shape{2} && t.storage())
      << "generator state: expected an int64 tensor [2] = {seed, counter} with data, got "
      << (t.defined() ? std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape())
                      : std::string("an undefined tensor"));
  const int64_t* p = t.data<int64_t>();
  const int64_t stride = t.strides()[0];
  GeneratorState state;
  std::memcpy(&state.seed, p, sizeof(uint64_t));
  std::memcpy(&state.counter, p + stride, sizeof(uint64_t));
  return state;
}

namespace {

// Uniform double in [0, 1) from two words (53 random bits).
inline double unit_double(uint32_t hi, uint32_t lo) {
  uint64_t bits = (uint64_t(hi) << 21) ^ (uint64_t(lo) >> 11);
  return double(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// Fills `n` values, two per call of `gen2(u0, u1, &a, &b)` from fresh uniforms.
thread_local bool t_capturing = false;

void check_not_capturing() {
  SMELT_CHECK(!t_capturing)
      << "random numbers (rand, randn, randint, randperm, normal, uniform) drawn from the default "
         "generator inside a traced or compiled function would be drawn once, when the function is "
         "captured, and replayed as a constant on every call; draw them outside and pass them as "
         "inputs, or draw from a Generator of your own to mean a constant (dropout is fine: it takes "
         "the generator state as a graph input)";
}

template <class Fill>
void fill_pairs(int64_t n, Generator* gen, Fill fill) {
  if (!gen) check_not_capturing();
  Generator& g = gen ? *gen : default_generator();
  const GeneratorState first = g.reserve(uint64_t((n + 1) / 2));
  for (int64_t i = 0; i < n; i += 2) {
    uint32_t w[4];
    Generator::block(first.seed, first.counter + uint64_t(i / 2), w);
    fill(i, unit_double(w[0], w[1]), unit_double(w[2], w[3]));
  }
}

// A value that an integer dtype cannot hold is an error here (as PyTorch's full), not an
// undefined conversion: int64 takes [-2^63, 2^63) after truncation toward zero, int32
// [-2^31, 2^31), uint8 [0, 255]; bool takes anything (v != 0; NaN is true).
void check_storable(double v, DType dtype, const char* where) {
  if (dtype == DType::Int64) {
    SMELT_CHECK(v >= -9223372036854775808.0 && v < 9223372036854775808.0)
        << where << ": value " << v << " cannot be stored in int64 (valid: finite, in [-2^63, 2^63))";
  } else if (dtype == DType::Int32) {
    SMELT_CHECK(v > -2147483649.0 && v < 2147483648.0)
        << where << ": value " << v << " cannot be stored in int32 (valid: finite, in [-2^31, 2^31))";
  } else if (dtype == DType::UInt8) {
    SMELT_CHECK(v > -1.0 && v < 256.0)
        << where << ": value " << v << " cannot be stored in uint8 (valid: [0, 255])";
  } else if (dtype == DType::Int8) {
    SMELT_CHECK(v > -129.0 && v < 128.0)
        << where << ": value " << v << " cannot be stored in int8 (valid: [-128, 127])";
  }
}

void store(Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::Float32) t.data<float>()[i] = float(v);
  else if (t.dtype() == DType::Float64) t.data<double>()[i] = v;
  else if (t.dtype() == DType::Int64) t.data<int64_t>()[i] = int64_t(v);
  else if (t.dtype() == DType::Int32) t.data<int32_t>()[i] = int32_t(v);
  else if (t.dtype() == DType::Bool) t.data<bool>()[i] = v != 0;
  else if (t.dtype() == DType::Int8) t.data<int8_t>()[i] = int8_t(v);
  else t.data<uint8_t>()[i] = uint8_t(v);
}

void check_floating(DType dtype, const char* where) {
  SMELT_CHECK(dtype_is_floating(dtype)) << where << ": dtype must be float32 or float64, got "
                                        << dtype_name(dtype);
}

}  // namespace

namespace {
// requires_grad from the options, on a tensor just made (a leaf).
Tensor with_options(Tensor t, const TensorOptions& options) {
  if (options.requires_grad()) t.set_requires_grad(true);
  return t;
}
}  // namespace

Tensor full(const Shape& shape, const Scalar& value, TensorOptions options) {
  const DType dtype = options.dtype_or(DType::Float32);
  // an integer is exact in int64 whatever its size; other pairs go through double
  if (!(dtype == DType::Int64 && !value.is_floating())) check_storable(value.to_double(), dtype, "full");
  Tensor t = empty(shape, dtype);
  t.fill_(value);  // records no history: t requires no grad yet
  return with_options(t, options);
}
Tensor zeros(const Shape& shape, TensorOptions options) {
  const DType dtype = options.dtype_or(DType::Float32);
  Tensor t = empty(shape, dtype);
  std::memset(t.raw_data(), 0, size_t(t.nbytes()));
  return with_options(t, options);
}
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1, options); }
Tensor zeros_like(const Tensor& like) { return zeros(like.shape(), like.dtype()); }
Tensor ones_like(const Tensor& like) { return ones(like.shape(), like.dtype()); }
Tensor full_like(const Tensor& like, const Scalar& value) {
  return full(like.shape(), value, like.dtype());
}
Tensor scalar_tensor(const Scalar& value, TensorOptions options) { return full({}, value, options); }

Tensor arange(double start, double end, double step, DType dtype) {
  SMELT_CHECK(step != 0) << "arange: step must be non-zero";
  SMELT_CHECK((end - start) / step >= 0)
      << "arange: start " << start << ", end " << end << " and step " << step
      << " give a negative count; step must point from start towards end";
  const double count = std::ceil((end - start) / step);
  SMELT_CHECK(count < 9223372036854775808.0)
      << "arange: start " << start << ", end " << end << " and step " << step << " give " << count
      << " elements; the count must be finite and below 2^63";
  int64_t n = int64_t(count);
  Tensor t = empty({n}, dtype);
  if (n > 0) {  // the values are monotone: the first and last bound them all
    check_storable(start, dtype, "arange");
    check_storable(start + double(n - 1) * step, dtype, "arange");
  }
  for (int64_t i = 0; i < n; ++i) store(t, i, start + double(i) * step);
  return t;
}
Tensor arange(int64_t end) { return arange(0, double(end), 1, DType::Int64); }

Tensor linspace(double start, double end, int64_t steps, DType dtype) {
  SMELT_CHECK(steps >= 0) << "linspace: steps must be >= 0, got " << steps;
  Tensor t = empty({steps}, dtype);
  double delta = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
  for (int64_t i = 0; i < steps; ++i) store(t, i, i == steps - 1 ? end : start + delta * double(i));
  return t;
}

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Generator* gen) {
  check_floating(dtype, "uniform");
  Tensor t = empty(shape, dtype);
  int64_t n = t.numel();
  fill_pairs(n, gen, [&](int64_t i, double u0, double u1) {
    store(t, i, low + (high - low) * u0);
    if (i + 1 < n) store(t, i + 1, low + (high - low) * u1);
  });
  return t;
}
Tensor rand(const Shape& shape, TensorOptions options, Generator* gen) {
  return with_options(uniform(shape, 0.0, 1.0, options.dtype_or(DType::Float32), gen), options);
}

Tensor normal(const Shape& shape, double mean, double std, DType dtype, Generator* gen) {
  check_floating(dtype, "normal");
  Tensor t = empty(shape, dtype);
  int64_t n = t.numel();
  // Box-Muller: two uniforms give two independent normals.
  fill_pairs(n, gen, [&](int64_t i, double u0, double u1) {
    double r = std::sqrt(-2.0 * std::log(1.0 - u0));
    double theta = 2.0 * M_PI * u1;
    store(t, i, mean + std * r * std::cos(theta));
    if (i + 1 < n) store(t, i + 1, mean + std * r * std::sin(theta));
  });
  return t;
}
Tensor randn(const Shape& shape, TensorOptions options, Generator* gen) {
  return with_options(normal(shape, 0.0, 1.0, options.dtype_or(DType::Float32), gen), options);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator* gen) {
  SMELT_CHECK(high > low) << "randint: need low < high, got [" << low << ", " << high << ")";
  Tensor t = empty(shape, DType::Int64);
  int64_t n = t.numel();
  double span = double(high - low);
  fill_pairs(n, gen, [&](int64_t i, double u0, double u1) {
    t.data<int64_t>()[i] = low + int64_t(u0 * span);
    if (i + 1 < n) t.data<int64_t>()[i + 1] = low + int64_t(u1 * span);
  });
  return t;
}

Tensor randperm(int64_t n, Generator* gen) {
  if (!gen) check_not_capturing();
  Tensor t = arange(n);
  int64_t* p = t.data<int64_t>();
  Tensor u = rand({n}, DType::Float64, gen);
  const double* r = u.data<double>();
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates
    int64_t j = int64_t(r[i] * double(i + 1));
    std::swap(p[i], p[j]);
  }
  return t;
}

Tensor detail::from_host(const void* values, DType type, size_t count, const Shape& shape,
                         const TensorOptions& options) {
  SMELT_CHECK(int64_t(count) == shape_numel(shape, "from_vector"))
      << "from_vector: " << count << " values do not fill shape " << shape_str(shape) << " ("
      << shape_numel(shape) << " elements)";
  const DType dtype = options.dtype_or(type);
  Tensor t = empty(shape, dtype);
  if (dtype == type) {
    if (count) std::memcpy(t.raw_data(), values, count * dtype_size(type));
  } else {
    for (size_t i = 0; i < count; ++i) {
      double v = type == DType::Float32   ? double(static_cast<const float*>(values)[i])
                 : type == DType::Float64 ? static_cast<const double*>(values)[i]
                                          : double(static_cast<const int64_t*>(values)[i]);
      check_storable(v, dtype, "from_vector");
      store(t, int64_t(i), v);
    }
  }
  return with_options(t, options);
}

Tensor from_blob(void* data, const Shape& shape, DType dtype) {
  auto storage = make_ref<Storage>(data, size_t(shape_numel(shape)) * dtype_size(dtype), nullptr);
  return make_tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

namespace detail {

namespace {

// The storages a lifting capture on this thread created (null: no lifting capture is active),
// and whether the innermost scope lifts (a Graph::trace inside a compiled function does not: it
// may read what it captures, as it would anywhere else).
thread_local std::unordered_set<const Storage*>* t_created = nullptr;
thread_local bool t_lifting = false;

}  // namespace

CaptureScope::CaptureScope(bool lift_captured)
    : previous_(t_capturing), previous_lifting_(t_lifting) {
  t_capturing = true;
  t_lifting = lift_captured;
  if (lift_captured && !t_created) {
    t_created = new std::unordered_set<const Storage*>();
    owns_record_ = true;
  }
}

CaptureScope::~CaptureScope() {
  t_capturing = previous_;
  t_lifting = previous_lifting_;
  if (owns_record_) {
    delete t_created;
    t_created = nullptr;
  }
}

bool captured_from_outside(const Storage* storage) {
  return t_lifting && t_created && storage && (!storage->owned() || !t_created->count(storage));
}

void note_storage_created(const Storage* storage) {
  if (t_created) t_created->insert(storage);
}

void note_storage_destroyed(const Storage* storage) {
  if (t_created) t_created->erase(storage);
}

}  // namespace detail

}  // namespace smelt
