// The eager autograd fuzzer: random float64 programs with views, in-place ops (on non-leaf
// tensors and through views), broadcasting, values used twice and several outputs.
//
// Each program (one seed) runs
//   (a) as written: in-place methods on tensors and views that share memory;
//   (b) functionally: every tensor is a value; an in-place op becomes its functional form, and a
//       write through a view rebuilds the viewed root with where(region, gathered result, old)
//       (the view's positions found by replaying its view ops on an index tensor), so (b) shares
//       no code with how (a) records in-place ops.
// Checked: forward values of (a) and (b); gradients of a random weighting of the outputs, (a)
// against (b) and (a) against central finite differences of (a)'s program; sometimes second
// order gradients (create_graph), (a) against (b). The generator looks at the values as it goes,
// so programs stay smooth and finite (no exp of large values, no relu/clamp input near its
// kink, no division by values near zero): finite differences then apply everywhere.
//
// Tolerances: forward values of (a) and (b) come from the same arithmetic and must be equal
// exactly (the sign of zero included). Gradients may differ in the last bits: (b) replays a
// view's ops at every read, so its graph adds the same gradient contributions in another order;
// they are compared with |a - b| <= 1e-9 (1 + |b|) (float64; reassociating a few terms moves
// ~1e-16 relative), and each case reports whether everything matched bitwise. Finite
// differences use gradcheck's eps 1e-6, rtol 1e-4, atol 1e-5.
#pragma once

#include <cstdint>
#include <string>

namespace smelt::fuzz {

struct AutogradFuzzOptions {
  int max_steps = 16;  // ops in a program at most
  int max_inputs = 3;  // leaf inputs that require grad
  int max_rank = 3;
  int max_dim = 4;
};

struct AutogradCaseResult {
  bool passed = true;
  std::string message;  // what differed, for a failure
  std::string program;  // the program, one op a line
  bool bitwise = true;  // (a) and (b) gave bitwise-equal values and gradients
  int in_place_ops = 0;
};

// Generates the program of `seed` and checks it.
AutogradCaseResult check_autograd_program(uint64_t seed, const AutogradFuzzOptions& options = {});

}  // namespace smelt::fuzz
