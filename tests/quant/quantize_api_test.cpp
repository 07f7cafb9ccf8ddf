// smelt::quantize (smelt/quantize.h), the public API: the digits CNN trained for a few epochs
// keeps its test accuracy within 0.5 points after INT8; the iterator and the vector of batches
// give the same calibration; a saved calibration reproduces the same graph; the per-layer report;
// errors.
#include <gtest/gtest.h>

#include <cmath>

#include "smelt/quantize.h"
#include "smelt/smelt.h"

namespace smelt {
namespace {

Tensor images(const Tensor& rows) { return rows.reshape({-1, 1, 8, 8}) / 16.0; }

struct Trained {
  std::shared_ptr<nn::Sequential> model;
  data::DatasetPtr train, test;
};

// The demo's model and split, trained eagerly for a few epochs (enough to classify well).
const Trained& trained_digits() {
  static const Trained t = [] {
    manual_seed(0);
    auto digits = data::load_digits(data::default_data_dir() + "/digits.csv.gz");
    auto [train, test] = data::train_test_split(digits, 0.8, 0);
    Trained r{models::digits_cnn(), train, test};
    optim::Adam adam(r.model->parameters(), {.lr = 3e-3});
    data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 1});
    for (int epoch = 0; epoch < 4; ++epoch) {
      for (const data::Batch& b : loader) {
        adam.zero_grad();
        cross_entropy((*r.model)(images(b.inputs)), b.targets).backward();
        adam.step();
      }
    }
    r.model->eval();
    return r;
  }();
  return t;
}

std::vector<std::vector<Tensor>> calibration_images(const data::DatasetPtr& train, size_t count) {
  std::vector<std::vector<Tensor>> out;
  data::DataLoader loader(train, {.batch_size = 1});
  for (const data::Batch& b : loader) {
    if (out.size() == count) break;
    out.push_back({images(b.inputs)});
  }
  return out;
}

TEST(QuantizeApi, DigitsCnnKeepsItsAccuracyWithinHalfAPoint) {
  const Trained& t = trained_digits();
  NoGradGuard no_grad;
  auto fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(*t.model)(in[0])}; };
  for (CalibrationMethod method : {CalibrationMethod::Percentile, CalibrationMethod::Entropy}) {
    QuantizeOptions options;
    options.method = method;
    const QuantizeResult q = quantize(fn, calibration_images(t.train, 64), options);
    EXPECT_EQ(q.layers.size(), 4u) << q.report();  // two convolutions, two linear layers
    for (const QuantizedLayerReport& l : q.layers) EXPECT_GT(l.sqnr_db, 20.0) << l.value << " " << l.op;
    int64_t float_correct = 0, int8_correct = 0;
    data::DataLoader eval(t.test, {.batch_size = 1});
    for (const data::Batch& b : eval) {
      const int64_t label = int64_t(b.targets.item());
      float_correct += int64_t(argmax((*t.model)(images(b.inputs)), 1).item()) == label;
      int8_correct += int64_t(argmax(q.graph.run({images(b.inputs)})[0], 1).item()) == label;
    }
    const double n = double(t.test->size());
    EXPECT_GT(float_correct / n, 0.9);  // the model learned something worth keeping
    EXPECT_LE(std::abs(float_correct - int8_correct) / n, 0.005)
        << "float " << float_correct << " int8 " << int8_correct << " of " << n;
  }
}

TEST(QuantizeApi, IteratorSavedCalibrationAndErrors) {
  const Trained& t = trained_digits();
  NoGradGuard no_grad;
  const Graph g = Graph::trace(
      [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) { return std::vector<Tensor>{(*t.model)(in[0])}; },
      {zeros({1, 1, 8, 8})});
  const auto batches = calibration_images(t.train, 16);
  const QuantizeResult from_vector = quantize(g, batches);
  size_t next = 0;
  const QuantizeResult from_iterator = quantize(g, [&]() -> std::optional<std::vector<Tensor>> {
    if (next == batches.size()) return std::nullopt;
    return batches[next++];
  });
  EXPECT_EQ(from_iterator.calibration_json, from_vector.calibration_json);
  EXPECT_EQ(from_iterator.graph.print(), from_vector.graph.print());
  // the input graph is unchanged; a saved calibration gives the same quantized graph
  EXPECT_EQ(g.op_names().size(), g.num_nodes());
  for (const std::string& op : g.op_names()) EXPECT_EQ(op.find("qlinear"), std::string::npos);
  QuantizeOptions saved;
  saved.calibration_json = from_vector.calibration_json;
  EXPECT_EQ(quantize(g, batches, saved).graph.print(), from_vector.graph.print());
  EXPECT_NE(from_vector.report().find("SQNR"), std::string::npos);
  EXPECT_EQ(calibration_method("mse"), CalibrationMethod::Mse);
  EXPECT_THROW(calibration_method("kl"), Error);
  EXPECT_THROW(quantize(g, std::vector<std::vector<Tensor>>{}), Error);
  saved.calibration_json = "{\"method\": 3}";
  EXPECT_THROW(quantize(g, batches, saved), Error);
}

}  // namespace
}  // namespace smelt
