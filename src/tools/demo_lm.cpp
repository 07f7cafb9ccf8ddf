// smelt demo-lm: trains a small character-level transformer language model on a plain-text file
// that every Debian system has (the GPL-3 text of base-files, /usr/share/common-licenses/GPL-3),
// with a compiled training step (compile_training_step: forward and backward as one plan) and
// AdamW, showing a progress bar; writes the loss curve as SVG and a checkpoint, and samples a few
// lines from the trained model. The last line is "final loss: X.XXX (chance: Y.YYY)".
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "smelt/compile.h"
#include "smelt/smelt.h"
#include "tools/commands.h"
#include "tools/options.h"
#include "tools/output_dir.h"
#include "tools/progress.h"
#include "tools/svg_plot.h"

namespace smelt::tools {
namespace {

struct LmOptions {
  std::string corpus = "/usr/share/common-licenses/GPL-3";
  int64_t steps = 600;
  int64_t batch_size = 16;
  int64_t context = 32;
  int64_t width = 64;
  int64_t heads = 4;
  double lr = 3e-3;
  uint64_t seed = 0;
  int64_t sample_chars = 240;
  std::string out = "build/demo-lm";
};

// One pre-norm transformer block with causal self-attention.
class Block : public nn::Module {
 public:
  Block(int64_t d, int64_t heads) : d_(d), heads_(heads) {
    ln1_ = register_module("ln1", std::make_shared<nn::LayerNorm>(Shape{d}));
    qkv_ = register_module("qkv", std::make_shared<nn::Linear>(d, 3 * d));
    proj_ = register_module("proj", std::make_shared<nn::Linear>(d, d));
    ln2_ = register_module("ln2", std::make_shared<nn::LayerNorm>(Shape{d}));
    up_ = register_module("up", std::make_shared<nn::Linear>(d, 4 * d));
    down_ = register_module("down", std::make_shared<nn::Linear>(4 * d, d));
  }
  Tensor forward(const Tensor& x) override {  // (B, T, D)
    const int64_t b = x.size(0), t = x.size(1), hd = d_ / heads_;
    Tensor qkv = (*qkv_)((*ln1_)(x));
    auto heads = [&](int64_t part) {
      return qkv.slice(2, part * d_, (part + 1) * d_).reshape({b, t, heads_, hd}).permute({0, 2, 1, 3});
    };
    // Position j may attend to positions <= j: -inf above the diagonal.
    const Tensor future = gt(arange(t).reshape({1, t}), arange(t).reshape({t, 1}));
    const Tensor mask = where(future, full({t, t}, -INFINITY), zeros({t, t}));
    Tensor scores = matmul(heads(0), heads(1).transpose(2, 3)) * (1.0 / std::sqrt(double(hd))) + mask;
    Tensor context = matmul(softmax(scores, -1), heads(2)).permute({0, 2, 1, 3}).reshape({b, t, d_});
    Tensor y = x + (*proj_)(context);
    return y + (*down_)(gelu((*up_)((*ln2_)(y))));
  }
  std::string type_name() const override { return "Block"; }

 private:
  int64_t d_, heads_;
  std::shared_ptr<nn::LayerNorm> ln1_, ln2_;
  std::shared_ptr<nn::Linear> qkv_, proj_, up_, down_;
};

// Characters (B, T) as int64 ids -> next-character logits (B, T, vocab).
class CharLm : public nn::Module {
 public:
  CharLm(int64_t vocab, int64_t context, int64_t d, int64_t heads) {
    tokens_ = register_module("tokens", std::make_shared<nn::Embedding>(vocab, d));
    positions_ = register_module("positions", std::make_shared<nn::Embedding>(context, d));
    block1_ = register_module("block1", std::make_shared<Block>(d, heads));
    block2_ = register_module("block2", std::make_shared<Block>(d, heads));
    ln_ = register_module("ln", std::make_shared<nn::LayerNorm>(Shape{d}));
    head_ = register_module("head", std::make_shared<nn::Linear>(d, vocab));
  }
  Tensor forward(const Tensor& ids) override {
    Tensor x = (*tokens_)(ids) + (*positions_)(arange(ids.size(1)));
    return (*head_)((*ln_)((*block2_)((*block1_)(x))));
  }
  std::string type_name() const override { return "CharLm"; }

