// End to end: autograd gradients into optimizers and schedulers, loss going down.
#include <cmath>

#include "support/check.h"

namespace smelt {
namespace {

TEST(Training, FitsALineWithEveryOptimizer) {
  // y = 3x - 1 on [-1, 1]; the mean squared error is convex, so every optimizer must get there.
  Tensor x = linspace(-1, 1, 32, DType::Float64);
  Tensor y = x * 3.0 - 1.0;
  for (int kind = 0; kind < 3; ++kind) {
    Tensor w = zeros({1}, DType::Float64), b = zeros({1}, DType::Float64);
    w.set_requires_grad();
    b.set_requires_grad();
    std::unique_ptr<optim::Optimizer> opt;
    if (kind == 0)
      opt = std::make_unique<optim::SGD>(std::vector<Tensor>{w, b},
                                         optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    if (kind == 1)
      opt = std::make_unique<optim::Adam>(std::vector<Tensor>{w, b}, optim::AdamOptions{.lr = 0.1});
    if (kind == 2)
      opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{w, b},
                                           optim::AdamOptions{.lr = 0.1, .weight_decay = 0.0});
    optim::CosineAnnealingLR sched(*opt, 300, 1e-3);
    double first_loss = 0, loss_value = 0;
    for (int step = 0; step < 300; ++step) {
      opt->zero_grad();
      Tensor err = w * x + b - y;
      Tensor loss = mean(err * err);
      loss.backward();
      if (step == 0) first_loss = loss.item();
      loss_value = loss.item();
      opt->step();
      sched.step();
    }
    EXPECT_LT(loss_value, 1e-4 * first_loss) << opt->type_name();
    EXPECT_NEAR(w.item(), 3.0, 1e-2) << opt->type_name();
    EXPECT_NEAR(b.item(), -1.0, 1e-2) << opt->type_name();
  }
}

TEST(Training, LinearClassifierLearnsDigits) {
  manual_seed(0);
  auto digits = data::load_digits(data::default_data_dir() + "/digits.csv.gz");
  auto [train, test] = data::train_test_split(digits, 0.8, 0);
  data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 0});
  nn::Linear model(64, 10);
  optim::AdamW opt(model.parameters(), {.lr = 0.02});
  optim::LinearLR warmup(opt, 0.1, 1.0, 20);
  Tensor classes = arange(10);
  auto one_hot_of = [&](const Tensor& t) {
    return cast(eq(t.unsqueeze(1), classes), DType::Float32);
  };
  double first_epoch_loss = 0, last_epoch_loss = 0;
  for (int ep = 0; ep < 8; ++ep) {
    double total = 0;
    for (const data::Batch& b : loader) {
      opt.zero_grad();
      Tensor err = model(b.inputs / 16.0) - one_hot_of(b.targets);
      Tensor loss = mean(err * err);
      loss.backward();
      optim::clip_grad_norm_(model.parameters(), 5.0);
      opt.step();
      warmup.step();
      total += loss.item();
    }
    if (ep == 0) first_epoch_loss = total;
    last_epoch_loss = total;
  }
  EXPECT_LT(last_epoch_loss, 0.6 * first_epoch_loss);
  // Held-out accuracy of a linear least-squares classifier on digits is well above 85%.
  data::Batch all = test->get_batch([&] {
    std::vector<int64_t> idx(size_t(test->size()));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t(i);
    return idx;
  }());
  NoGradGuard no_grad;
  std::vector<double> predicted = argmax(model(all.inputs / 16.0), 1).to_vector();
  std::vector<double> truth = all.targets.to_vector();
  int64_t correct = 0;
  for (size_t i = 0; i < truth.size(); ++i) correct += predicted[i] == truth[i];
  EXPECT_GT(double(correct) / double(truth.size()), 0.85);
}

}  // namespace
}  // namespace smelt
