// libFuzzer target: the safetensors loader on arbitrary bytes.
//
// An input must either load or be refused with a smelt::Error whose message is a user error
// (Error::internal() marks a smelt bug) of bounded length. Any other exception, a crash or a
// sanitizer report is a bug. A loaded input is checked against its own header: every tensor
// has the declared dtype and shape and holds exactly the bytes of its data_offsets range.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "io/safetensors_format.h"
#include "smelt/error.h"

namespace {

// Several excerpts of user data (80 characters each) plus the label and the numbers.
constexpr size_t kMaxMessageChars = 1000;

[[noreturn]] void bug(const char* what, const std::string& detail) {
  std::fprintf(stderr, "safetensors_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_loaded(const uint8_t* data, size_t size, const smelt::StateDict& loaded) {
  using namespace smelt::io::detail;
  uint64_t header_len = 0;
  if (size < 8) bug("wrong data", "loaded from fewer than 8 bytes");
  std::memcpy(&header_len, data, 8);
  if (size < 8 || header_len > size - 8) bug("wrong data", "loaded with the header past the end");
  const Header header =
      parse_header(std::string(reinterpret_cast<const char*>(data) + 8, header_len), "");
  if (loaded.size() != header.entries.size()) bug("wrong data", "tensor count differs");
  const uint8_t* section = data + 8 + header_len;
  for (const Entry& e : header.entries) {
    auto it = loaded.find(e.name);
    if (it == loaded.end()) bug("wrong data", "missing tensor " + e.name);
    const smelt::Tensor& t = it->second;
    if (t.dtype() != e.dtype || t.shape() != e.shape || !t.is_contiguous()) {
      bug("wrong data", "dtype or shape of " + e.name);
    }
    const uint64_t nbytes = e.end - e.begin;
    if (uint64_t(t.numel()) * smelt::dtype_size(t.dtype()) != nbytes) {
      bug("wrong data", "size of " + e.name);
    }
    if (nbytes > 0 && std::memcmp(t.raw_data(), section + e.begin, nbytes) != 0) {
      bug("wrong data", "bytes of " + e.name);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  smelt::io::detail::MemorySource source(data, size);
  smelt::StateDict loaded;
  try {
    smelt::io::Metadata metadata;
    loaded = smelt::io::detail::read_safetensors(source, "fuzz-input", &metadata);
  } catch (const smelt::Error& e) {
    const std::string message = e.what();
    if (e.internal()) bug("internal error", message);
    if (message.size() > kMaxMessageChars) {
      bug("unbounded message", std::to_string(message.size()) + " characters");
    }
    return 0;
  }
  check_loaded(data, size, loaded);
  return 0;
}