 private:
  std::shared_ptr<nn::Embedding> tokens_, positions_;
  std::shared_ptr<Block> block1_, block2_;
  std::shared_ptr<nn::LayerNorm> ln_;
  std::shared_ptr<nn::Linear> head_;
};

std::string read_corpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SMELT_CHECK(in) << "demo-lm: cannot read the corpus '" << path
                  << "'; pass --corpus with a plain-text file (Debian's base-files ships "
                     "/usr/share/common-licenses/GPL-3)";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Next-character cross-entropy over every position.
Tensor lm_loss(nn::Module& model, const Tensor& ids, const Tensor& next) {
  const Tensor logits = model(ids);
  return cross_entropy(logits.reshape({-1, logits.size(2)}), next.reshape({-1}));
}

// `chars` characters sampled from the model after `prompt` (temperature 0.8).
std::string sample(nn::Module& model, const std::vector<int64_t>& prompt, const std::vector<char>& chars,
                   int64_t context, int64_t count) {
  NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> ids = prompt;
  std::string text;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t = std::min<int64_t>(context, int64_t(ids.size()));
    const Tensor window = from_vector(std::vector<int64_t>(ids.end() - t, ids.end()), {1, t});
    const Tensor logits = model(window).slice(1, t - 1, t).reshape({-1});
    const std::vector<double> p = softmax(logits / 0.8, 0).to_vector();
    const double u = rand({1}).item();
    double cumulative = 0;
    size_t pick = p.size() - 1;
    for (size_t k = 0; k < p.size(); ++k) {
      cumulative += p[k];
      if (u < cumulative) {
        pick = k;
        break;
      }
    }
    ids.push_back(int64_t(pick));
    text += chars[pick];
  }
  model.train();
  return text;
}

void run_demo_lm(const LmOptions& opt) {
  prepare_output_dir(opt.out, "demo-lm: --out");
  const std::string text = read_corpus(opt.corpus);
  SMELT_CHECK(int64_t(text.size()) > opt.context + 1)
      << "demo-lm: the corpus '" << opt.corpus << "' has " << text.size() << " characters; valid: more than "
      << opt.context + 1 << " (--context + 1)";
  std::map<char, int64_t> index;
  std::vector<char> chars;
  for (char c : text) {
    if (index.emplace(c, int64_t(chars.size())).second) chars.push_back(c);
  }
  std::vector<int64_t> ids;
  for (char c : text) ids.push_back(index.at(c));
  const int64_t vocab = int64_t(chars.size());
  manual_seed(opt.seed);
  auto model = std::make_shared<CharLm>(vocab, opt.context, opt.width, opt.heads);
  std::printf("corpus: %s, %zu characters, %lld distinct; model: %lld parameters\n", opt.corpus.c_str(), text.size(),
              static_cast<long long>(vocab), static_cast<long long>(model->num_parameters()));
  optim::AdamW adam(model->parameters(), optim::AdamOptions{.lr = opt.lr});
  CompiledFunction step = compile_training_step(*model, [&model](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{lm_loss(*model, in[0], in[1])};
  });

  // Random windows of the text: ids (B, T) and the characters that follow each (B, T).
  Generator windows(opt.seed + 1);
  const int64_t starts = int64_t(ids.size()) - opt.context - 1;
  ProgressBar bar(opt.steps);
  Series curve{"train loss (per step)", {}, {}};
  double last = 0;
  for (int64_t s = 0; s < opt.steps; ++s) {
    const std::vector<double> at = randint(0, starts, {opt.batch_size}, &windows).to_vector();
    std::vector<int64_t> x, y;
    for (double start : at) {
      const auto a = std::ptrdiff_t(start);
      x.insert(x.end(), ids.begin() + a, ids.begin() + a + opt.context);
      y.insert(y.end(), ids.begin() + a + 1, ids.begin() + a + opt.context + 1);
    }
    adam.zero_grad();
    last = step({from_vector(x, {opt.batch_size, opt.context}), from_vector(y, {opt.batch_size, opt.context})})[0].item();
    adam.step();
    curve.x.push_back(double(s));
    curve.y.push_back(last);
    bar.step(1, 1, opt.batch_size * opt.context, last);
  }
  bar.end_epoch(1, 1, "");
  const std::string checkpoint = opt.out + "/char_lm.safetensors";
  io::save_module(checkpoint, *model, {{"model", "char_lm"}, {"steps", std::to_string(opt.steps)}});
  const std::string svg = opt.out + "/loss_curve.svg";
  write_svg_line_chart(svg, {curve}, {.title = "smelt demo-lm: character transformer", .x_label = "step",
                                      .y_label = "cross-entropy loss (nats per character)", .log_y = false});
  // The prompt: the first sentence start of the text ("The " if it has one), 16 characters.
  size_t from = text.find("The ");
  if (from == std::string::npos || from + 16 > text.size()) from = 0;
  const std::string prompt_text = text.substr(from, 16);
  std::printf("checkpoint: %s\nloss curve: %s\nsampled after \"%s\":\n", checkpoint.c_str(), svg.c_str(),
              prompt_text.c_str());
  const std::vector<int64_t> prompt(ids.begin() + std::ptrdiff_t(from), ids.begin() + std::ptrdiff_t(from + 16));
  std::printf("%s%s\n", prompt_text.c_str(), sample(*model, prompt, chars, opt.context, opt.sample_chars).c_str());
  std::printf("final loss: %.3f (chance: %.3f)\n", last, std::log(double(vocab)));
}

}  // namespace

void register_demo_lm(CLI::App& app) {
  auto opt = std::make_shared<LmOptions>();
  CLI::App* cmd = app.add_subcommand("demo-lm", "Train a small character-level transformer on a text file");
  cmd->add_option("--corpus", opt->corpus, "plain-text file")->capture_default_str();
  cmd->add_option("--steps", opt->steps, "training steps")->check(integer_in<int64_t>(1, 1000000));
  cmd->add_option("--batch-size", opt->batch_size, "windows per step")->check(integer_in<int64_t>(1, 4096));
  cmd->add_option("--context", opt->context, "characters per window")->check(integer_in<int64_t>(2, 1024));
  cmd->add_option("--lr", opt->lr, "AdamW learning rate")->check(positive_at_most(10.0));
  cmd->add_option("--seed", opt->seed, "seed for the initialization, the windows and the samples")
      ->check(any_uint64());
  cmd->add_option("--out", opt->out, "directory for the checkpoint and the loss curve");
  cmd->callback([opt] { run_demo_lm(*opt); });
}

}  // namespace smelt::tools
