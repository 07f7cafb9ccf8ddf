// The parts of a LoopKernel that reach across rows (codegen/loop_kernel.h): row-indexed gathers
// (Access::index), row folds (LoopKernel::folds) and the index checks the caller runs first.
// Private to codegen: validate() and print_kernel() call these for those fields.
#pragma once

#include <ostream>
#include <vector>

#include "codegen/loop_kernel.h"

namespace smelt::codegen::detail {

// Checks the gathers, folds and index checks of `k` (the rest of validate() checked the fields
// they refer to: accesses, expressions); marks the arguments the folds write in `stored`.
void validate_gathers_and_folds(const LoopKernel& k, std::vector<bool>& stored);

// An access's gather, as " gather=index:stride:extent" (nothing for a plain access).
void print_gather(std::ostream& out, const Access& a);
// The folds and index checks, one line each.
void print_folds_and_checks(std::ostream& out, const LoopKernel& k);

}  // namespace smelt::codegen::detail
