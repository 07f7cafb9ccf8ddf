// Out-variant kernels (ops::call_into): every op whose outputs are fresh memory writes into
// outputs that the caller placed, as a memory plan will place them in one arena. The calls come
// from the golden cases (tests/golden/ops/*.json), forward and backward, recorded at the
// dispatcher; each runs again with its outputs at offsets inside one storage whose bytes were
// filled with a pattern first, and must give bitwise the normal call's result while leaving every
// byte outside its outputs as it was. View ops keep returning aliases and cannot be placed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "golden_op_table.h"
#include "ops/dispatch.h"
#include "smelt/quantize.h"
#include "support/errors.h"
#include "support/json_tensor.h"

namespace smelt::ops {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::expect_error;

// One op call as the dispatcher saw it.
struct RecordedCall {
  OpId op;
  std::vector<Tensor> inputs;
  Attrs attrs;
  std::vector<TensorMeta> metas;
  std::string golden_case;  // where it came from, for failure messages
};

// Computes every op for real, as an eager call would, and keeps the calls of out-variant ops.
class RecordingHook final : public DispatchHook {
 public:
  std::vector<Tensor> record(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                             const std::vector<TensorMeta>& metas) override {
    if (!is_view_op(op)) {
      std::vector<Tensor> detached;
      for (const Tensor& t : inputs) detached.push_back(t.detach());
      calls.push_back({op, detached, attrs, metas, golden_case});
    }
    return compute(op, inputs, attrs, metas);
  }
  // Random ops run eagerly under this hook: they read and advance the default generator.
  Tensor random_state() override { return generator_state_tensor(default_generator().state()); }
  void set_random_state(const Tensor& state) override {
    default_generator().set_state(generator_state_from_tensor(state));
  }
  std::vector<RecordedCall> calls;
  std::string golden_case;
};

class HookScope {
 public:
  explicit HookScope(DispatchHook* hook) : prev_(set_dispatch_hook(hook)) {}
  ~HookScope() { set_dispatch_hook(prev_); }

 private:
  DispatchHook* prev_;
};

// Runs one golden case as golden_test.cpp does: the smelt call, then the gradients of
// sum_k sum(outputs[k] * weights[k]) with respect to the inputs that require grad.
void run_golden_case(const json& c) {
  std::vector<std::string> names;
  std::vector<Tensor> args, differentiable;
  for (const json& in : c.at("inputs")) {
    Tensor t = testing::tensor_from_json(in);
    if (in.at("requires_grad").get<bool>()) {
      t.set_requires_grad();
      differentiable.push_back(t);
    }
    names.push_back(in.at("name").get<std::string>());
    // "permute_first": the op sees a permuted (non-contiguous) view of x.
    args.push_back(names.back() == "x" && c.at("attrs").contains("permute_first")
                       ? permute(t, c.at("attrs").at("permute_first").get<Shape>())
                       : t);
  }
  const auto& fn = golden::golden_op_table().at(c.at("op").get<std::string>());
  std::vector<Tensor> outputs = fn(golden::GoldenCall(c.at("attrs"), names, args));
  Tensor loss;
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor w = testing::tensor_from_json(c.at("weights")[k]);
    if (!w.defined()) continue;
    Tensor term = sum(outputs[k] * cast(w, outputs[k].dtype()));
    loss = loss.defined() ? loss + term : term;
  }
  if (!differentiable.empty() && loss.defined() && loss.requires_grad()) {
    autograd::grad({loss}, differentiable, {}, false, false, true);
  }
}

