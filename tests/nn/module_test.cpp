// Module registry, train/eval, zero_grad, state dicts and default initialization.
#include <cmath>

#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;

std::vector<std::string> names_of(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [name, _] : named) out.push_back(name);
  return out;
}

std::shared_ptr<nn::Sequential> mlp() {
  return std::make_shared<nn::Sequential>(
      std::vector<nn::ModulePtr>{std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>(),
                                 std::make_shared<nn::Linear>(4, 2)});
}

TEST(Module, NamedParametersAreDottedAndInOrder) {
  auto model = mlp();
  EXPECT_EQ(names_of(model->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  for (const Tensor& p : model->parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  EXPECT_EQ(model->num_parameters(), 3 * 4 + 4 + 4 * 2 + 2);
  EXPECT_TRUE(model->named_parameters(/*recurse=*/false).empty());
}

TEST(Module, NestedBuffersAndParameters) {
  auto inner = std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::BatchNorm2d>(3), std::make_shared<nn::ReLU>()});
  nn::Sequential outer(std::vector<nn::ModulePtr>{std::make_shared<nn::Flatten>(), inner});
  EXPECT_EQ(
      names_of(outer.named_buffers()),
      (std::vector<std::string>{"1.0.running_mean", "1.0.running_var", "1.0.num_batches_tracked"}));
  EXPECT_EQ(names_of(outer.named_parameters()),
            (std::vector<std::string>{"1.0.weight", "1.0.bias"}));
  for (const Tensor& b : outer.buffers()) EXPECT_FALSE(b.requires_grad());
  EXPECT_EQ(outer.named_children().size(), 2u);
}

TEST(Module, MembersAndRegistryShareTensors) {
  nn::Linear lin(3, 2);
  auto named = lin.named_parameters();
  EXPECT_TRUE(named[0].second.same(lin.weight));
  EXPECT_TRUE(named[1].second.same(lin.bias));
  nn::Linear no_bias(3, 2, /*bias=*/false);
  EXPECT_FALSE(no_bias.bias.defined());
  EXPECT_EQ(names_of(no_bias.named_parameters()), (std::vector<std::string>{"weight"}));
}

// A module that ties its two linears' weights, as language models tie embeddings.
class Tied : public nn::Module {
 public:
  Tied() {
    a = register_module("a", std::make_shared<nn::Linear>(3, 3));
    b = register_module("b", std::make_shared<nn::Linear>(3, 3, false));
    b->weight = a->weight;
  }
  Tensor forward(const Tensor& x) override { return (*b)((*a)(x)); }
  std::string type_name() const override { return "Tied"; }
  std::shared_ptr<nn::Linear> a, b;
};

// A module registering the same name twice or a name with a dot.
class BadNames : public nn::Module {
 public:
  explicit BadNames(const std::string& second) : w(zeros({2})), b(zeros({2})) {
    register_parameter("w", w);
    register_buffer(second, b);
  }
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "BadNames"; }
  Tensor w, b;
};

TEST(Module, InvalidNamesAreErrors) {
  expect_error([] { BadNames m("w"); }, {"BadNames", "'w'", "already exists"});
  expect_error([] { BadNames m("a.b"); }, {"BadNames", "a.b", "no '.'"});
  expect_error([] { BadNames m(""); }, {"BadNames", "non-empty"});
}

TEST(Module, TrainEvalIsRecursive) {
  auto inner = std::make_shared<nn::Dropout>(0.5);
  nn::Sequential seq(std::vector<nn::ModulePtr>{std::make_shared<nn::ReLU>(), inner});
  EXPECT_TRUE(seq.is_training());
  seq.eval();
  EXPECT_FALSE(seq.is_training());
  EXPECT_FALSE(inner->is_training());
  seq.train();
  EXPECT_TRUE(inner->is_training());
}

TEST(Module, ZeroGradDropsGradients) {
  auto model = mlp();
  for (Tensor& p : model->parameters()) p.set_grad(ones_like(p));
  model->zero_grad();
  for (const Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Module, StateDictHoldsParametersAndBuffersSharingData) {
  nn::BatchNorm2d bn(4);
  StateDict sd = bn.state_dict();
  std::vector<std::string> keys;
  for (const auto& [k, _] : sd) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"bias", "num_batches_tracked", "running_mean",
                                            "running_var", "weight"}));
  EXPECT_FALSE(sd["weight"].requires_grad());
  EXPECT_EQ(sd["weight"].raw_data(), bn.weight.raw_data());
  EXPECT_EQ(sd["num_batches_tracked"].dtype(), DType::Int64);
  EXPECT_EQ(sd["num_batches_tracked"].dim(), 0);
}

