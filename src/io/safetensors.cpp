// safetensors reading (validating every field against the file) and atomic writing.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/excerpt.h"
#include "io/atomic_file.h"
#include "io/safetensors_format.h"
#include "smelt/autograd.h"
#include "smelt/io.h"

namespace smelt::io {

namespace {

using detail::Entry;
using detail::Header;

// Tensor bytes are written and read as they sit in memory.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

// The format's own limit on the header, which also stops a garbage length from allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
    case DType::UInt8: return "U8";
    case DType::Int8: return "I8";
    case DType::Int32: return "I32";
    default: break;
  }
  SMELT_INTERNAL_CHECK(false) << "safetensors: no name for dtype " << dtype_name(dtype);
  return "";
}

// An open file read at absolute offsets; closes itself.
class InputFile : public detail::ByteSource {
 public:
  explicit InputFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    SMELT_CHECK(fd_ >= 0) << "load_safetensors: " << path
                          << ": cannot open: " << std::strerror(errno);
    struct stat st;
    SMELT_CHECK(::fstat(fd_, &st) == 0)
        << "load_safetensors: " << path << ": cannot stat: " << std::strerror(errno);
    SMELT_CHECK(S_ISREG(st.st_mode)) << "load_safetensors: " << path << ": not a regular file";
    size_ = uint64_t(st.st_size);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const override { return size_; }

  // Reads exactly n bytes at `offset`; an error if the file ends first (it shrank since stat).
  void read(uint64_t offset, void* out, uint64_t n, const std::string& what) const override {
    char* p = static_cast<char*>(out);
    while (n > 0) {
      ssize_t got = ::pread(fd_, p, size_t(std::min<uint64_t>(n, 1u << 30)), off_t(offset));
      if (got < 0 && errno == EINTR) continue;
      SMELT_CHECK(got > 0) << "load_safetensors: " << path_ << ": reading " << what << " failed: "
                           << (got == 0 ? "unexpected end of file" : std::strerror(errno));
      p += got;
      offset += uint64_t(got);
      n -= uint64_t(got);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The tensors must tile [0, data_size) exactly.
void check_layout(const std::string& where, std::vector<Entry>& entries, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    SMELT_CHECK(e.end <= data_size)
        << where << "tensor '" << excerpt(e.name) << "' has data_offsets [" << e.begin << ", "
        << e.end << "] but the data section holds only " << data_size
        << " bytes (the file is truncated or the offsets are wrong)";
    SMELT_CHECK(e.begin >= covered)
        << where << "tensors '" << excerpt(previous->name) << "' and '" << excerpt(e.name)
        << "' overlap (bytes [" << e.begin << ", " << std::min(covered, e.end)
        << ") of the data section)";
    SMELT_CHECK(e.begin == covered)
        << where << "bytes [" << covered << ", " << e.begin
        << ") of the data section belong to no tensor (a gap before '" << excerpt(e.name) << "')";
    if (e.end > e.begin) previous = &e;
    covered = std::max(covered, e.end);
  }
  SMELT_CHECK(covered == data_size)
      << where << "the data section has " << data_size << " bytes but the tensors cover only "
      << covered << " (trailing garbage?)";
}

}  // namespace

namespace detail {

void MemorySource::read(uint64_t offset, void* out, uint64_t n, const std::string& what) const {
  SMELT_CHECK(offset <= size_ && n <= size_ - offset)
      << "load_safetensors: reading " << what << " failed: unexpected end of the data";
  if (n > 0) std::memcpy(out, static_cast<const char*>(data_) + offset, size_t(n));
}

StateDict read_safetensors(const ByteSource& source, const std::string& name, Metadata* metadata) {
  const std::string where = "load_safetensors: " + name + ": ";
  SMELT_CHECK(source.size() >= 8) << where << "the file has " << source.size()
                                  << " bytes, too short for the 8-byte header length";
  uint64_t header_len = 0;
  source.read(0, &header_len, 8, "the header length");
  SMELT_CHECK(header_len > 0) << where << "the header length is 0; expected a JSON header";
  SMELT_CHECK(header_len <= kMaxHeaderBytes)
      << where << "the header length " << header_len << " exceeds the format's limit of "
      << kMaxHeaderBytes << " bytes (not a safetensors file?)";
  SMELT_CHECK(header_len <= source.size() - 8)
      << where << "the header length " << header_len << " exceeds the " << source.size() - 8
      << " bytes that follow it (truncated, or not a safetensors file)";

  std::string text(size_t(header_len), '\0');
  source.read(8, text.data(), header_len, "the header");
  Header header = parse_header(text, where);
  const uint64_t data_start = 8 + header_len;
  check_layout(where, header.entries, source.size() - data_start);

  StateDict out;
  for (const Entry& e : header.entries) {
    Tensor t = empty(e.shape, e.dtype);
    source.read(data_start + e.begin, t.raw_data(), e.end - e.begin,
                "tensor '" + excerpt(e.name) + "'");
    if (e.dtype == DType::Bool) {
      const uint8_t* bytes = static_cast<const uint8_t*>(t.raw_data());
      for (uint64_t i = 0; i < e.end - e.begin; ++i) {
        SMELT_CHECK(bytes[i] <= 1) << where << "tensor '" << excerpt(e.name)
                                   << "' is BOOL but element " << i << " holds " << int(bytes[i])
                                   << "; booleans must be 0 or 1";
      }
    }
    out.emplace(e.name, t);
  }
  if (metadata) *metadata = std::move(header.metadata);
  return out;
}

}  // namespace detail

StateDict load_safetensors(const std::string& path, Metadata* metadata) {
  InputFile file(path);
  return detail::read_safetensors(file, path, metadata);
}

void save_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata) {
  const std::string where = "save_safetensors: " + path + ": ";
  // Everything is checked and laid out before the first byte is written.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::vector<Tensor> data;
  uint64_t offset = 0;
  {
    NoGradGuard no_grad;
    for (const auto& [name, t] : tensors) {
      SMELT_CHECK(!name.empty() && name != kMetadataKey)
          << where << "invalid tensor name '" << name << "' (empty or reserved)";
      SMELT_CHECK(t.defined() && t.storage())
          << where << "tensor '" << name << "' is undefined or has no data";
      Tensor c = t.detach().contiguous();
      const uint64_t nbytes = uint64_t(c.nbytes());
      header[name] = {{"dtype", safetensors_dtype(c.dtype())},
                      {"shape", c.shape()},
                      {"data_offsets", {offset, offset + nbytes}}};
      offset += nbytes;
      data.push_back(c);
    }
  }
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned (as the reference writer does).
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_len = text.size();

  AtomicFileWriter out(path);
  out.write(&header_len, 8);
  out.write(text.data(), text.size());
  for (const Tensor& t : data) {
    if (t.numel() > 0) out.write(t.raw_data(), std::streamsize(t.nbytes()));
  }
  out.commit();
}

}  // namespace smelt::io