// Every out-variant op call the golden cases make, and a few programs for ops they miss.
const std::vector<RecordedCall>& golden_calls() {
  static const std::vector<RecordedCall> calls = [] {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(fs::path(SMELT_TEST_DIR) / "golden" / "ops")) {
      if (entry.path().extension() == ".json") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    RecordingHook hook;
    HookScope scope(&hook);
    for (const fs::path& file : files) {
      std::ifstream in(file);
      const json doc = json::parse(in);
      for (const json& c : doc.at("cases")) {
        hook.golden_case = file.stem().string() + "/" + c.at("name").get<std::string>();
        run_golden_case(c);
      }
    }
    // Ops the golden cases never reach: dropout (their cases are eval mode or p = 0, which return
    // the input without a call), in training and with its backward.
    hook.golden_case = "(extra) dropout training";
    manual_seed(7);
    Tensor x = randn({4, 5}).set_requires_grad();
    autograd::grad({sum(dropout(x, 0.5, true) * 3.0)}, {x});
    // The quantized ops: their PyTorch cases are tests/golden/quantize.json, of another format
    // (tests/ops/quantize_golden_test.cpp); here their out-variant kernels run once each.
    hook.golden_case = "(extra) quantized ops";
    const Tensor s = full({}, 0.05, DType::Float32), zu = full({}, 7.0, DType::UInt8);
    const Tensor zi = zeros({}, DType::Int8), sw = full({5}, 0.02, DType::Float32);
    const Tensor q = quantize_linear(randn({3, 4}), s, zu);
    dequantize_linear(q, s, zu);
    const Tensor w = quantize_linear(randn({4, 5}), sw, zeros({5}, DType::Int8), 1);
    qlinear_matmul({q, s, zu}, {w, sw, zeros({5}, DType::Int8)}, s, zu);
    matmul_integer(q, w, zu, zi);
    const Tensor img = quantize_linear(randn({1, 2, 5, 5}), s, zu);
    const Tensor k = quantize_linear(randn({3, 2, 3, 3}), s, zi);
    QConvOptions o;
    o.padding = {1, 0, 0, 1};
    qlinear_conv2d({img, s, zu}, {k, s, zi}, s, zu, full({3}, 5.0, DType::Int32), o);
    conv2d_integer(img, k, zu, zi, o);
    return hook.calls;
  }();
  return calls;
}

size_t nbytes_of(const TensorMeta& m) { return size_t(shape_numel(m.shape)) * dtype_size(m.dtype); }

// One storage holding every output of a call, each at its own offset between guard bytes, all
// filled with `fill` before the kernel runs (an arena slot holds whatever was there before).
struct Arena {
  static constexpr size_t kGuard = 40;  // bytes before, between and after the outputs

  Arena(const std::vector<TensorMeta>& metas, uint8_t fill) : fill(fill) {
    size_t pos = kGuard;
    for (const TensorMeta& m : metas) {
      pos = (pos + 7) / 8 * 8;  // a whole number of elements of any dtype
      begin.push_back(pos);
      end.push_back(pos + nbytes_of(m));
      pos = end.back() + kGuard;
    }
    storage = make_ref<Storage>(pos);
    std::memset(storage->data(), fill, pos);
    for (size_t k = 0; k < metas.size(); ++k) {
      const int64_t offset = int64_t(begin[k] / dtype_size(metas[k].dtype));
      outputs.push_back(make_tensor(storage, metas[k].shape, contiguous_strides(metas[k].shape),
                                    offset, metas[k].dtype));
    }
  }

  // The first byte outside every output that no longer holds the fill; -1 when none.
  int64_t first_changed_guard_byte() const {
    const auto* bytes = static_cast<const uint8_t*>(storage->data());
    for (size_t i = 0; i < storage->nbytes(); ++i) {
      bool inside = false;
      for (size_t k = 0; k < begin.size(); ++k) inside |= i >= begin[k] && i < end[k];
      if (!inside && bytes[i] != fill) return int64_t(i);
    }
    return -1;
  }

  uint8_t fill;
  Ref<Storage> storage;
  std::vector<size_t> begin, end;
  std::vector<Tensor> outputs;
};

std::string describe(const RecordedCall& c) {
  std::ostringstream os;
  os << op_name(c.op) << "(";
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& t = c.inputs[i];
    os << (i ? ", " : "") << dtype_name(t.dtype()) << " " << shape_str(t.shape())
       << (t.is_contiguous() ? "" : " strided");
  }
  return os.str() + ") from golden case " + c.golden_case;
}