TEST(Module, LoadStateDictRoundTrip) {
  manual_seed(1);
  auto a = mlp();
  manual_seed(2);
  auto b = mlp();
  EXPECT_FALSE(all_close(a->named_parameters()[0].second, b->named_parameters()[0].second));
  Tensor b_weight = b->named_parameters()[0].second;
  auto result = b->load_state_dict(a->state_dict());
  EXPECT_TRUE(result.missing_keys.empty());
  EXPECT_TRUE(result.unexpected_keys.empty());
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(all_close(a->named_parameters()[i].second, b->named_parameters()[i].second));
  }
  // Loaded in place: the tensor handed out before still is the parameter.
  EXPECT_TRUE(b_weight.same(b->named_parameters()[0].second));
  EXPECT_TRUE(b_weight.requires_grad());
}

TEST(Module, LoadStateDictStrictErrors) {
  auto model = mlp();
  StateDict good = model->state_dict();
  Tensor before = good["0.weight"].clone();

  StateDict missing = good;
  missing.erase("2.bias");
  expect_error([&] { model->load_state_dict(missing); },
               {"Sequential", "missing keys", "'2.bias'"});

  StateDict unexpected = good;
  unexpected["3.weight"] = zeros({2});
  expect_error([&] { model->load_state_dict(unexpected); }, {"unexpected keys", "'3.weight'"});

  StateDict wrong_shape = good;
  wrong_shape["0.weight"] = zeros({3, 4});
  wrong_shape["0.bias"] = full({4}, 7.0);
  expect_error([&] { model->load_state_dict(wrong_shape); },
               {"shape mismatches", "'0.weight'", "(3, 4)", "(4, 3)"});
  // Nothing was copied: not even the well-shaped bias.
  EXPECT_FALSE(all_close(model->named_parameters()[1].second, full({4}, 7.0)));
  EXPECT_TRUE(all_close(model->named_parameters()[0].second, before));
}

TEST(Module, LoadStateDictNonStrictReportsKeys) {
  auto model = mlp();
  StateDict partial;
  partial["0.bias"] = full({4}, 0.5);
  partial["extra"] = zeros({1});
  auto result = model->load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(result.missing_keys, (std::vector<std::string>{"0.weight", "2.weight", "2.bias"}));
  EXPECT_EQ(result.unexpected_keys, (std::vector<std::string>{"extra"}));
  EXPECT_TRUE(all_close(model->named_parameters()[1].second, full({4}, 0.5)));
}

TEST(Module, TiedWeightsAreListedOnce) {
  Tied m;
  EXPECT_EQ(names_of(m.named_parameters()), (std::vector<std::string>{"a.weight", "a.bias"}));
  // The state dict keeps every name, as PyTorch's does.
  EXPECT_EQ(m.state_dict().size(), 3u);
  EXPECT_EQ(m.state_dict()["b.weight"].raw_data(), m.a->weight.raw_data());
}

TEST(Module, ToStringShowsTheTree) {
  auto model = mlp();
  EXPECT_EQ(model->to_string(),
            "Sequential(\n"
            "  (0): Linear(in_features=3, out_features=4, bias=true)\n"
            "  (1): ReLU()\n"
            "  (2): Linear(in_features=4, out_features=2, bias=true)\n"
            ")");
}

TEST(Init, ManualSeedMakesModelsReproducible) {
  manual_seed(42);
  auto a = mlp();
  manual_seed(42);
  auto b = mlp();
  manual_seed(43);
  auto c = mlp();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(all_close(a->parameters()[i], b->parameters()[i], 0, 0));
  }
  EXPECT_FALSE(all_close(a->parameters()[0], c->parameters()[0]));
}

// Values in [-bound, bound], filling it (max near the bound), mean ~0, variance ~bound^2 / 3.
void expect_uniform(const Tensor& t, double bound) {
  std::vector<double> v = t.to_vector();
  double sum = 0, sum_sq = 0, max_abs = 0;
  for (double x : v) {
    EXPECT_LE(std::abs(x), bound);
    sum += x;
    sum_sq += x * x;
    max_abs = std::max(max_abs, std::abs(x));
  }
  double n = double(v.size());
  EXPECT_GT(max_abs, 0.95 * bound);
  EXPECT_NEAR(sum / n, 0.0, 0.05 * bound);
  EXPECT_NEAR(sum_sq / n, bound * bound / 3.0, 0.1 * bound * bound / 3.0);
}

