// Module: the registry of parameters, buffers and children, and everything that walks it.
#include <set>
#include <sstream>
#include <unordered_set>

#include "nn/mode_reads.h"
#include "smelt/autograd.h"
#include "smelt/nn.h"

namespace smelt::nn {

void Module::check_new_name(const std::string& name) const {
  SMELT_CHECK(!name.empty() && name.find('.') == std::string::npos)
      << type_name() << ": invalid member name '" << name
      << "'; names must be non-empty and contain no '.'";
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list) {
      if (n == name) return true;
    }
    return false;
  };
  SMELT_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_))
      << type_name() << ": a parameter, buffer or child named '" << name << "' already exists";
}

void Module::register_parameter(const std::string& name, Tensor& slot) {
  check_new_name(name);
  SMELT_CHECK(slot.defined()) << type_name() << ": parameter '" << name << "' is undefined";
  SMELT_CHECK(dtype_is_floating(slot.dtype()))
      << type_name() << ": parameter '" << name << "' must be float32 or float64, got "
      << dtype_name(slot.dtype());
  if (!slot.is_leaf()) slot = slot.detach();
  slot.set_requires_grad(true);
  parameters_.emplace_back(name, &slot);
}

void Module::register_buffer(const std::string& name, Tensor& slot) {
  check_new_name(name);
  SMELT_CHECK(slot.defined()) << type_name() << ": buffer '" << name << "' is undefined";
  buffers_.emplace_back(name, &slot);
}

void Module::add_child(const std::string& name, ModulePtr module) {
  check_new_name(name);
  SMELT_CHECK(module != nullptr) << type_name() << ": child module '" << name << "' is null";
  children_.emplace_back(name, std::move(module));
}

void Module::collect(Slots& out, const std::string& prefix, bool parameters, bool recurse) const {
  for (const auto& [name, slot] : parameters ? parameters_ : buffers_) {
    if (slot->defined()) out.emplace_back(prefix + name, slot);
  }
  if (!recurse) return;
  for (const auto& [name, child] : children_)
    child->collect(out, prefix + name + ".", parameters, true);
}

namespace {
// Keeps the first occurrence of each tensor (tied weights appear once).
NamedTensors unique_by_tensor(const std::vector<std::pair<std::string, Tensor*>>& all) {
  std::unordered_set<const TensorImpl*> seen;
  NamedTensors out;
  for (const auto& [name, slot] : all) {
    if (seen.insert(slot->impl()).second) out.emplace_back(name, *slot);
  }
  return out;
}

std::vector<Tensor> values(const NamedTensors& named) {
  std::vector<Tensor> out;
  out.reserve(named.size());
  for (const auto& [_, t] : named) out.push_back(t);
  return out;
}
}  // namespace

NamedTensors Module::named_parameters(bool recurse) const {
  Slots all;
  collect(all, "", true, recurse);
  return unique_by_tensor(all);
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  return values(named_parameters(recurse));
}

NamedTensors Module::named_buffers(bool recurse) const {
  Slots all;
  collect(all, "", false, recurse);
  return unique_by_tensor(all);
}

std::vector<Tensor> Module::buffers(bool recurse) const { return values(named_buffers(recurse)); }

std::vector<std::pair<std::string, Tensor*>> Module::named_slots(bool parameters) {
  Slots all;
  collect(all, "", parameters, true);
  return all;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

namespace {
thread_local ModeReads* t_mode_reads = nullptr;
}  // namespace

ModeReads::ModeReads() : previous_(t_mode_reads) { t_mode_reads = this; }
ModeReads::~ModeReads() { t_mode_reads = previous_; }

bool Module::is_training() const {
  if (t_mode_reads) t_mode_reads->reads.push_back(training_);
  return *training_;
}

void Module::train(bool on) {
  *training_ = on;
  for (auto& [_, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.zero_grad();
}

StateDict Module::state_dict() const {
  Slots all;
  collect(all, "", true, true);
  collect(all, "", false, true);
  StateDict out;
  for (const auto& [name, slot] : all) out.emplace(name, slot->detach());
  return out;
}

Module::LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  Slots own;
  collect(own, "", true, true);
  collect(own, "", false, true);

  LoadResult result;
  std::set<std::string> own_names;
  std::ostringstream shape_errors;
  for (const auto& [name, slot] : own) {
    const Tensor& t = *slot;
    own_names.insert(name);
    auto it = state.find(name);
    if (it == state.end()) {
      result.missing_keys.push_back(name);
      continue;
    }
    const Tensor& src = it->second;
    if (!src.defined()) {
      shape_errors << "\n  '" << name << "': the state dict holds an undefined tensor";
    } else if (src.shape() != t.shape()) {
      shape_errors << "\n  '" << name << "': checkpoint has shape " << shape_str(src.shape())
                   << ", the module has " << shape_str(t.shape());
    }
  }
  for (const auto& [name, _] : state) {
    if (!own_names.count(name)) result.unexpected_keys.push_back(name);
  }

  auto join = [](const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
    return s;
  };
  bool key_error = strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty());
  std::string shapes = shape_errors.str();
  SMELT_CHECK(!key_error && shapes.empty())
      << "load_state_dict(" << type_name() << "): the state dict does not fit the module"
      << (key_error && !result.missing_keys.empty()
              ? "\n  missing keys: " + join(result.missing_keys)
              : "")
      << (key_error && !result.unexpected_keys.empty()
              ? "\n  unexpected keys: " + join(result.unexpected_keys)
              : "")
      << (shapes.empty() ? "" : "\n  shape mismatches:" + shapes);

  NoGradGuard no_grad;
  for (auto& [name, slot] : own) {
    auto it = state.find(name);
    if (it != state.end() && !it->second.same(*slot)) slot->copy_(it->second);
  }
  return result;
}

void Module::print(std::string& out, int indent) const {
  out += type_name() + "(" + extra_repr();
  if (children_.empty()) {
    out += ")";
    return;
  }
  out += "\n";
  std::string pad(size_t(indent + 2), ' ');
  for (const auto& [name, child] : children_) {
    out += pad + "(" + name + "): ";
    child->print(out, indent + 2);
    out += "\n";
  }
  out += std::string(size_t(indent), ' ') + ")";
}

std::string Module::to_string() const {
  std::string out;
  print(out, 0);
  return out;
}

}  // namespace smelt::nn