// The normal call and call_into an arena filled with `fill`: bitwise equal outputs, untouched
// guard bytes. Random ops draw the same numbers in both (the generator is reseeded).
::testing::AssertionResult runs_into_arena(const RecordedCall& c, uint8_t fill) {
  manual_seed(20261122);
  const std::vector<Tensor> expected = compute(c.op, c.inputs, c.attrs, c.metas);
  Arena arena(c.metas, fill);
  manual_seed(20261122);
  call_into(c.op, c.inputs, c.attrs, arena.outputs);
  for (size_t k = 0; k < expected.size(); ++k) {
    const auto* want = static_cast<const uint8_t*>(expected[k].raw_data());
    const auto* got = static_cast<const uint8_t*>(arena.outputs[k].raw_data());
    const size_t n = nbytes_of(c.metas[k]);
    for (size_t i = 0; i < n; ++i) {
      if (want[i] == got[i]) continue;
      const size_t element = i / dtype_size(c.metas[k].dtype);
      return ::testing::AssertionFailure()
             << describe(c) << ": output " << k << " differs from the normal call at element "
             << element << " (arena bytes filled with " << int(fill) << "): got "
             << arena.outputs[k].to_vector()[element] << ", expected "
             << expected[k].to_vector()[element];
    }
  }
  const int64_t changed = arena.first_changed_guard_byte();
  if (changed >= 0) {
    return ::testing::AssertionFailure() << describe(c) << ": wrote byte " << changed
                                         << " of the arena, outside its outputs";
  }
  return ::testing::AssertionSuccess();
}

// Calls on tensors large enough for the threaded and blocked paths of the kernels (GEMM above
// its measuring size, threaded elementwise loops and reductions, conv through GEMM).
std::vector<RecordedCall> large_calls() {
  RecordingHook hook;
  HookScope scope(&hook);
  hook.golden_case = "(large shapes)";
  manual_seed(11);
  Tensor a = randn({130, 150}).set_requires_grad(), b = randn({150, 170}).set_requires_grad();
  Tensor x = randn({4, 8, 36, 36}).set_requires_grad();
  Tensor w = randn({16, 8, 3, 3}).set_requires_grad();
  Tensor y = matmul(a, b);                                  // (130, 170)
  Tensor c = conv2d(x, w, Tensor(), {1, 1}, {1, 1});        // (4, 16, 36, 36)
  Tensor pooled = max_pool2d(c, {2, 2}) + avg_pool2d(c, {2, 2});
  Tensor normed = layer_norm(c, {36, 36});
  Tensor idx = randint(0, 130, {300});
  Tensor loss = sum(softmax(y, 1) * y) + sum(exp(log_softmax(y, 0))) + sum(pooled * pooled) +
                sum(var(normed, {1, 2})) + sum(tanh(c) * c) + sum(amax(c, {0, 2}, false)) +
                sum(index_add(y, 0, idx, ones({300, 170})) * y) +
                sum(cat({y, y * 2.0}, 1) * cat({y, y}, 1));
  autograd::grad({loss}, {a, b, x, w});
  return hook.calls;
}

TEST(OutVariant, GoldenCallsCoverEveryOutVariantOp) {
  std::set<OpId> seen;
  for (const RecordedCall& c : golden_calls()) seen.insert(c.op);
  for (int i = 0; i < kOpCount; ++i) {
    const OpId op = static_cast<OpId>(i);
    // group runs its body graph, never a kernel of its own (tests/ir/group_test.cpp); the blocked
    // layout's rows have no golden case (no PyTorch op) and are checked in
    // tests/kernels/conv_blocked_test.cpp and tests/ops/op_table_test.cpp.
    if (is_view_op(op) || op == OpId::group) continue;
    if (std::string(op_name(op)).find("blocked") != std::string::npos) continue;
    EXPECT_TRUE(seen.count(op)) << op_name(op) << " is never called by a golden case, forward or "
                                << "backward: its out-variant kernel is untested here";
  }
}

// Two fills: large finite values (0x7f: ~3e38 as float32, ~1e306 as float64, huge int64) expose
// a kernel that accumulates into memory it did not clear; 0xff (NaN, -1) one that reads it.
TEST(OutVariant, IntoArenaMatchesTheNormalCallBitwise) {
  ASSERT_FALSE(golden_calls().empty());
  int failures = 0;
  for (const RecordedCall& c : golden_calls()) {
    for (uint8_t fill : {uint8_t(0x7f), uint8_t(0xff)}) {
      ::testing::AssertionResult r = runs_into_arena(c, fill);
      EXPECT_TRUE(r);
      if (!r && ++failures >= 20) FAIL() << "stopping after 20 failures";
    }
  }
}

