// Three Adam steps of a small CNN against PyTorch (tests/golden/cnn_adam.json, written by
// tests/golden/make_golden.py): the loss before each step and every parameter after it.
#include <nlohmann/json.hpp>

#include <fstream>

#include "support/check.h"
#include "support/json_tensor.h"

namespace smelt {
namespace {

using testing::tensor_from_json;

TEST(GoldenCnnAdam, MatchesPyTorchForThreeSteps) {
  std::ifstream f(std::string(SMELT_TEST_DIR) + "/golden/cnn_adam.json");
  ASSERT_TRUE(f.good());
  nlohmann::json golden = nlohmann::json::parse(f);

  nn::Conv2d::Options same;
  same.padding = {1, 1};
  nn::Sequential model(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Conv2d>(1, 8, std::vector<int64_t>{3, 3}, same), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(std::vector<int64_t>{2, 2}), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(128, 10)});
  StateDict initial;
  for (auto& [name, value] : golden.at("initial_params").items()) initial[name] = tensor_from_json(value);
  model.load_state_dict(initial);

  const auto& o = golden.at("optimizer");
  ASSERT_EQ(o.at("name"), "Adam");
  optim::Adam adam(model.parameters(), {.lr = o.at("lr"), .beta1 = o.at("betas")[0], .beta2 = o.at("betas")[1],
                                        .eps = o.at("eps"), .weight_decay = o.at("weight_decay")});
  Tensor x = tensor_from_json(golden.at("inputs")), y = tensor_from_json(golden.at("targets"));
  auto params = model.named_parameters();
  int step = 0;
  for (const auto& expected : golden.at("steps")) {
    SCOPED_TRACE("step " + std::to_string(step++));
    adam.zero_grad();
    Tensor loss = cross_entropy(model(x), y);
    EXPECT_NEAR(loss.item(), expected.at("loss_before").get<double>(), 1e-5);
    loss.backward();
    for (auto& [name, p] : params) {
      EXPECT_TRUE(testing::all_close(p.grad(), tensor_from_json(expected.at("grads").at(name)), 1e-4, 1e-6)) << name;
    }
    adam.step();
    for (auto& [name, p] : params) {
      // Adam's first steps move each weight by about lr * sign(grad): absolute 1e-5 is 0.1% of one.
      EXPECT_TRUE(testing::all_close(p, tensor_from_json(expected.at("params_after").at(name)), 1e-4, 1e-5)) << name;
    }
  }
}

}  // namespace
}  // namespace smelt
