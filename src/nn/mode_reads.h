// Which modules' train/eval modes a function read: smelt::compile records them while it traces a
// function (runtime/compile.cpp), so that the mode becomes part of the compiled signature. A
// function that captures a module and calls it sees no other sign of model.eval(): dropout and
// batch norm trace differently per mode, and the plan of one mode must not run in the other.
#pragma once

#include <memory>
#include <vector>

namespace smelt::nn {

// While alive (on this thread), every Module::is_training() call appends the module's mode
// state (shared with the module, alive after it) to `reads`.
class ModeReads {
 public:
  ModeReads();
  ~ModeReads();
  ModeReads(const ModeReads&) = delete;
  ModeReads& operator=(const ModeReads&) = delete;
  std::vector<std::shared_ptr<const bool>> reads;

 private:
  ModeReads* previous_;
};

}  // namespace smelt::nn
