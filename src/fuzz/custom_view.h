// A view op registered as users register theirs (smelt/custom_op.h OpDefinition::view): the
// diagonal of the last two dims, (..., n, m) -> (..., min(n, m)), its gradient written with
// smelt ops. The autograd fuzzer takes it through the dispatcher's custom views, record_views and
// CopySlices (in-place writes through it); the compile fuzzer's random graphs put it where they
// put built-in views, so fusion lowers it through its layout rule.
#pragma once

#include "ops/op_table.h"
#include "smelt/custom_op.h"

namespace smelt::fuzz {

// Registered on first use, once per process, as "fuzz_diagonal".
const CustomOp& diagonal_view_op();
ops::OpId diagonal_view_id();

}  // namespace smelt::fuzz
