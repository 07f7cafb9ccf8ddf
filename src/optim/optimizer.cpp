// Optimizer base: parameter groups, zero_grad, state dicts.
#include <charconv>
#include <set>

#include "smelt/creation.h"
#include "smelt/optim.h"

namespace smelt::optim {

Optimizer::Optimizer(std::vector<ParamGroupOptions> groups, double default_lr,
                     double default_weight_decay) {
  SMELT_CHECK(!groups.empty()) << "optimizer: got no parameter groups";
  std::set<const TensorImpl*> seen;
  for (size_t g = 0; g < groups.size(); ++g) {
    ParamGroupOptions& spec = groups[g];
    ParamGroup group;
    group.lr = spec.lr.value_or(default_lr);
    group.weight_decay = spec.weight_decay.value_or(default_weight_decay);
    SMELT_CHECK(group.lr >= 0) << "optimizer: group " << g << " has a negative lr " << group.lr;
    SMELT_CHECK(group.weight_decay >= 0)
        << "optimizer: group " << g << " has a negative weight_decay " << group.weight_decay;
    for (size_t i = 0; i < spec.params.size(); ++i) {
      const Tensor& p = spec.params[i];
      SMELT_CHECK(p.defined() && dtype_is_floating(p.dtype()) && p.is_leaf() && p.requires_grad())
          << "optimizer: group " << g << " parameter " << i
          << " must be a float32/float64 leaf tensor that requires grad";
      SMELT_CHECK(p.is_contiguous())
          << "optimizer: group " << g << " parameter " << i << " " << shape_str(p.shape())
          << " is not contiguous; optimize the contiguous tensor it views";
      SMELT_CHECK(seen.insert(p.impl()).second)
          << "optimizer: group " << g << " parameter " << i
          << " appears more than once; each parameter may be in one group once";
      group.params.push_back(p);
    }
    groups_.push_back(std::move(group));
  }
  size_t total = 0;
  for (const ParamGroup& g : groups_) total += g.params.size();
  state_.resize(total);
}

const ParamGroup& Optimizer::group_of(size_t index) const {
  SMELT_CHECK(index < state_.size())
      << type_name() << ": parameter " << index << " out of range; it has " << state_.size();
  for (const ParamGroup& g : groups_) {
    if (index < g.params.size()) return g;
    index -= g.params.size();
  }
  SMELT_INTERNAL_CHECK(false) << "optimizer: parameter counts out of sync";
  return groups_.front();
}

const Tensor& Optimizer::param(size_t index) const {
  const ParamGroup& g = group_of(index);
  for (const ParamGroup& other : groups_) {
    if (&other == &g) break;
    index -= other.params.size();
  }
  return g.params[index];
}

Optimizer::ParamState& Optimizer::param_state(size_t index) {
  SMELT_CHECK(index < state_.size())
      << type_name() << ": parameter " << index << " out of range; it has " << state_.size();
  return state_[index];
}

const Optimizer::ParamState& Optimizer::param_state(size_t index) const {
  return const_cast<Optimizer*>(this)->param_state(index);
}

void Optimizer::ensure_state(size_t index) {
  ParamState& s = param_state(index);
  if (s.buffers.size() == buffer_names().size()) return;
  const Tensor& p = param(index);
  s.buffers.clear();
  for (size_t b = 0; b < buffer_names().size(); ++b) s.buffers.push_back(zeros(p.shape(), p.dtype()));
}

void Optimizer::zero_grad() {
  for (ParamGroup& g : groups_) {
    for (Tensor& p : g.params) p.zero_grad();
  }
}

void Optimizer::set_lr(double lr) {
  SMELT_CHECK(lr >= 0) << type_name() << ": lr must be >= 0, got " << lr;
  for (ParamGroup& g : groups_) g.lr = lr;
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    out[prefix + "lr"] = scalar_tensor(groups_[g].lr, DType::Float64);
    out[prefix + "weight_decay"] = scalar_tensor(groups_[g].weight_decay, DType::Float64);
    if (groups_[g].initial_lr)
      out[prefix + "initial_lr"] = scalar_tensor(*groups_[g].initial_lr, DType::Float64);
    out[prefix + "num_params"] = scalar_tensor(double(groups_[g].params.size()), DType::Int64);
  }
  const std::vector<std::string> names = buffer_names();
  for (size_t i = 0; i < state_.size(); ++i) {
    if (state_[i].step == 0) continue;
    const std::string prefix = "state." + std::to_string(i) + ".";
    out[prefix + "step"] = scalar_tensor(double(state_[i].step), DType::Int64);
    for (size_t b = 0; b < names.size(); ++b) {
      if (state_[i].buffers[b].defined()) out[prefix + names[b]] = state_[i].buffers[b].clone();
    }
  }
  return out;
}

