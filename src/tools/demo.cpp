// smelt demo: trains the digits CNN (models::digits_cnn) on data/digits.csv.gz with a fixed
// seeded 80/20 split, with a compiled training step (compile_step: forward, backward and Adam's
// update as one plan; --eager: the eager step), saves a checkpoint, reloads it into a fresh model and
// re-evaluates (the accuracy must be identical), writes the loss curve as SVG, and compares the
// step time and peak tensor memory of the eager and compiled steps on a fresh model, and
// quantizes the trained model to INT8 (its test accuracy beside the float one). The last line is
// exactly "test accuracy: NN.N%".
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <omp.h>

#include "smelt/compile.h"
#include "smelt/quantize.h"
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
  bool eager = false;
};

// A training step of `model` with Adam: eager (forward, backward, step) or compiled (one plan
// for all three, the parameters and Adam's moments updated in place). Returns the loss.
class TrainStep {
 public:
  TrainStep(nn::Module& model, optim::Adam& adam, bool eager) : model_(model), adam_(adam), eager_(eager) {
    if (!eager) {
      compiled_ = compile_step(model, [&model](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{cross_entropy(model(images(in[0])), in[1])};
      }, adam);
    }
  }
  Tensor operator()(const Tensor& pixels, const Tensor& targets) {
    if (!eager_) return (*compiled_)({pixels, targets})[0];
    adam_.zero_grad();
    Tensor loss = cross_entropy(model_(images(pixels)), targets);
    loss.backward();
    adam_.step();
    return loss;
  }

 private:
  static Tensor images(const Tensor& rows) { return rows.reshape({-1, 1, 8, 8}) / 16.0; }
  nn::Module& model_;
  optim::Adam& adam_;
  bool eager_;
  std::optional<CompiledFunction> compiled_;
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

// The eager and the compiled step side by side on a fresh model and one batch: milliseconds per
// step (the fastest of a few rounds of steps, after warm-up) and the peak of live tensor memory
// over the steps above what was live before them (smelt::memory_stats).
void compare_steps(const data::DatasetPtr& train, const DemoOptions& opt) {
  data::DataLoader loader(train, {.batch_size = opt.batch_size});
  const data::Batch batch = *loader.begin();
  for (bool eager : {true, false}) {
    manual_seed(opt.seed);
    auto model = models::digits_cnn();
    optim::Adam adam(model->parameters(), {.lr = opt.lr});
    TrainStep step(*model, adam, eager);
    for (int i = 0; i < 5; ++i) step(batch.inputs, batch.targets);  // compiles, warms up
    double best = 1e300;
    reset_memory_peak();
    const int64_t live = memory_stats().bytes;
    for (int round = 0; round < 5; ++round) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 20; ++i) step(batch.inputs, batch.targets);
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / 20);
    }
    std::printf("%-8s step: %.3f ms, peak tensor memory over the steps: %.1f KiB\n", eager ? "eager" : "compiled",
                best, double(memory_stats().peak_bytes - live) / 1024.0);
  }
}

// INT8 (smelt::quantize): the trained model traced for one image, calibrated on 64 training
// images, its convolutions and linear layers made integer ops; its test accuracy beside the
// float model's.
void int8_step(nn::Module& model, const data::DatasetPtr& train, const data::DatasetPtr& test, double trained) {
  model.eval();
  std::vector<std::vector<Tensor>> calibration;
  data::DataLoader loader(train, {.batch_size = 1});
  for (const data::Batch& b : loader) {
    if (calibration.size() == 64) break;
    calibration.push_back({images(b.inputs)});
  }
  QuantizeOptions options;
  options.method = CalibrationMethod::Percentile;
  auto logits = [&model](const std::vector<Tensor>& in) { return std::vector<Tensor>{model(in[0])}; };
  const QuantizeResult q = quantize(logits, calibration, options);
  int64_t correct = 0;
  data::DataLoader eval(test, {.batch_size = 1});
  for (const data::Batch& b : eval) {
    correct += int64_t(argmax(q.graph.run({images(b.inputs)})[0], 1).item()) == int64_t(b.targets.item());
  }
  const double accuracy = double(correct) / double(test->size());
  std::printf("int8 (smelt::quantize, percentile, 64 calibration images): %zu layers quantized, test accuracy %.1f%% "
              "(float %.1f%%)\n", q.layers.size(), 100.0 * accuracy, 100.0 * trained);
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
  TrainStep train_step(*model, adam, opt.eager);
  std::printf("training step: %s\n", opt.eager ? "eager" : "compiled (compile_step: forward, backward and Adam in one plan; --eager for eager)");
  data::DataLoader loader(train, {.batch_size = opt.batch_size, .shuffle = true, .seed = opt.seed + 1});
  optim::CosineAnnealingLR schedule(adam, opt.epochs);

  ProgressBar bar(int64_t(opt.epochs) * loader.num_batches());
  Series curve{"train loss (per step)", {}, {}};
  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    model->train();
    for (const data::Batch& b : loader) {
      const double l = train_step(b.inputs, b.targets).item();
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
  compare_steps(train, opt);
  int8_step(*model, train, test, trained);
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
  cmd->add_flag("--eager", opt->eager, "train with the eager step instead of the compiled one");
  cmd->callback([opt] { run_demo(*opt); });
}

}  // namespace smelt::tools
