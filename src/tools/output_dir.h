// Output directories given on the command line, checked before any work starts.
#pragma once

#include <string>

namespace smelt::tools {

// Creates `dir` (and its parents) if missing, then proves it is a writable directory by creating
// and removing a file in it. A smelt::Error starting with `what` (e.g. "demo: --out") otherwise.
void prepare_output_dir(const std::string& dir, const std::string& what);

// Writes `text` to `path` atomically (io::AtomicFileWriter); a smelt::Error naming the path when
// it cannot, never a message claiming a file that is not there.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace smelt::tools
