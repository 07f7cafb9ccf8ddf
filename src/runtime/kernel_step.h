// One Kernel step of a plan: a lowered group and the backend that runs it. Runs allocate
// nothing: the argument array is built once and refilled from the plan's slot pointers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_cache.h"
#include "codegen/kernel_interpreter.h"
#include "codegen/loop_kernel.h"
#include "runtime/plan.h"

namespace smelt::runtime {

using codegen::KernelEntry;

class KernelStep {
 public:
  // Validates the kernel (an invalid one is an internal error of the lowering) by making the
  // KernelHandle the step runs through, the kernel's one execution owner (interpreted until
  // compiled). The plan hands every step's handle to the kernel cache at once
  // (KernelCache::compile_handles, so that they compile in batches), which compiles into it or
  // returns the handle already compiling the same kernel: attach() takes that answer. A
  // dynamic-shape kernel (LoopKernel::sizes) runs at its `sizes->at`: its sizes follow the buffers
  // in the arguments, for compiled code and interpreter alike (so one cache handle serves every
  // size).
  explicit KernelStep(codegen::LoopKernel kernel);

  // The handle the step runs through until it asks the cache (own_handle()), then the cache's
  // answer for it. Not while a run of this step is in flight.
  const std::shared_ptr<codegen::KernelHandle>& own_handle() const { return handle_; }
  void attach(std::shared_ptr<codegen::KernelHandle> handle) {
    handle_ = std::move(handle);
    cached_ = true;
  }

  // `pointers[arg_slots[i]]` is argument i.
  void run(const std::vector<void*>& pointers, const std::vector<int>& arg_slots) {
    for (size_t i = 0; i < arg_slots.size(); ++i) args_[i] = pointers[size_t(arg_slots[i])];
    // nll_loss's targets, checked as the eager op checks them (the backends assume them in range)
    if (!kernel_.index_checks.empty()) codegen::check_indices(kernel_, args_.data());
    handle_->run(args_.data());
  }

  // A tiled kernel run tile by tile (a contraction's epilogue inside the GEMM): bind() once, then
  // run_tile() from any thread, for tiles that do not overlap.
  void bind(const std::vector<void*>& pointers, const std::vector<int>& arg_slots) {
    for (size_t i = 0; i < arg_slots.size(); ++i) args_[i] = pointers[size_t(arg_slots[i])];
  }
  void run_tile(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const { handle_->run_tile(args_.data(), r0, r1, c0, c1); }

  // The kernel (at this step's sizes); kept by the step also once the cache holds it, so that a
  // reader's reference stays valid when a run switches the step to compiled code.
  const codegen::LoopKernel& kernel() const { return kernel_; }
  // The kernel cache's handle (null until the step asks the cache: Interpreter backend, or a
  // Tiered step before start_compile). Changes only in start_compile.
  std::shared_ptr<codegen::KernelHandle> handle() const { return cached_ ? handle_ : nullptr; }
  // Waits for `handle`'s pending compile; then "" when the kernel runs compiled (or `handle` is
  // null: the interpreter is the backend), else why it stays interpreted (no compiler, an error).
  static std::string wait_compiled(const std::shared_ptr<codegen::KernelHandle>& handle);
  // "interpreter", "compiled", or "compiling" (interpreted until the compiler is done).
  const char* backend_name() const;

 private:
  codegen::LoopKernel kernel_;
  std::shared_ptr<codegen::KernelHandle> handle_;  // runs the kernel: the step's own, or the cache's
  bool cached_ = false;                            // handle_ is the cache's
  std::vector<void*> args_;
  std::vector<int64_t> sizes_;  // dynamic-shape kernels: the symbols' values, args_.back() points here
};

}  // namespace smelt::runtime
