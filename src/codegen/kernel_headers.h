// The headers generated kernels #include (kernels/scalar.h and whatever of smelt's it includes),
// embedded in libsmelt as the text it was built from (cmake/emitter_revision.cmake writes the
// table at build time).
//
// Why embedded: generated code and the eager kernels must compute the same bits, so they must be
// compiled from the same scalar math. Reading the header from disk at run time broke that in two
// ways: in a build tree the source file may already be edited while the running library is the
// old build (a fuzz run during a rebuild saw its kernels disagree with its own eager code), and an
// installed copy may be missing, moved or changed. Instead, before compiling, the kernel cache
// writes these texts into a directory of the cache named by their hash and passes that with -I:
// the include directory always holds exactly this library's headers, checked and rewritten if
// anything else is found there.
#pragma once

#include <string>
#include <vector>

namespace smelt::codegen {

struct KernelHeader {
  const char* path;  // as generated code includes it, e.g. "kernels/scalar.h"
  const char* text;
};

// Every embedded header, sorted by path (generated: build/generated/codegen/kernel_headers.cpp).
const std::vector<KernelHeader>& kernel_headers();

// A hash over the embedded paths and texts (hex), in every kernel cache key.
const std::string& kernel_headers_hash();

// `root`/include/<first 16 digits of the hash>, holding every embedded header byte for byte:
// created when missing, a file that differs (truncated, edited) rewritten atomically (temp file +
// rename, safe when several processes do it at once). Returns that directory, for -I. Throws
// smelt::Error when it cannot be written.
std::string write_kernel_headers(const std::string& root);

}  // namespace smelt::codegen
