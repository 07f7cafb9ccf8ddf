// Module and optimizer state dicts to and from safetensors files.
#include "base/excerpt.h"
#include "smelt/io.h"
#include "smelt/nn.h"
#include "smelt/optim.h"

namespace smelt::io {

namespace {
constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimizerPrefix = "optimizer.";

// The entries of `all` whose name starts with `prefix`, with the prefix removed.
StateDict with_prefix_removed(const StateDict& all, const std::string& prefix) {
  StateDict out;
  for (const auto& [name, t] : all) {
    if (name.rfind(prefix, 0) == 0) out.emplace(name.substr(prefix.size()), t);
  }
  return out;
}
}  // namespace

void save_module(const std::string& path, const nn::Module& module, const Metadata& metadata) {
  save_safetensors(path, module.state_dict(), metadata);
}

void load_module(const std::string& path, nn::Module& module, bool strict) {
  StateDict state = load_safetensors(path);
  try {
    module.load_state_dict(state, strict);
  } catch (const Error& e) {
    SMELT_CHECK(false) << "load_module: " << path << ": " << e.what();
  }
}

void save_optimizer(const std::string& path, const optim::Optimizer& optimizer,
                    const Metadata& metadata) {
  save_safetensors(path, optimizer.state_dict(), metadata);
}

void load_optimizer(const std::string& path, optim::Optimizer& optimizer) {
  StateDict state = load_safetensors(path);
  try {
    optimizer.load_state_dict(state);
  } catch (const Error& e) {
    SMELT_CHECK(false) << "load_optimizer: " << path << ": " << e.what();
  }
}

void save_checkpoint(const std::string& path, const nn::Module& module,
                     const optim::Optimizer& optimizer, const Metadata& metadata) {
  StateDict all;
  for (const auto& [name, t] : module.state_dict()) all.emplace(kModelPrefix + name, t);
  for (const auto& [name, t] : optimizer.state_dict()) all.emplace(kOptimizerPrefix + name, t);
  save_safetensors(path, all, metadata);
}

void load_checkpoint(const std::string& path, nn::Module& module, optim::Optimizer& optimizer,
                     Metadata* metadata) {
  StateDict all = load_safetensors(path, metadata);
  for (const auto& [name, _] : all) {
    SMELT_CHECK(name.rfind(kModelPrefix, 0) == 0 || name.rfind(kOptimizerPrefix, 0) == 0)
        << "load_checkpoint: " << path << ": unexpected tensor '" << excerpt(name)
        << "'; a checkpoint holds only 'model.*' and 'optimizer.*' entries";
  }
  try {
    // All or nothing: if the optimizer rejects its part, the module gets its old values back.
    StateDict previous;
    for (const auto& [name, t] : module.state_dict()) previous.emplace(name, t.clone());
    module.load_state_dict(with_prefix_removed(all, kModelPrefix), true);
    try {
      optimizer.load_state_dict(with_prefix_removed(all, kOptimizerPrefix));
    } catch (const Error&) {
      module.load_state_dict(previous, true);
      throw;
    }
  } catch (const Error& e) {
    SMELT_CHECK(false) << "load_checkpoint: " << path << ": " << e.what();
  }
}

}  // namespace smelt::io
