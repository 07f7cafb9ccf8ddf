// safetensors reading (validating every field against the file) and atomic writing.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "io/atomic_file.h"
#include "smelt/autograd.h"
#include "smelt/io.h"

namespace smelt::io {

namespace {

// Tensor bytes are written and read as they sit in memory.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

// The format's own limit on the header, which also stops a garbage length from allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {{DType::Float32, "F32"},
                                     {DType::Float64, "F64"},
                                     {DType::Int64, "I64"},
                                     {DType::Bool, "BOOL"},
                                     {DType::UInt8, "U8"}};
// Valid in the format, but with no smelt dtype to load them into.
constexpr const char* kUnsupportedDTypes[] = {"F16", "BF16", "F8_E4M3", "F8_E5M2", "I8",
                                              "I16", "I32",  "U16",     "U32",     "U64"};

const char* safetensors_dtype(DType dtype) {
  for (const DTypeName& d : kDTypeNames) {
    if (d.dtype == dtype) return d.name;
  }
  SMELT_INTERNAL_CHECK(false) << "safetensors: no name for dtype " << dtype_name(dtype);
  return "";
}

std::string supported_dtypes() { return "F32, F64, I64, BOOL, U8"; }

// One tensor's header entry, checked for internal consistency.
struct Entry {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// An open file read at absolute offsets; closes itself.
class InputFile {
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

  uint64_t size() const { return size_; }

  // Reads exactly n bytes at `offset`; an error if the file ends first (it shrank since stat).
  void read(uint64_t offset, void* out, uint64_t n, const std::string& what) const {
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

// Parses one entry of the header; `fail` prefixes the file name.
Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& j) {
  auto where = [&] { return "load_safetensors: " + path + ": tensor '" + name + "': "; };
  SMELT_CHECK(j.is_object()) << where() << "the entry must be a JSON object, got " << j.type_name();
  for (const auto& [key, _] : j.items()) {
    SMELT_CHECK(key == "dtype" || key == "shape" || key == "data_offsets")
        << where() << "unknown field '" << key << "'; valid fields: dtype, shape, data_offsets";
  }
  SMELT_CHECK(j.contains("dtype") && j.contains("shape") && j.contains("data_offsets"))
      << where() << "needs the fields dtype, shape and data_offsets";

  Entry e;
  e.name = name;
  const nlohmann::json& dtype = j["dtype"];
  SMELT_CHECK(dtype.is_string()) << where() << "dtype must be a string, got " << dtype.dump();
  const std::string dname = dtype.get<std::string>();
  bool known = false;
  for (const DTypeName& d : kDTypeNames) {
    if (dname == d.name) {
      e.dtype = d.dtype;
      known = true;
    }
  }
  if (!known) {
    bool valid_elsewhere =
        std::find_if(std::begin(kUnsupportedDTypes), std::end(kUnsupportedDTypes),
                     [&](const char* n) { return dname == n; }) != std::end(kUnsupportedDTypes);
    SMELT_CHECK(false) << where() << "dtype '" << dname << "' is "
                       << (valid_elsewhere ? "not supported by smelt" : "not a safetensors dtype")
                       << "; supported: " << supported_dtypes();
  }

  const nlohmann::json& shape = j["shape"];
  SMELT_CHECK(shape.is_array()) << where() << "shape must be an array, got " << shape.dump();
  uint64_t numel = 1;
  for (const nlohmann::json& d : shape) {
    SMELT_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t(INT64_MAX))
        << where() << "shape " << shape.dump() << " must hold non-negative integers";
    uint64_t size = d.get<uint64_t>();
    SMELT_CHECK(!__builtin_mul_overflow(numel, size, &numel))
        << where() << "shape " << shape.dump() << " has too many elements";
    e.shape.push_back(int64_t(size));
  }
  uint64_t nbytes = 0;
  SMELT_CHECK(!__builtin_mul_overflow(numel, uint64_t(dtype_size(e.dtype)), &nbytes) &&
              nbytes <= uint64_t(INT64_MAX))
      << where() << "shape " << shape.dump() << " is too large";

