// smelt demo: trains the digits CNN (models::digits_cnn) on data/digits.csv.gz with a fixed
// seeded 80/20 split, saves a checkpoint, reloads it into a fresh model and re-evaluates (the
// accuracy must be identical), writes the loss curve as SVG. The last line is exactly
// "test accuracy: NN.N%".
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>

#include <omp.h>

#include "smelt/smelt.h"
#include "tools/commands.h"
#include "tools/options.h"
#include "tools/output_dir.h"
#include "tools/progress.h"
#include "tools/svg_plot.h"

namespace smelt::tools {
namespace {

struct DemoOptions {
  int epochs = 20;
  int64_t batch_size = 64;
  double lr = 3e-3;
  uint64_t seed = 0;
  std::string data = data::default_data_dir() + "/digits.csv.gz";
  std::string out = "build/demo";
};

// Pixels 0..16 as (N, 1, 8, 8) in [0, 1].
Tensor images(const Tensor& rows) { return rows.reshape({-1, 1, 8, 8}) / 16.0; }

// Fraction of `dataset` the model classifies correctly (eval mode, no autograd).
double accuracy(nn::Module& model, const data::DatasetPtr& dataset) {
  NoGradGuard no_grad;
  model.eval();
  data::DataLoader loader(dataset, {.batch_size = 256});
  int64_t correct = 0;
  for (const data::Batch& b : loader) {
    Tensor predicted = argmax(model(images(b.inputs)), 1);
    correct += int64_t(sum(cast(eq(predicted, b.targets), DType::Int64)).item());
  }
  return double(correct) / double(dataset->size());
}

void run_demo(const DemoOptions& opt) {
  // A bad --out fails now, not after minutes of training.
  prepare_output_dir(opt.out, "demo: --out");
  manual_seed(opt.seed);
  auto digits = data::load_digits(opt.data);
  auto [train, test] = data::train_test_split(digits, 0.8, opt.seed);
  std::printf("digits: %lld train / %lld test images (8x8), %d threads\n",
              static_cast<long long>(train->size()), static_cast<long long>(test->size()),
              omp_get_max_threads());

  auto model = models::digits_cnn();
  std::printf("model: %lld parameters\n", static_cast<long long>(model->num_parameters()));
  optim::Adam adam(model->parameters(), {.lr = opt.lr});
  data::DataLoader loader(train, {.batch_size = opt.batch_size, .shuffle = true, .seed = opt.seed + 1});
  optim::CosineAnnealingLR schedule(adam, opt.epochs);

  ProgressBar bar(int64_t(opt.epochs) * loader.num_batches());
  Series curve{"train loss (per step)", {}, {}};
  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    model->train();
    for (const data::Batch& b : loader) {
      adam.zero_grad();
      Tensor loss = cross_entropy((*model)(images(b.inputs)), b.targets);
      loss.backward();
      adam.step();
      double l = loss.item();
      curve.x.push_back(double(curve.x.size()));
      curve.y.push_back(l);
      bar.step(epoch, opt.epochs, b.inputs.size(0), l);
    }
    schedule.step();
    char extra[64];
    std::snprintf(extra, sizeof extra, "test acc %.1f%%", 100.0 * accuracy(*model, test));
    bar.end_epoch(epoch, opt.epochs, extra);
  }

  const double trained = accuracy(*model, test);
  const std::string checkpoint = opt.out + "/digits_cnn.safetensors";
  io::save_module(checkpoint, *model, {{"model", "digits_cnn"}, {"epochs", std::to_string(opt.epochs)}});
  auto reloaded = models::digits_cnn();
  io::load_module(checkpoint, *reloaded);
  const double reloaded_acc = accuracy(*reloaded, test);
  std::printf("checkpoint: %s (reloaded into a fresh model: %.1f%%, %s)\n", checkpoint.c_str(),
              100.0 * reloaded_acc, reloaded_acc == trained ? "identical" : "DIFFERENT");
  SMELT_CHECK(reloaded_acc == trained) << "demo: the reloaded checkpoint gives " << 100.0 * reloaded_acc
                                       << "% but the trained model " << 100.0 * trained << "%";

  const std::string svg = opt.out + "/loss_curve.svg";
  write_svg_line_chart(svg, {curve}, {.title = "smelt demo: digits CNN", .x_label = "step",
                                      .y_label = "cross-entropy loss", .log_y = true});
  std::printf("loss curve: %s\n", svg.c_str());
  std::printf("test accuracy: %.1f%%\n", 100.0 * trained);
}

}  // namespace

void register_demo(CLI::App& app) {
  auto opt = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand("demo", "Train a small CNN on handwritten digits");
  cmd->add_option("--epochs", opt->epochs, "training epochs")->check(integer_in(1, 1000));
  cmd->add_option("--batch-size", opt->batch_size, "examples per step")
      ->check(integer_in<int64_t>(1, 4096));
  cmd->add_option("--lr", opt->lr, "Adam learning rate (cosine-annealed)")
      ->check(positive_at_most(10.0));
  cmd->add_option("--seed", opt->seed, "seed for the split, initialization and shuffling")
      ->check(any_uint64());
  cmd->add_option("--data", opt->data, "digits CSV (gzip)");
  cmd->add_option("--out", opt->out, "directory for the checkpoint and the loss curve");
  cmd->callback([opt] { run_demo(*opt); });
}

}  // namespace smelt::tools
