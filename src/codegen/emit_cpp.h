// The C++ backend's source generator: a LoopKernel as one self-contained translation unit that
// #includes kernels/scalar.h (the eager kernels' math, so compiled kernels compute the same bits
// wherever no reduction is reassociated) and defines `extern "C" void <symbol>(void* const* args)`.
//
// A dynamic-shape kernel (LoopKernel::sizes) reads the sizes S0, S1, ... after its buffers
// (args[args.size()], a const int64_t*); its extents and strides are polynomials in them
// (codegen/size_poly.h), and the choices that depend on them (blocks, running in parallel) are
// made at run time.
//
// Otherwise the code is specialized to the kernel's shapes: extents and strides are constants, dims that
// every access walks contiguously together are merged, size-1 dims dropped. The innermost loop
// carries `#pragma omp simd` (with the reductions as OpenMP reductions) unless a stage stores into
// a buffer it also reads through a different access; with a constant trip count that is a
// multiple of the vector width the compiler emits no tail loop. The outer loop (for kernels
// without reductions: every dim but the innermost, plus blocks of the innermost) runs under
// `#pragma omp parallel for` when the kernel's work reaches kParallelGrain, as the eager kernels.
// A tiled kernel (loop_kernel.h) also gets `extern "C" void <symbol>_tile(void* const* args,
// int64_t r0, int64_t r1, int64_t c0, int64_t c1)`: the same body over one tile, no threads.
#pragma once

#include <string>

#include "codegen/loop_kernel.h"

namespace smelt::codegen {

// The kernel caches' key holds a hash of this generator's sources, taken at build time
// (kernel_cache.h emitter_revision()): a change to what it emits needs no manual revision bump.

// The source of `kernel` (validate()d by the caller), its entry point named `symbol`.
std::string emit_cpp(const LoopKernel& kernel, const std::string& symbol);

// The same loops as C11 for the standalone export (export_c/, docs/export_c.md): a `static void
// <symbol>(void* const* args)` (and `<symbol>_tile`) calling the scalar functions
// smelt_<name>_<dtype> and the macros SMELT_KERNEL, SMELT_UNUSED, SMELT_OMP and SMELT_OMP_FOR that
// the export's prelude defines. No #includes. Fixed shapes only: a dynamic-shape kernel is a
// smelt::Error.
std::string emit_c(const LoopKernel& kernel, const std::string& symbol);

}  // namespace smelt::codegen
