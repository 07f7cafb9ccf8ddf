#include "golden_op_table.h"

#include "ops/op_table.h"

namespace smelt::golden {
namespace {


using Call = const GoldenCall&;
using Outs = std::vector<Tensor>;

GeluApprox gelu_approx(const std::string& name) {
  SMELT_CHECK(name == "none" || name == "tanh") << "golden: unknown gelu approximation " << name;
  return name == "tanh" ? GeluApprox::Tanh : GeluApprox::None;
}

void add_elementwise(std::map<std::string, GoldenFn>& t) {
  using UnaryFn = Tensor (*)(const Tensor&);
  for (auto [name, fn] : std::initializer_list<std::pair<const char*, UnaryFn>>{
           {"neg", neg}, {"exp", exp}, {"log", log}, {"sqrt", sqrt}, {"rsqrt", rsqrt},
           {"abs", abs}, {"sign", sign}, {"erf", erf}, {"relu", relu}, {"sigmoid", sigmoid},
           {"tanh", tanh}, {"silu", silu}, {"floor", floor}, {"ceil", ceil}, {"round", round},
           {"sin", sin}, {"cos", cos}, {"tan", tan}, {"asin", asin}, {"acos", acos}, {"atan", atan},
           {"sinh", sinh}, {"cosh", cosh}, {"asinh", asinh}, {"acosh", acosh}, {"atanh", atanh}}) {
    t[name] = [fn](Call c) -> Outs { return {fn(c.in("x"))}; };
  }
  t["leaky_relu"] = [](Call c) -> Outs {
    return {c.has("negative_slope") ? leaky_relu(c.in("x"), c.f64("negative_slope"))
                                    : leaky_relu(c.in("x"))};
  };
  t["gelu"] = [](Call c) -> Outs { return {gelu(c.in("x"), gelu_approx(c.str("approximate")))}; };
  t["softplus"] = [](Call c) -> Outs {
    return {c.has("beta") ? softplus(c.in("x"), c.f64("beta"), c.f64("threshold"))
                          : softplus(c.in("x"))};
  };
  t["clamp"] = [](Call c) -> Outs { return {clamp(c.in("x"), c.maybe_f64("min"), c.maybe_f64("max"))}; };
  t["cast"] = [](Call c) -> Outs { return {cast(c.in("x"), dtype_from_name(c.str("dtype")))}; };

  using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
  for (auto [name, fn] : std::initializer_list<std::pair<const char*, BinaryFn>>{
           {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}, {"pow", pow},
           {"maximum", maximum}, {"minimum", minimum}, {"eq", eq}, {"ne", ne}, {"lt", lt},
           {"le", le}, {"gt", gt}, {"ge", ge}}) {
    t[name] = [fn](Call c) -> Outs { return {fn(c.in("a"), c.in("b"))}; };
  }
  t["pow_scalar"] = [](Call c) -> Outs { return {pow(c.in("a"), c.f64("exponent"))}; };
  t["where"] = [](Call c) -> Outs { return {where(c.in("cond"), c.in("a"), c.in("b"))}; };
}

void add_reductions(std::map<std::string, GoldenFn>& t) {
  using ReduceFn = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool);
  for (auto [name, fn] : std::initializer_list<std::pair<const char*, ReduceFn>>{
           {"sum", sum}, {"mean", mean}, {"amax", amax}, {"amin", amin},
           {"prod", prod}}) {
    t[name] = [fn](Call c) -> Outs { return {fn(c.in("x"), c.ints("dims"), c.flag("keepdim"))}; };
  }
  t["var"] = [](Call c) -> Outs {
    return {var(c.in("x"), c.ints("dims"), c.i64("correction"), c.flag("keepdim"))};
  };
  t["argmax"] = [](Call c) -> Outs { return {argmax(c.in("x"), c.i64("dim"), c.flag("keepdim"))}; };
  t["softmax"] = [](Call c) -> Outs { return Outs{softmax(c.in("x"), c.i64("dim"))}; };
  t["log_softmax"] = [](Call c) -> Outs {
    return Outs{log_softmax(c.in("x"), c.i64("dim"))};
  };
}

void add_contractions_and_pools(std::map<std::string, GoldenFn>& t) {
  t["matmul"] = [](Call c) -> Outs { return Outs{matmul(c.in("a"), c.in("b"))}; };
  t["linear"] = [](Call c) -> Outs {
    return Outs{linear(c.in("x"), c.in("weight"), c.optional("bias"))};
  };
  t["conv2d"] = [](Call c) -> Outs {
    return Outs{conv2d(c.in("x"), c.in("weight"), c.optional("bias"), c.ints("stride"),
                                   c.ints("padding"), c.ints("dilation"), c.i64("groups"))};
  };
  t["max_pool2d"] = [](Call c) -> Outs {
    return Outs{max_pool2d(c.in("x"), c.ints("kernel"), c.ints("stride"),
                                           c.ints("padding"), c.ints("dilation"))};
  };
  t["avg_pool2d"] = [](Call c) -> Outs {
    return Outs{avg_pool2d(c.in("x"), c.ints("kernel"), c.ints("stride"), c.ints("padding"),
                           c.flag("count_include_pad"),
                           c.has("dilation") ? c.ints("dilation") : std::vector<int64_t>{1, 1})};
  };
  t["adaptive_avg_pool2d"] = [](Call c) -> Outs {
    return Outs{adaptive_avg_pool2d(c.in("x"), c.ints("output_size"))};
  };
}

void add_norms_and_losses(std::map<std::string, GoldenFn>& t) {
  t["layer_norm"] = [](Call c) -> Outs {
    return Outs{layer_norm(c.in("x"), c.ints("normalized_shape"),
                                           c.optional("weight"), c.optional("bias"), c.f64("eps"))};
  };
  // Outputs y and the running statistics after the call (updated in place when training).
  t["batch_norm"] = [](Call c) -> Outs {
    return Outs{batch_norm(c.in("x"), c.in("running_mean"), c.in("running_var"), c.in("weight"),
                             c.in("bias"), c.flag("training"), c.f64("momentum"), c.f64("eps")),
                  c.in("running_mean"), c.in("running_var")};
  };
  t["dropout"] = [](Call c) -> Outs {
    return Outs{dropout(c.in("x"), c.f64("p"), c.flag("training"))};
  };
  // The composite losses live with nll_loss in the loss family.
  t["cross_entropy"] = [](Call c) -> Outs {
    return Outs{cross_entropy(c.in("input"), c.in("target"), c.i64("ignore_index"),
                                c.f64("label_smoothing"), c.reduction())};
  };
  t["nll_loss"] = [](Call c) -> Outs {
    return Outs{nll_loss(c.in("input"), c.in("target"), c.i64("ignore_index"), c.reduction())};
  };
  t["mse_loss"] = [](Call c) -> Outs {
    return Outs{mse_loss(c.in("input"), c.in("target"), c.reduction())};
  };
  t["binary_cross_entropy_with_logits"] = [](Call c) -> Outs {
    return Outs{binary_cross_entropy_with_logits(c.in("input"), c.in("target"),
                                                               c.reduction())};
  };
}

void add_indexing_and_joining(std::map<std::string, GoldenFn>& t) {
  t["embedding"] = [](Call c) -> Outs {
    return Outs{embedding(c.in("indices"), c.in("weight"))};
  };
  t["index_select"] = [](Call c) -> Outs {
    return Outs{index_select(c.in("x"), c.i64("dim"), c.in("index"))};
  };
  t["index_add"] = [](Call c) -> Outs {
    return Outs{index_add(c.in("x"), c.i64("dim"), c.in("index"), c.in("src"))};
  };
  t["gather"] = [](Call c) -> Outs {
    return Outs{gather(c.in("x"), c.i64("dim"), c.in("index"))};
  };
  t["scatter_add"] = [](Call c) -> Outs {
    return Outs{scatter_add(c.in("x"), c.i64("dim"), c.in("index"), c.in("src"))};
  };
  t["cumsum"] = [](Call c) -> Outs {
    return Outs{cumsum(c.in("x"), c.i64("dim"), c.flag("exclusive"), c.flag("reverse"))};
  };
  t["topk"] = [](Call c) -> Outs {
    TopKResult r = topk(c.in("x"), c.i64("k"), c.i64("dim"), c.flag("largest"));
    return Outs{r.values, r.indices};
  };
  t["one_hot"] = [](Call c) -> Outs {
    return Outs{one_hot(c.in("indices"), c.i64("num_classes"))};
  };
  // stack and split live with cat in the join family.
  t["cat"] = [](Call c) -> Outs { return Outs{cat(c.all(), c.i64("dim"))}; };
  t["stack"] = [](Call c) -> Outs { return Outs{stack(c.all(), c.i64("dim"))}; };
  t["split"] = [](Call c) -> Outs {
    return Outs(c.has("sizes") ? split(c.in("x"), c.ints("sizes"), c.i64("dim"))
                                        : split(c.in("x"), c.i64("split_size"), c.i64("dim")));
  };
}

void add_views(std::map<std::string, GoldenFn>& t) {
  t["reshape"] = [](Call c) -> Outs { return {reshape(c.in("x"), c.ints("shape"))}; };
  t["view"] = [](Call c) -> Outs { return {c.in("x").view(c.ints("shape"))}; };
  t["permute"] = [](Call c) -> Outs { return {permute(c.in("x"), c.ints("dims"))}; };
  t["transpose"] = [](Call c) -> Outs { return {c.in("x").transpose(c.i64("dim0"), c.i64("dim1"))}; };
  t["t"] = [](Call c) -> Outs { return {c.in("x").t()}; };
  t["slice"] = [](Call c) -> Outs {
    return {slice(c.in("x"), c.i64("dim"), c.i64("start"), c.i64("end"), c.i64("step"))};
  };
  t["narrow"] = [](Call c) -> Outs {
    return {c.in("x").narrow(c.i64("dim"), c.i64("start"), c.i64("length"))};
  };
  t["select"] = [](Call c) -> Outs { return {c.in("x").select(c.i64("dim"), c.i64("index"))}; };
  t["expand"] = [](Call c) -> Outs { return {expand(c.in("x"), c.ints("shape"))}; };
  t["squeeze"] = [](Call c) -> Outs {
    return {c.has("dim") ? c.in("x").squeeze(c.i64("dim")) : c.in("x").squeeze()};
  };
  t["unsqueeze"] = [](Call c) -> Outs { return {c.in("x").unsqueeze(c.i64("dim"))}; };
  t["flatten"] = [](Call c) -> Outs {
    return {c.in("x").flatten(c.i64("start_dim"), c.i64("end_dim"))};
  };
  t["contiguous"] = [](Call c) -> Outs { return {contiguous(c.in("x"))}; };
}

}  // namespace

