// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors):
//
//   8 bytes    N, the header length (unsigned little-endian)
//   N bytes    a JSON object: name -> {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]},
//              plus an optional "__metadata__": {string: string}; padded with spaces
//   the rest   raw little-endian tensor bytes; [b, e) is relative to the start of this section,
//              and the tensors tile it exactly (no overlaps, no gaps, no trailing bytes)
//
// dtypes: F32, F64, I64, BOOL, U8. Saving is atomic: the file is written next to its
// destination under a temporary name, flushed to disk and renamed over it, so a failure at any
// point leaves the previous file untouched. Loading checks every field against the file and
// reports the first problem as a smelt::Error naming the file.
#pragma once

#include <map>
#include <string>

#include "smelt/state_dict.h"

namespace smelt::nn {
class Module;
}
namespace smelt::optim {
class Optimizer;
}

namespace smelt::io {

using Metadata = std::map<std::string, std::string>;

void save_safetensors(const std::string& path, const StateDict& tensors,
                      const Metadata& metadata = {});
// Returns every tensor in the file (contiguous, owning its memory); fills `metadata` if given.
StateDict load_safetensors(const std::string& path, Metadata* metadata = nullptr);

// A module's state_dict() (parameters and buffers).
void save_module(const std::string& path, const nn::Module& module, const Metadata& metadata = {});
// load_state_dict with the file's tensors; strict: every key must match.
void load_module(const std::string& path, nn::Module& module, bool strict = true);

// An optimizer's state_dict() (learning rates, step counts, moment buffers).
void save_optimizer(const std::string& path, const optim::Optimizer& optimizer,
                    const Metadata& metadata = {});
void load_optimizer(const std::string& path, optim::Optimizer& optimizer);

// Module and optimizer in one file, under "model." and "optimizer." prefixes.
void save_checkpoint(const std::string& path, const nn::Module& module,
                     const optim::Optimizer& optimizer, const Metadata& metadata = {});
void load_checkpoint(const std::string& path, nn::Module& module, optim::Optimizer& optimizer,
                     Metadata* metadata = nullptr);

}  // namespace smelt::io
