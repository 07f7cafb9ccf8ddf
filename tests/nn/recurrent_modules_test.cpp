// nn::RNN / LSTM / GRU: PyTorch's layout and names, stacking of layers and directions (against
// recurrent_layer called by hand), the edges, the errors, and compiled = eager for inference and
// for a whole training step.
#include <cmath>
#include <limits>
#include <memory>

#include "smelt/compile.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::random_tensor;
using testing::same_bits;

TEST(RecurrentModules, NamesAndShapesFollowPyTorch) {
  nn::LSTM lstm(5, 4, 2, true, false, 0.0, true);
  std::vector<std::string> names;
  for (const auto& [name, p] : lstm.named_parameters()) names.push_back(name + shape_str(p.shape()));
  const std::vector<std::string> want = {
      "weight_ih_l0(16, 5)", "weight_hh_l0(16, 4)", "bias_ih_l0(16,)", "bias_hh_l0(16,)",
      "weight_ih_l0_reverse(16, 5)", "weight_hh_l0_reverse(16, 4)", "bias_ih_l0_reverse(16,)",
      "bias_hh_l0_reverse(16,)", "weight_ih_l1(16, 8)", "weight_hh_l1(16, 4)", "bias_ih_l1(16,)",
      "bias_hh_l1(16,)", "weight_ih_l1_reverse(16, 8)", "weight_hh_l1_reverse(16, 4)",
      "bias_ih_l1_reverse(16,)", "bias_hh_l1_reverse(16,)"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(nn::GRU(3, 2, 1, false).named_parameters().size(), 2u);
  EXPECT_EQ(nn::GRU(3, 2).parameters()[0].shape(), (Shape{6, 3}));
  EXPECT_EQ(lstm.to_string(), "LSTM(5, 4, num_layers=2, bidirectional=true)");
  // PyTorch's init: every value within 1/sqrt(hidden_size).
  for (const Tensor& p : lstm.parameters()) EXPECT_LE(amax(abs(p)).item<double>(), 0.5);

  Tensor x = random_tensor({7, 3, 5}, -1, 1, 1).to(DType::Float32);
  nn::Recurrent::Output out = lstm.forward_state(x);
  EXPECT_EQ(out.output.shape(), (Shape{7, 3, 8}));
  EXPECT_EQ(out.h_n.shape(), (Shape{4, 3, 4}));
  EXPECT_EQ(out.c_n.shape(), (Shape{4, 3, 4}));
  EXPECT_FALSE(nn::GRU(5, 4).forward_state(x).c_n.defined());
}

// Layer l's input is layer l-1's output, both directions concatenated; h_n lists layer by layer,
// direction by direction; batch_first and unbatched inputs are the same computation.
TEST(RecurrentModules, StackingMatchesLayerByLayer) {
  for (RecurrentCell cell : {RecurrentCell::RNN, RecurrentCell::LSTM, RecurrentCell::GRU}) {
    SCOPED_TRACE(int(cell));
    manual_seed(7);
    nn::Recurrent m(cell, 3, 4, 2, true, false, 0.0, true, DType::Float64);
    const bool lstm = cell == RecurrentCell::LSTM;
    Tensor x = random_tensor({6, 2, 3}, -1, 1, 2);
    Tensor h0 = random_tensor({4, 2, 4}, -1, 1, 3);
    Tensor c0 = lstm ? random_tensor({4, 2, 4}, -1, 1, 4) : Tensor();
    nn::Recurrent::Output got = m.forward_state(x, h0, c0);

    RecurrentOptions opt;
    opt.cell = cell;
    Tensor in = x;
    std::vector<Tensor> hs, cs;
    for (int64_t l = 0; l < 2; ++l) {
      std::vector<Tensor> outs;
      for (int64_t d = 0; d < 2; ++d) {
        opt.reverse = d == 1;
        RecurrentResult r = recurrent_layer(in, m.weights(l, d == 1), h0.select(0, 2 * l + d),
                                            lstm ? c0.select(0, 2 * l + d) : Tensor(), Tensor(), opt);
        outs.push_back(r.output);
        hs.push_back(r.h);
        cs.push_back(r.c);
      }
      in = cat(outs, 2);
    }
    EXPECT_TRUE(same_bits(got.output, in));
    EXPECT_TRUE(same_bits(got.h_n, stack(hs, 0)));
    if (lstm) {
      EXPECT_TRUE(same_bits(got.c_n, stack(cs, 0)));
    }

    m.batch_first = true;
    nn::Recurrent::Output bf = m.forward_state(x.transpose(0, 1).contiguous(), h0, c0);
    EXPECT_TRUE(all_close(bf.output, got.output.transpose(0, 1), 1e-14, 1e-14));
    EXPECT_TRUE(all_close(bf.h_n, got.h_n, 1e-14, 1e-14));
    m.batch_first = false;
    // Unbatched: (S, I) with states (L * D, H) is batch entry 1 on its own.
    nn::Recurrent::Output one =
        m.forward_state(x.select(1, 1), h0.select(1, 1), lstm ? c0.select(1, 1) : Tensor());
    EXPECT_TRUE(all_close(one.output, got.output.select(1, 1), 1e-14, 1e-14));
    EXPECT_TRUE(all_close(one.h_n, got.h_n.select(1, 1), 1e-14, 1e-14));
  }
}

TEST(RecurrentModules, Edges) {
  manual_seed(9);
  nn::LSTM lstm(3, 2, 1, true, false, 0.0, false, DType::Float64);
  // An empty sequence: no output steps, the states are the initial ones.
  Tensor h0 = random_tensor({1, 4, 2}, -1, 1, 5), c0 = random_tensor({1, 4, 2}, -1, 1, 6);
  nn::Recurrent::Output empty = lstm.forward_state(zeros({0, 4, 3}, DType::Float64), h0, c0);
  EXPECT_EQ(empty.output.shape(), (Shape{0, 4, 2}));
  EXPECT_TRUE(same_bits(empty.h_n, h0));
  EXPECT_TRUE(same_bits(empty.c_n, c0));
  // An empty batch.
  EXPECT_EQ(lstm(zeros({5, 0, 3}, DType::Float64)).shape(), (Shape{5, 0, 2}));
  // NaN in one step of one entry: that entry is NaN from there on, the others are untouched.
  Tensor x = random_tensor({4, 2, 3}, -1, 1, 7);
  Tensor clean = lstm(x);
  std::vector<double> v = x.to_vector();
  v[size_t((2 * 2 + 1) * 3)] = std::numeric_limits<double>::quiet_NaN();
  Tensor dirty = lstm(from_vector(v, {4, 2, 3}));
  EXPECT_TRUE(same_bits(dirty.select(1, 0), clean.select(1, 0)));
  EXPECT_TRUE(same_bits(dirty.slice(0, 0, 2), clean.slice(0, 0, 2)));
  for (double d : dirty.select(1, 1).slice(0, 2, 4).to_vector()) EXPECT_TRUE(std::isnan(d));
  // +-inf inputs saturate the gates: finite outputs in [-1, 1].
  v[size_t((2 * 2 + 1) * 3)] = std::numeric_limits<double>::infinity();
  Tensor inf_out = lstm(from_vector(v, {4, 2, 3}));
  for (double d : inf_out.to_vector()) EXPECT_TRUE(std::isfinite(d) && std::abs(d) <= 1);
  // Lengths of 0 and S: an entry of length 0 keeps its state and outputs zeros.
  RecurrentOptions opt;
  opt.cell = RecurrentCell::LSTM;
  Tensor len = from_vector(std::vector<int64_t>{0, 4}, {2});
  RecurrentResult r = recurrent_layer(x, lstm.weights(0, false), h0.select(0, 0).slice(0, 0, 2),
                                      c0.select(0, 0).slice(0, 0, 2), len, opt);
  EXPECT_TRUE(same_bits(r.h.select(0, 0), h0.select(0, 0).select(0, 0)));
  EXPECT_EQ(amax(abs(r.output.select(1, 0))).item<double>(), 0.0);
  RecurrentResult full = recurrent_layer(x, lstm.weights(0, false), h0.select(0, 0).slice(0, 0, 2),
                                         c0.select(0, 0).slice(0, 0, 2), Tensor(), opt);
  EXPECT_TRUE(same_bits(r.output.select(1, 1), full.output.select(1, 1)));
}

// The ONNX activation functions, against their definitions.
TEST(RecurrentModules, ActivationsByOnnxName) {
  Tensor x = from_vector(std::vector<double>{-3, -0.5, 0, 0.25, 2}, {5});
  auto expect = [&](RecurrentActivation a, auto f) {
    std::vector<double> want;
    for (double v : x.to_vector()) want.push_back(f(v));
    EXPECT_TRUE(all_close(a(x), from_vector(want, {5}), 1e-12, 1e-12)) << a.name;
  };
  expect({"relu"}, [](double v) { return std::max(v, 0.0); });
  expect({"Affine", 2.0, 0.5}, [](double v) { return 2 * v + 0.5; });
  expect({"LeakyRelu", 0.1}, [](double v) { return v < 0 ? 0.1 * v : v; });
  expect({"ThresholdedRelu", 0.2}, [](double v) { return v > 0.2 ? v : 0.0; });
  expect({"ScaledTanh", 1.5, 0.5}, [](double v) { return 1.5 * std::tanh(0.5 * v); });
  expect({"HardSigmoid"}, [](double v) { return std::clamp(0.2 * v + 0.5, 0.0, 1.0); });
  expect({"Elu", 0.5}, [](double v) { return v > 0 ? v : 0.5 * (std::exp(v) - 1); });
  expect({"Softsign"}, [](double v) { return v / (1 + std::abs(v)); });
  expect({"Softplus"}, [](double v) { return std::log1p(std::exp(v)); });
  expect_error([&] { RecurrentActivation("Swish")(x); }, {"Swish", "not one of", "Sigmoid"});
  expect_error([&] { RecurrentActivation("Tanh", 1.0).check(); }, {"Tanh", "takes no alpha"});
}

TEST(RecurrentModules, ErrorsSayWhatIsValid) {
  nn::GRU gru(3, 2);
  expect_error([&] { gru(zeros({4, 2, 5})); }, {"GRU", "5 features", "input_size is 3"});
  expect_error([&] { gru(zeros({3})); }, {"GRU", "(sequence, batch, 3)"});
  expect_error([&] { gru.forward_state(zeros({4, 2, 3}), zeros({2, 2, 2})); },
               {"GRU", "h0 must be (1, 2, 2)"});
  expect_error([&] { gru.forward_state(zeros({4, 2, 3}), Tensor(), zeros({1, 2, 2})); },
               {"GRU", "c0 is for LSTM only"});
  expect_error([] { nn::RNN(3, 2, 1, "gelu"); }, {"RNN", "'tanh' or 'relu'", "gelu"});
  expect_error([] { nn::LSTM(3, 0); }, {"LSTM", "must be positive"});
  RecurrentOptions opt;
  opt.cell = RecurrentCell::LSTM;
  RecurrentWeights w{zeros({8, 3}), zeros({8, 2}), Tensor(), Tensor(), Tensor()};
  expect_error([&] { recurrent_layer(zeros({4, 2, 3}), w, Tensor(), Tensor(), zeros({2}), opt); },
               {"lengths must be an integer tensor (2)"});
  RecurrentOptions gru_options;
  gru_options.cell = RecurrentCell::GRU;
  expect_error([&] { recurrent_layer(zeros({4, 2, 3}), w, Tensor(), Tensor(), Tensor(), gru_options); },
               {"GRU", "w_hh must be (3 * hidden, hidden)"});
  w.w_ih = zeros({8, 3}, DType::Float64);
  expect_error([&] { recurrent_layer(zeros({4, 2, 3}), w, Tensor(), Tensor(), Tensor(), opt); },
               {"w_ih is float64, the input is float32"});
}

// Compiled inference equals eager bit for bit (both backends), sequence lengths included.
TEST(RecurrentModules, CompiledEqualsEager) {
  for (RecurrentCell cell : {RecurrentCell::RNN, RecurrentCell::LSTM, RecurrentCell::GRU}) {
    for (const char* backend : {"interpreter", "cpp"}) {
      SCOPED_TRACE(std::to_string(int(cell)) + backend);
      manual_seed(11);
      nn::Recurrent m(cell, 6, 8, 2, true, true, 0.0, true);
      m.eval();
      CompileOptions o;
      o.backend = backend;
      CompiledFunction f = compile_module(
          m, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{m(in[0])}; }, o);
      for (uint64_t s = 0; s < 2; ++s) {
        Tensor x = random_tensor({3, 5, 6}, -2, 2, 20 + s).to(DType::Float32);
        EXPECT_TRUE(same_bits(f({x})[0], m(x)));
      }
    }
  }
}

