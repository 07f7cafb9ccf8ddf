// Internal pieces of the safetensors reader, shared by io/safetensors.cpp, the tests and the
// libFuzzer target (fuzz_targets/safetensors_fuzz.cpp), which reads from memory instead of a file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "smelt/io.h"

namespace smelt::io::detail {

// Bytes read at absolute offsets: a file, or memory.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Reads exactly n bytes at `offset`; an Error naming `what` if they are not there.
  virtual void read(uint64_t offset, void* out, uint64_t n, const std::string& what) const = 0;
};

class MemorySource : public ByteSource {
 public:
  MemorySource(const void* data, uint64_t size) : data_(data), size_(size) {}
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, void* out, uint64_t n, const std::string& what) const override;

 private:
  const void* data_;
  uint64_t size_;
};

// One tensor's header entry, checked for internal consistency.
struct Entry {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::vector<Entry> entries;  // in the header's order
  Metadata metadata;
};

// The format nests three levels (header object -> entry object -> shape array); anything much
// deeper is garbage, refused before it can cost stack in a printer.
inline constexpr int kMaxJsonDepth = 8;

// Parses and checks the JSON header text (the N bytes after the length field). `where` prefixes
// every error ("load_safetensors: <path>: ").
Header parse_header(const std::string& text, const std::string& where);

// Reads a whole safetensors image; `name` (the path, or a label for memory) is in every error.
StateDict read_safetensors(const ByteSource& source, const std::string& name, Metadata* metadata);

}  // namespace smelt::io::detail