TEST(OutVariant, LargeShapesIntoArenaMatchBitwise) {
  const std::vector<RecordedCall> calls = large_calls();
  ASSERT_GT(calls.size(), 20u);
  for (const RecordedCall& c : calls) {
    // GEMM's Auto measures both implementations on the first calls of a shape class (matmul and
    // conv run through it); the comparison below wants the one it settles on.
    const bool uses_gemm = op_info(c.op).kind == OpKind::Contraction;
    for (int warm_up = 0; warm_up < 8 && uses_gemm; ++warm_up) {
      compute(c.op, c.inputs, c.attrs, c.metas);
    }
    for (uint8_t fill : {uint8_t(0x7f), uint8_t(0xff)}) EXPECT_TRUE(runs_into_arena(c, fill));
  }
}

// A call whose input is a view at an offset into the same arena (the plan placed it too).
TEST(OutVariant, InputsMayLiveInTheArenaToo) {
  Ref<Storage> arena = make_ref<Storage>(1024);
  std::memset(arena->data(), 0x7f, arena->nbytes());
  Tensor a = make_tensor(arena, {2, 3}, {3, 1}, 5, DType::Float32);
  Tensor b = make_tensor(arena, {2, 3}, {3, 1}, 37, DType::Float32);
  Tensor y = make_tensor(arena, {2, 3}, {3, 1}, 101, DType::Float32);
  for (int64_t i = 0; i < 6; ++i) {
    a.data<float>()[i] = float(i);
    b.data<float>()[i] = float(10 * i);
  }
  const uint64_t version = arena->version();
  call_into(OpId::add, {a, b}, {}, {y});
  EXPECT_EQ(y.to_vector(), (std::vector<double>{0, 11, 22, 33, 44, 55}));
  EXPECT_GT(arena->version(), version) << "a write into the arena counts as an in-place write";
  EXPECT_EQ(add(a, b).to_vector(), y.to_vector());
}

// ---- mismatched outputs are clear errors

Tensor placed(const Shape& shape, DType dtype, int64_t offset = 3) {
  Ref<Storage> s = make_ref<Storage>(size_t(shape_numel(shape) + offset + 8) * dtype_size(dtype));
  return make_tensor(s, shape, contiguous_strides(shape), offset, dtype);
}

TEST(OutVariant, MismatchedOutputsAreClearErrors) {
  const Tensor a = ones({2, 3}), b = ones({2, 3});
  expect_error([&] { call_into(OpId::add, {a, b}, {}, {placed({2, 3}, DType::Float64)}); },
               {"call_into: add: output 0 must be float32 (2, 3)", "got float64 (2, 3)"});
  expect_error([&] { call_into(OpId::add, {a, b}, {}, {placed({3, 2}, DType::Float32)}); },
               {"output 0 must be float32 (2, 3)", "got float32 (3, 2)"});
  expect_error([&] { call_into(OpId::add, {a, b}, {}, {placed({3, 2}, DType::Float32).t()}); },
               {"output 0 (2, 3) must be contiguous", "strides (1, 2)"});
  expect_error([&] { call_into(OpId::add, {a, b}, {}, {}); }, "add has 1 outputs, got 0");
  expect_error([&] { call_into(OpId::add, {a, b}, {}, {Tensor()}); }, "an undefined tensor");
  // A slot that runs past the end of the arena.
  Ref<Storage> small = make_ref<Storage>(6 * sizeof(float));
  expect_error([&] {
    call_into(OpId::add, {a, b}, {}, {make_tensor(small, {2, 3}, {3, 1}, 1, DType::Float32)});
  }, {"output 0 (offset 1, 6 elements) reaches past its storage of 24 bytes"});
  // Bad inputs are still the shape rule's errors.
  expect_error([&] { call_into(OpId::add, {a, ones({4})}, {}, {placed({2, 3}, DType::Float32)}); },
               "cannot be broadcast");

  // Several outputs: every one is checked, and two may not share bytes.
  const Tensor x = ones({1, 1, 4, 4});
  using Ints = std::vector<int64_t>;
  const Attrs pool{{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}, {"padding", Ints{0, 0}},
                   {"dilation", Ints{1, 1}}};
  expect_error([&] {
    call_into(OpId::max_pool2d, {x}, pool, {placed({1, 1, 2, 2}, DType::Float32)});
  }, "max_pool2d has 2 outputs, got 1");
  expect_error([&] {
    call_into(OpId::max_pool2d, {x}, pool,
              {placed({1, 1, 2, 2}, DType::Float32), placed({1, 1, 2, 2}, DType::Float32)});
  }, {"max_pool2d: output 1 must be int64 (1, 1, 2, 2)", "got float32"});
  Ref<Storage> shared = make_ref<Storage>(64 * sizeof(float));
  auto slot = [&](int64_t offset) {
    return make_tensor(shared, {2, 1}, {1, 1}, offset, DType::Float32);
  };
  const Attrs ln{{"ndim", int64_t(1)}, {"eps", 1e-5}};
  const Tensor lx = ones({2, 3}), w = ones({3}), bias = zeros({3});
  expect_error([&] {
    call_into(OpId::layer_norm, {lx, w, bias}, ln,
              {make_tensor(shared, {2, 3}, {3, 1}, 0, DType::Float32), slot(10), slot(11)});
  }, {"layer_norm: outputs 1 and 2 overlap in memory", "bytes [40, 48) and [44, 52)"});
  // Disjoint slots of the same storage are fine.
  call_into(OpId::layer_norm, {lx, w, bias}, ln,
            {make_tensor(shared, {2, 3}, {3, 1}, 0, DType::Float32), slot(10), slot(12)});
}