GoldenCall::GoldenCall(const nlohmann::json& attrs, std::vector<std::string> names,
                       std::vector<Tensor> inputs)
    : attrs_(attrs), names_(std::move(names)), inputs_(std::move(inputs)) {}

Tensor GoldenCall::optional(const std::string& name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return inputs_[i];
  }
  return Tensor();
}

const Tensor& GoldenCall::in(const std::string& name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return inputs_[i];
  }
  SMELT_CHECK(false) << "golden case has no input named '" << name << "'";
  return inputs_.front();
}

const nlohmann::json& GoldenCall::attr(const char* key) const {
  SMELT_CHECK(attrs_.contains(key)) << "golden case has no attribute '" << key << "'";
  return attrs_.at(key);
}

std::optional<double> GoldenCall::maybe_f64(const char* key) const {
  if (!has(key)) return std::nullopt;
  return f64(key);
}

Reduction GoldenCall::reduction() const {
  std::string r = str("reduction");
  SMELT_CHECK(r == "mean" || r == "sum" || r == "none") << "golden: unknown reduction " << r;
  return r == "mean" ? Reduction::Mean : (r == "sum" ? Reduction::Sum : Reduction::None);
}

const std::map<std::string, GoldenFn>& golden_op_table() {
  static const std::map<std::string, GoldenFn> table = [] {
    std::map<std::string, GoldenFn> t;
    add_elementwise(t);
    add_reductions(t);
    add_contractions_and_pools(t);
    add_norms_and_losses(t);
    add_indexing_and_joining(t);
    add_views(t);
    return t;
  }();
  return table;
}

std::vector<std::string> op_table_names() {
  std::vector<std::string> names;
  for (int i = 0; i < ops::kOpCount; ++i) names.push_back(ops::op_name(static_cast<ops::OpId>(i)));
  return names;
}

}  // namespace smelt::golden