  const nlohmann::json& offsets = j["data_offsets"];
  SMELT_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
              offsets[1].is_number_unsigned())
      << where() << "data_offsets must be two non-negative integers [begin, end], got "
      << offsets.dump();
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  SMELT_CHECK(e.begin <= e.end) << where() << "data_offsets [" << e.begin << ", " << e.end
                                << "] end before they begin";
  SMELT_CHECK(e.end - e.begin == nbytes)
      << where() << "data_offsets [" << e.begin << ", " << e.end << "] span " << e.end - e.begin
      << " bytes, but " << dname << " " << shape.dump() << " needs " << nbytes;
  return e;
}

// The tensors must tile [0, data_size) exactly.
void check_layout(const std::string& path, std::vector<Entry>& entries, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    SMELT_CHECK(e.end <= data_size)
        << "load_safetensors: " << path << ": tensor '" << e.name << "' has data_offsets ["
        << e.begin << ", " << e.end << "] but the data section holds only " << data_size
        << " bytes (the file is truncated or the offsets are wrong)";
    SMELT_CHECK(e.begin >= covered)
        << "load_safetensors: " << path << ": tensors '" << previous->name << "' and '" << e.name
        << "' overlap (bytes [" << e.begin << ", " << std::min(covered, e.end)
        << ") of the data section)";
    SMELT_CHECK(e.begin == covered)
        << "load_safetensors: " << path << ": bytes [" << covered << ", " << e.begin
        << ") of the data section belong to no tensor (a gap before '" << e.name << "')";
    if (e.end > e.begin) previous = &e;
    covered = std::max(covered, e.end);
  }
  SMELT_CHECK(covered == data_size)
      << "load_safetensors: " << path << ": the data section has " << data_size
      << " bytes but the tensors cover only " << covered << " (trailing garbage?)";
}

}  // namespace

StateDict load_safetensors(const std::string& path, Metadata* metadata) {
  InputFile file(path);
  const std::string where = "load_safetensors: " + path + ": ";
  SMELT_CHECK(file.size() >= 8) << where << "the file has " << file.size()
                                << " bytes, too short for the 8-byte header length";
  uint64_t header_len = 0;
  file.read(0, &header_len, 8, "the header length");
  SMELT_CHECK(header_len > 0) << where << "the header length is 0; expected a JSON header";
  SMELT_CHECK(header_len <= kMaxHeaderBytes)
      << where << "the header length " << header_len << " exceeds the format's limit of "
      << kMaxHeaderBytes << " bytes (not a safetensors file?)";
  SMELT_CHECK(header_len <= file.size() - 8)
      << where << "the header length " << header_len << " exceeds the " << file.size() - 8
      << " bytes that follow it (truncated, or not a safetensors file)";

  std::string header(size_t(header_len), '\0');
  file.read(8, header.data(), header_len, "the header");

  // nlohmann keeps the last of duplicated keys silently; a checkpoint must not be ambiguous.
  std::string duplicate;
  std::vector<std::set<std::string>> keys_at_depth;
  auto on_event = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& value) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      keys_at_depth.resize(size_t(depth) + 2);
      keys_at_depth[size_t(depth) + 1].clear();
    } else if (event == E::key && size_t(depth) < keys_at_depth.size()) {
      if (!keys_at_depth[size_t(depth)].insert(value.get<std::string>()).second &&
          duplicate.empty()) {
        duplicate = value.get<std::string>();
      }
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header, on_event);
  } catch (const nlohmann::json::exception& e) {
    SMELT_CHECK(false) << where << "the header is not valid JSON: " << e.what();
  }
  SMELT_CHECK(duplicate.empty()) << where << "the header names '" << duplicate << "' twice";
  SMELT_CHECK(j.is_object()) << where << "the header must be a JSON object, got " << j.type_name();

  std::vector<Entry> entries;
  Metadata meta;
  for (const auto& [name, value] : j.items()) {
    if (name == kMetadataKey) {
      SMELT_CHECK(value.is_object())
          << where << "__metadata__ must be an object of strings, got " << value.type_name();
      for (const auto& [k, v] : value.items()) {
        SMELT_CHECK(v.is_string())
            << where << "__metadata__['" << k << "'] must be a string, got " << v.dump();
        meta[k] = v.get<std::string>();
      }
      continue;
    }
    SMELT_CHECK(!name.empty()) << where << "a tensor has an empty name";
    entries.push_back(parse_entry(path, name, value));
  }
  const uint64_t data_start = 8 + header_len;
  check_layout(path, entries, file.size() - data_start);

  StateDict out;
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    file.read(data_start + e.begin, t.raw_data(), e.end - e.begin, "tensor '" + e.name + "'");
    if (e.dtype == DType::Bool) {
      const uint8_t* bytes = static_cast<const uint8_t*>(t.raw_data());
      for (uint64_t i = 0; i < e.end - e.begin; ++i) {
        SMELT_CHECK(bytes[i] <= 1) << where << "tensor '" << e.name << "' is BOOL but element " << i
                                   << " holds " << int(bytes[i]) << "; booleans must be 0 or 1";
      }
    }
    out.emplace(e.name, t);
  }
  if (metadata) *metadata = std::move(meta);
  return out;
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
      const uint64_t nbytes = uint64_t(c.numel()) * dtype_size(c.dtype());
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
    if (t.numel() > 0) out.write(t.raw_data(), size_t(t.numel()) * dtype_size(t.dtype()));
  }
  out.commit();
}

}  // namespace smelt::io