// ---- view ops: no out-variant, aliases as before

TEST(OutVariant, TheViewsColumnSelectsTheKernel) {
  for (int i = 0; i < kOpCount; ++i) {
    const OpId op = static_cast<OpId>(i);
    const OpImpl& impl = op_impl(op);
    if (is_view_op(op)) {
      EXPECT_TRUE(impl.view_kernel && !impl.kernel) << op_name(op) << ": a view op needs a view "
                                                    << "kernel and no out-variant kernel";
    } else {
      EXPECT_TRUE(impl.kernel && !impl.view_kernel) << op_name(op) << ": needs an out-variant "
                                                    << "kernel and no view kernel";
    }
  }
  for (OpId op : {OpId::reshape, OpId::permute, OpId::slice, OpId::expand, OpId::contiguous}) {
    EXPECT_TRUE(is_view_op(op)) << op_name(op);
  }
}

TEST(OutVariant, ViewOpsStillAliasTheirInput) {
  const Tensor x = arange(0, 12).reshape({3, 4});
  const Storage* s = x.storage().get();
  EXPECT_EQ(call1(OpId::reshape, {x}, {{"shape", Shape{4, 3}}}).storage().get(), s);
  EXPECT_EQ(call1(OpId::permute, {x}, {{"dims", std::vector<int64_t>{1, 0}}}).storage().get(), s);
  const Tensor sliced = call1(OpId::slice, {x}, {{"dim", int64_t(1)}, {"start", int64_t(1)},
                                                 {"end", int64_t(3)}, {"step", int64_t(1)}});
  EXPECT_EQ(sliced.storage().get(), s);
  EXPECT_EQ(sliced.offset(), 1);
  EXPECT_EQ(call1(OpId::expand, {x.slice(0, 0, 1)}, {{"shape", Shape{5, 4}}}).storage().get(), s);
  // compute (the interpreter's and folding's door) takes the same path.
  const std::vector<TensorMeta> metas = infer_shape(OpId::permute, {meta_of(x)},
                                                    {{"dims", std::vector<int64_t>{1, 0}}});
  EXPECT_EQ(compute(OpId::permute, {x}, {{"dims", std::vector<int64_t>{1, 0}}}, metas)[0]
                .storage().get(), s);
}

TEST(OutVariant, ViewOpsCannotBePlaced) {
  const Tensor x = ones({2, 3});
  for (OpId op : {OpId::reshape, OpId::contiguous}) {
    const std::string what = std::string("call_into: ") + op_name(op) + " is a view op";
    expect_error([&] {
      call_into(op, {x}, {{"shape", Shape{3, 2}}}, {placed({3, 2}, DType::Float32)});
    }, {what, "run it with ops::call"});
  }
}

}  // namespace
}  // namespace smelt::ops
