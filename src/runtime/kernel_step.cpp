#include "runtime/kernel_step.h"

#include "codegen/kernel_interpreter.h"

namespace smelt::runtime {

KernelStep::KernelStep(codegen::LoopKernel kernel) {
  try {
    handle_ = std::make_shared<codegen::KernelHandle>(kernel);  // validates
  } catch (const Error& e) {
    SMELT_INTERNAL_CHECK(false) << "plan: the lowering produced an invalid kernel '" << kernel.name
                                << "': " << e.what() << "\n" << codegen::print_kernel(kernel);
  }
  args_.resize(kernel.args.size());
  if (kernel.sizes) {
    sizes_ = kernel.sizes->at;
    args_.push_back(sizes_.data());
  }
  kernel_ = std::move(kernel);
}

std::string KernelStep::wait_compiled(const std::shared_ptr<codegen::KernelHandle>& handle) {
  if (!handle) return "";
  handle->wait();
  if (handle->compiled_entry()) return "";
  return handle->error().empty() ? "not compiled" : handle->error();
}

const char* KernelStep::backend_name() const {
  if (!cached_) return "interpreter";
  if (handle_->compiled_entry()) return "compiled";
  return handle_->error().empty() ? "compiling" : "interpreter";
}

}  // namespace smelt::runtime