TEST(Init, LinearMatchesPyTorchDefaults) {
  manual_seed(0);
  nn::Linear lin(100, 300);
  EXPECT_EQ(lin.weight.shape(), (Shape{300, 100}));
  expect_uniform(lin.weight, 1.0 / std::sqrt(100.0));  // kaiming_uniform(a=sqrt(5))
  expect_uniform(lin.bias, 1.0 / std::sqrt(100.0));
}

TEST(Init, ConvMatchesPyTorchDefaults) {
  manual_seed(0);
  nn::Conv2d conv(16, 64, {3, 3}, {.groups = 2});
  EXPECT_EQ(conv.weight.shape(), (Shape{64, 8, 3, 3}));
  double bound = 1.0 / std::sqrt(8.0 * 9.0);  // fan_in = in / groups * kH * kW
  expect_uniform(conv.weight, bound);
  EXPECT_EQ(conv.bias.shape(), (Shape{64}));
  for (double b : conv.bias.to_vector()) EXPECT_LE(std::abs(b), bound);
  nn::Conv2d no_bias(3, 4, {1, 1}, {.bias = false});
  EXPECT_FALSE(no_bias.bias.defined());
}

TEST(Init, KaimingAndXavierBounds) {
  Tensor w = zeros({200, 50});
  nn::init::kaiming_uniform_(w, 0.0);
  expect_uniform(w, std::sqrt(6.0 / 50.0));
  nn::init::xavier_uniform_(w);
  expect_uniform(w, std::sqrt(6.0 / 250.0));
  auto [fan_in, fan_out] = nn::init::fan_in_and_fan_out(zeros({8, 4, 3, 5}));
  EXPECT_EQ(fan_in, 4 * 15);
  EXPECT_EQ(fan_out, 8 * 15);
  expect_error([] { nn::init::fan_in_and_fan_out(zeros({3})); }, {"fan_in_and_fan_out", "(3,)"});
}

TEST(Init, EmbeddingIsStandardNormal) {
  manual_seed(3);
  nn::Embedding emb(200, 50);
  std::vector<double> v = emb.weight.to_vector();
  double sum = 0, sum_sq = 0;
  for (double x : v) sum += x, sum_sq += x * x;
  double n = double(v.size()), mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(sum_sq / n - mean * mean, 1.0, 0.05);
}

TEST(Init, NormsAreOnesAndZeros) {
  nn::BatchNorm2d bn(5, {.dtype = DType::Float64});
  EXPECT_TRUE(all_close(bn.weight, ones({5}, DType::Float64), 0, 0));
  EXPECT_TRUE(all_close(bn.bias, zeros({5}, DType::Float64), 0, 0));
  EXPECT_TRUE(all_close(bn.running_mean, zeros({5}, DType::Float64), 0, 0));
  EXPECT_TRUE(all_close(bn.running_var, ones({5}, DType::Float64), 0, 0));
  EXPECT_EQ(bn.num_batches_tracked.item(), 0.0);
  nn::BatchNorm2d fixed(5, {.affine = false});
  EXPECT_TRUE(fixed.named_parameters().empty());
  EXPECT_EQ(fixed.named_buffers().size(), 3u);

  nn::LayerNorm ln({4, 6});
  EXPECT_TRUE(all_close(ln.weight, ones({4, 6}), 0, 0));
  EXPECT_TRUE(all_close(ln.bias, zeros({4, 6}), 0, 0));
  nn::LayerNorm plain({6}, 1e-5, /*elementwise_affine=*/false);
  EXPECT_TRUE(plain.named_parameters().empty());
}

TEST(Init, ConstructorArgumentsAreChecked) {
  expect_error([] { nn::Linear(0, 3); }, {"Linear", "positive"});
  expect_error([] { nn::Conv2d(3, 4, {3, 3}, {.groups = 2}); }, {"Conv2d", "divisible by groups"});
  expect_error([] { nn::Conv2d(4, 4, {3, 3, 3}); }, {"Conv2d", "kernel_size"});
  expect_error([] { nn::Conv2d(4, 4, {3, 3}, {.stride = {0, 1}}); }, {"Conv2d", "stride"});
  expect_error([] { nn::Dropout(1.5); }, {"Dropout", "[0, 1]"});
  expect_error([] { nn::BatchNorm2d(0); }, {"BatchNorm2d"});
  expect_error([] { nn::LayerNorm(Shape{}); }, {"LayerNorm", "normalized_shape"});
  expect_error([] { nn::Embedding(10, 0); }, {"Embedding", "positive"});
}

}  // namespace
}  // namespace smelt