// A whole LSTM training step (embedding, LSTM, classifier, Adam) compiled equals eager.
TEST(RecurrentModules, CompiledTrainingStepEqualsEager) {
  struct Tagger : nn::Module {
    Tagger() {
      embed = std::make_shared<nn::Embedding>(11, 6);
      lstm = std::make_shared<nn::LSTM>(6, 8, 1, true, true);
      head = std::make_shared<nn::Linear>(8, 5);
      register_module("embed", embed);
      register_module("lstm", lstm);
      register_module("head", head);
    }
    Tensor forward(const Tensor& tokens) override { return (*head)((*lstm)((*embed)(tokens))); }
    std::string type_name() const override { return "Tagger"; }
    std::shared_ptr<nn::Embedding> embed;
    std::shared_ptr<nn::LSTM> lstm;
    std::shared_ptr<nn::Linear> head;
  };
  manual_seed(12);
  Tagger eager;
  manual_seed(12);
  Tagger model;
  optim::Adam opt_e(eager.parameters(), optim::AdamOptions{.lr = 1e-2});
  optim::Adam opt(model.parameters(), optim::AdamOptions{.lr = 1e-2});
  auto loss_of = [](nn::Module& m, const Tensor& tokens, const Tensor& tags) {
    return cross_entropy(m(tokens).reshape({-1, 5}), tags.reshape({-1}));
  };
  CompileOptions o;
  o.backend = "interpreter";
  CompiledFunction step = compile_step(
      model,
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{loss_of(model, in[0], in[1])}; },
      opt, {}, o);
  for (int s = 0; s < 4; ++s) {
    std::vector<int64_t> tok, tag;
    for (int i = 0; i < 4 * 7; ++i) {
      tok.push_back((i * 7 + s * 3) % 11);
      tag.push_back((i + s) % 5);
    }
    Tensor tokens = from_vector(tok, {4, 7}), tags = from_vector(tag, {4, 7});
    Tensor loss = loss_of(eager, tokens, tags);
    opt_e.zero_grad();
    loss.backward();
    opt_e.step();
    Tensor got = step({tokens, tags})[0];
    EXPECT_TRUE(all_close(got, loss.detach(), 1e-5, 1e-6)) << "step " << s;
  }
  const auto pe = eager.named_parameters(), pm = model.named_parameters();
  for (size_t k = 0; k < pe.size(); ++k) {
    EXPECT_TRUE(all_close(pm[k].second, pe[k].second, 1e-4, 1e-5)) << pe[k].first;
  }
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// Batch sizes at one sequence length share one set of kernels (the batch is a symbolic dim: the
// layer puts no (batch, hidden) constant in the graph); a new sequence length unrolls a different
// graph, so it is compiled for that length and says why. Every call equals eager.
TEST(RecurrentModules, CompiledBatchIsDynamicSequenceSpecialized) {
  manual_seed(13);
  nn::LSTM lstm(4, 3, 1, true, true);
  lstm.eval();
  CompileOptions o;
  o.backend = "interpreter";
  CompiledFunction f = compile_module(
      lstm, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{lstm(in[0])}; }, o);
  uint64_t seed = 30;
  for (int64_t b : {2, 3, 5, 1}) {
    Tensor x = random_tensor({b, 6, 4}, -2, 2, ++seed).to(DType::Float32);
    EXPECT_TRUE(same_bits(f({x})[0], lstm(x))) << "batch " << b;
  }
  EXPECT_EQ(f.num_compiles(), 2) << ::testing::PrintToString(f.recompile_reasons());
  ASSERT_FALSE(f.recompile_reasons().empty());
  EXPECT_NE(f.recompile_reasons()[0].find("dynamic"), std::string::npos) << f.recompile_reasons()[0];
  Tensor x = random_tensor({2, 7, 4}, -2, 2, 40).to(DType::Float32);
  EXPECT_TRUE(same_bits(f({x})[0], lstm(x)));
  EXPECT_NE(f.recompile_reasons().back().find("dim 1: 6 -> 7"), std::string::npos)
      << f.recompile_reasons().back();
  EXPECT_EQ(f.num_compiles(), 3);
  // At the new length the batch is dynamic again (the failed choice of batch and length together
  // does not hide it): one more compile for batches 3 and 4.
  for (int64_t b : {3, 4}) {
    Tensor y = random_tensor({b, 7, 4}, -2, 2, 50 + uint64_t(b)).to(DType::Float32);
    EXPECT_TRUE(same_bits(f({y})[0], lstm(y))) << "batch " << b;
  }
  EXPECT_EQ(f.num_compiles(), 4) << ::testing::PrintToString(f.recompile_reasons());
  EXPECT_NE(f.recompile_reasons().back().find("(dynamic S0 = input 0 dim 0"), std::string::npos)
      << f.recompile_reasons().back();
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// Sequence lengths outside [0, S] (negative, S + 1, int64's extremes) are an error, eagerly and on
// every call of a compiled plan, never a silently clamped answer; int32 lengths work as int64.
TEST(RecurrentModules, LengthsOutsideTheSequenceAreRefused) {
  manual_seed(14);
  nn::GRU gru(3, 2);
  RecurrentOptions opt;
  opt.cell = RecurrentCell::GRU;
  const RecurrentWeights w = gru.weights(0, false);
  const Tensor x = random_tensor({4, 2, 3}, -1, 1, 60).to(DType::Float32);
  auto run = [&](const Tensor& len) { return recurrent_layer(x, w, Tensor(), Tensor(), len, opt).output; };
  const Tensor good = from_vector(std::vector<int64_t>{4, 1}, {2});
  const Tensor want = run(good);
  EXPECT_TRUE(same_bits(run(good.to(DType::Int32)), want));
  for (int64_t bad : {int64_t(-1), int64_t(5), std::numeric_limits<int64_t>::max(),
                      std::numeric_limits<int64_t>::min()}) {
    SCOPED_TRACE(bad);
    expect_error([&] { run(from_vector(std::vector<int64_t>{2, bad}, {2})); }, "index");
  }
  CompileOptions o;
  o.backend = "interpreter";
  CompiledFunction f = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{run(in[0])}; }, o);
  EXPECT_TRUE(same_bits(f({good})[0], want));
  expect_error([&] { f({from_vector(std::vector<int64_t>{2, 5}, {2})}); }, "index");
  EXPECT_TRUE(same_bits(f({good})[0], want));  // the plan still works after the refusal
}

}  // namespace
}  // namespace smelt
