// What precedes a generated kernel's entry points (emit_cpp.h): a comment naming the kernel and
// the ops it fuses, the kernel's printed loop description, in C++ the #includes (kernels/scalar.h
// first) and the definitions every kernel shares, and the OpenMP user-defined reductions its loops
// name. The loop nests themselves are emit_cpp.cpp's. Private to codegen.
//
// The shared definitions and reductions sit under include guards: the kernel cache compiles the
// sources of several kernels concatenated as one translation unit, so each may appear many times.
#pragma once

#include <string>

#include "codegen/emit_cpp_text.h"
#include "codegen/loop_kernel.h"

namespace smelt::codegen::emit {

std::string kernel_prelude(const Spelling& sp, const LoopKernel& kernel, const std::string& symbol);

}  // namespace smelt::codegen::emit