namespace {

// "12" -> 12; false for anything else.
bool parse_index(const std::string& s, size_t* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

double scalar_value(const StateDict& state, const std::string& key, const std::string& who) {
  const Tensor& t = state.at(key);
  SMELT_CHECK(t.defined() && t.numel() == 1)
      << who << ".load_state_dict: '" << key << "' must hold one number, got "
      << (t.defined() ? shape_str(t.shape()) : std::string("an undefined tensor"));
  return t.item();
}

}  // namespace

void Optimizer::load_state_dict(const StateDict& state) {
  const std::string who = type_name();
  const std::vector<std::string> names = buffer_names();
  std::vector<ParamGroup> groups = groups_;
  std::vector<ParamState> new_state(state_.size());
  std::vector<size_t> first_param(groups_.size() + 1, 0);
  for (size_t g = 0; g < groups_.size(); ++g)
    first_param[g + 1] = first_param[g] + groups_[g].params.size();

  // Every key is parsed and used exactly once; anything else is reported.
  std::set<std::string> used;
  auto require = [&](const std::string& key) {
    SMELT_CHECK(state.count(key)) << who << ".load_state_dict: missing key '" << key << "'";
    used.insert(key);
    return scalar_value(state, key, who);
  };
  size_t saved_groups = 0;
  while (state.count("param_groups." + std::to_string(saved_groups) + ".lr")) ++saved_groups;
  SMELT_CHECK(saved_groups == groups_.size())
      << who << ".load_state_dict: the state dict has " << saved_groups
      << " parameter groups, the optimizer has " << groups_.size();
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    double count = require(prefix + "num_params");
    SMELT_CHECK(count == double(groups_[g].params.size()))
        << who << ".load_state_dict: group " << g << " has " << count
        << " parameters in the state dict, " << groups_[g].params.size() << " in the optimizer";
    groups[g].lr = require(prefix + "lr");
    groups[g].weight_decay = require(prefix + "weight_decay");
    groups[g].initial_lr.reset();
    if (state.count(prefix + "initial_lr")) groups[g].initial_lr = require(prefix + "initial_lr");
  }

  auto param_at = [&](size_t index) -> const Tensor& {
    size_t g = 0;
    while (first_param[g + 1] <= index) ++g;
    return groups_[g].params[index - first_param[g]];
  };
  for (const auto& [key, tensor] : state) {
    if (key.rfind("state.", 0) != 0) continue;
    size_t dot = key.find('.', 6);
    size_t index = 0;
    SMELT_CHECK(dot != std::string::npos && parse_index(key.substr(6, dot - 6), &index))
        << who << ".load_state_dict: malformed state key '" << key
        << "'; expected state.<parameter index>.<name>";
    SMELT_CHECK(index < state_.size())
        << who << ".load_state_dict: '" << key << "' refers to parameter " << index
        << ", the optimizer has " << state_.size();
    ParamState& ps = new_state[index];
    ps.buffers.resize(names.size());
    const std::string field = key.substr(dot + 1);
    used.insert(key);
    if (field == "step") {
      double step = scalar_value(state, key, who);
      SMELT_CHECK(step >= 1 && step == double(int64_t(step)))
          << who << ".load_state_dict: '" << key << "' must be a positive integer, got " << step;
      ps.step = int64_t(step);
      continue;
    }
    size_t b = 0;
    while (b < names.size() && names[b] != field) ++b;
    SMELT_CHECK(b < names.size()) << who << ".load_state_dict: unexpected key '" << key << "'";
    const Tensor& param = param_at(index);
    SMELT_CHECK(tensor.defined() && tensor.shape() == param.shape())
        << who << ".load_state_dict: '" << key << "' has shape "
        << (tensor.defined() ? shape_str(tensor.shape()) : std::string("(undefined)"))
        << ", its parameter has " << shape_str(param.shape());
    // A private contiguous copy in the parameter's dtype: the kernels update it in place.
    Tensor copy = empty(param.shape(), param.dtype());
    copy.copy_(tensor);
    ps.buffers[b] = copy;
  }
  // A parameter either has no state yet, or a step count and every buffer.
  for (size_t i = 0; i < new_state.size(); ++i) {
    const ParamState& ps = new_state[i];
    for (size_t b = 0; b < ps.buffers.size(); ++b) {
      SMELT_CHECK(ps.step == 0 || ps.buffers[b].defined())
          << who << ".load_state_dict: parameter " << i << " has a step count but no 'state." << i
          << "." << names[b] << "'";
      SMELT_CHECK(ps.step > 0 || !ps.buffers[b].defined())
          << who << ".load_state_dict: parameter " << i << " has '" << names[b]
          << "' but no 'state." << i << ".step'";
    }
  }
  for (const auto& [key, _] : state) {
    SMELT_CHECK(used.count(key)) << who << ".load_state_dict: unexpected key '" << key << "'";
  }
  groups_ = std::move(groups);
  state_ = std::move(new_state);
}

}  // namespace smelt::optim
