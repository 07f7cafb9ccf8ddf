// nn::RNN / LSTM / GRU against PyTorch: the same state dict, input and initial states give
// PyTorch's outputs and gradients (tests/golden/recurrent.json, made by
// tests/golden/golden_recurrent.py), in float64 and in float32.
#include <filesystem>
#include <fstream>

#include "support/check.h"
#include "support/json_tensor.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::tensor_from_json;

nlohmann::json load_cases() {
  std::ifstream in(std::filesystem::path(SMELT_TEST_DIR) / "golden" / "recurrent.json");
  EXPECT_TRUE(in.good()) << "tests/golden/recurrent.json is missing";
  nlohmann::json j;
  in >> j;
  return j.at("cases");
}

std::shared_ptr<nn::Recurrent> make_module(const nlohmann::json& c, DType dtype) {
  const std::string kind = c.at("module");
  const RecurrentCell cell = kind == "LSTM" ? RecurrentCell::LSTM
                             : kind == "GRU" ? RecurrentCell::GRU
                                             : RecurrentCell::RNN;
  auto m = std::make_shared<nn::Recurrent>(
      cell, c.at("input_size").get<int64_t>(), c.at("hidden_size").get<int64_t>(),
      c.at("num_layers").get<int64_t>(), c.at("bias").get<bool>(), c.at("batch_first").get<bool>(),
      0.0, c.at("bidirectional").get<bool>(), dtype);
  m->nonlinearity = c.at("nonlinearity").get<std::string>();
  StateDict state;
  for (const auto& [name, t] : c.at("parameters").items()) state[name] = tensor_from_json(t).to(dtype);
  m->load_state_dict(state);  // strict: every PyTorch name must exist here, and no other
  return m;
}

TEST(RecurrentGolden, OutputsAndGradientsMatchPyTorch) {
  const nlohmann::json cases = load_cases();
  ASSERT_GE(cases.size(), 7u);
  for (const nlohmann::json& c : cases) {
    for (DType dt : {DType::Float64, DType::Float32}) {
      SCOPED_TRACE(c.at("name").get<std::string>() + " " + dtype_name(dt));
      auto m = make_module(c, dt);
      auto leaf = [&](const char* key) {
        Tensor t = tensor_from_json(c.at(key));
        if (t.defined()) {
          t = t.to(dt).detach();
          t.set_requires_grad(true);
        }
        return t;
      };
      Tensor x = leaf("input"), h0 = leaf("h0"), c0 = leaf("c0");
      nn::Recurrent::Output out = m->forward_state(x, h0, c0);
      const double tol = dt == DType::Float64 ? 1e-10 : 2e-5;
      EXPECT_TRUE(all_close(out.output, tensor_from_json(c.at("output")).to(dt), tol, tol));
      EXPECT_TRUE(all_close(out.h_n, tensor_from_json(c.at("h_n")).to(dt), tol, tol));
      const nlohmann::json& w = c.at("weights");
      Tensor loss = sum(out.output * tensor_from_json(w.at("output")).to(dt)) +
                    sum(out.h_n * tensor_from_json(w.at("h_n")).to(dt));
      if (!c.at("c_n").is_null()) {
        EXPECT_TRUE(all_close(out.c_n, tensor_from_json(c.at("c_n")).to(dt), tol, tol));
        loss = loss + sum(out.c_n * tensor_from_json(w.at("c_n")).to(dt));
      }
      loss.backward();
      const auto params = m->named_parameters();
      for (const auto& [name, g] : c.at("grads").items()) {
        Tensor got;
        if (name == "input") got = x.grad();
        else if (name == "h0") got = h0.grad();
        else if (name == "c0") got = c0.grad();
        for (const auto& [pn, p] : params) if (pn == name) got = p.grad();
        ASSERT_TRUE(got.defined()) << "no gradient for " << name;
        EXPECT_TRUE(all_close(got, tensor_from_json(g).to(dt), tol * 5, tol * 5)) << name;
      }
    }
  }
}

}  // namespace
}  // namespace smelt
