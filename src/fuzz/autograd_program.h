// The programs of the eager autograd fuzzer (autograd_fuzzer.h) and their two executors.
//
// A program is a list of steps over numbered slots: the inputs first, then one new slot per
// functional or view step; an in-place step writes an existing slot (and so every slot that
// shares its memory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "smelt/tensor.h"

namespace smelt::fuzz {

enum class StepKind : uint8_t {
  // a new slot from slot a (and b)
  Neg, Exp, Tanh, Square, Scale, Shift, SumDim,
  Add, Sub, Mul, SafeDiv,
  // a new slot viewing slot a (Diagonal: a registered view op, smelt/custom_op.h)
  Slice, Permute, Expand, Reshape, Select, Diagonal,
  // slot a written in place (operand slot b where the method takes one)
  AddT, SubT, MulT, DivT, AddC, MulC, DivC, NegI, ExpI, ReluI, ClampI, CopyI, FillI, ZeroI,
};

bool step_is_view(StepKind k);
bool step_is_in_place(StepKind k);
bool step_takes_operand(StepKind k);  // functional binary ops and in-place ops with a tensor

struct Step {
  StepKind kind = StepKind::Neg;
  int a = -1, b = -1;
  std::vector<int64_t> ints;  // view arguments; SumDim: dim, keepdim
  double c = 0, c2 = 0;       // constant or alpha; clamp: min, max
  bool copies = false;        // Reshape: made a copy in the in-place run (not a view)
};

// One line: "%4 = slice(%2, dim 1, 0:3:2)", "%2.add_(%3, alpha 0.5)".
std::string step_text(const Step& s, int new_slot);

// (a): the program as written, on tensors that share memory.
struct InPlaceRun {
  std::vector<Tensor> slots;
  void run(const Step& s);
};

// (b): the same program on values; views are replayed from their root, writes rebuild the root.
class FunctionalRun {
 public:
  explicit FunctionalRun(const std::vector<Tensor>& inputs);
  void run(const Step& s);
  Tensor read(int slot) const;
  size_t size() const { return slots_.size(); }

 private:
  struct Slot {
    int root;                 // the slot holding the memory this slot views (itself for roots)
    std::vector<Step> chain;  // view steps from the root to this slot
    Tensor value;             // roots only
  };
  void write(int slot, const Tensor& value);
  std::vector<Slot> slots_;
};

}  // namespace smelt::fuzz
