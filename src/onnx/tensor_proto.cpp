// TensorProto <-> Tensor. Every length in the message is checked before it is trusted: the dims
// (non-negative, product within int64), the byte count of raw_data or the number of typed values,
// and for external data the file, offset and length (inside the model's directory, inside the
// file).
#include <cstring>
#include <filesystem>
#include <fstream>

#include "onnx/proto.h"
#include "smelt/creation.h"

namespace smelt::onnx_import {
namespace {

namespace fs = std::filesystem;
using ::onnx::TensorProto;

[[noreturn]] void unsupported(const std::string& what) { throw onnx::Unsupported(what); }

int64_t checked_numel(const TensorProto& p, const std::string& where) {
  int64_t n = 1;
  for (int64_t d : p.dims()) {
    SMELT_CHECK(d >= 0) << where << ": dim " << d << " is negative; dims must be >= 0";
    SMELT_CHECK(d == 0 || n <= INT64_MAX / d) << where << ": the dims' product overflows int64";
    n *= d;
  }
  return n;
}

// The file an external-data entry names, resolved inside `model_dir`: a relative path that stays
// inside the directory after following links (no "../", no absolute path, no symlink out).
fs::path external_path(const std::string& location, const std::string& model_dir, const std::string& where) {
  SMELT_CHECK(!model_dir.empty()) << where << ": external data ('" << location
                                  << "') needs a model file on disk, not bytes in memory";
  const fs::path rel(location);
  SMELT_CHECK(!location.empty() && rel.is_relative() && !rel.has_root_name())
      << where << ": external data location '" << location << "' must be a relative path inside the model's directory";
  for (const auto& part : rel) {
    SMELT_CHECK(part != "..") << where << ": external data location '" << location
                              << "' leaves the model's directory ('..'); only files beside the model are read";
  }
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(fs::path(model_dir), ec);
  SMELT_CHECK(!ec) << where << ": cannot resolve the model directory '" << model_dir << "'";
  const fs::path full = fs::weakly_canonical(dir / rel, ec);
  SMELT_CHECK(!ec) << where << ": cannot resolve external data '" << location << "'";
  const std::string d = dir.string(), f = full.string();
  SMELT_CHECK(f.size() > d.size() && f.compare(0, d.size(), d) == 0 && (f[d.size()] == '/' || d.back() == '/'))
      << where << ": external data '" << location << "' resolves to '" << f
      << "', outside the model's directory '" << d << "' (a link out of it?)";
  return full;
}

std::string read_external(const TensorProto& p, const std::string& model_dir, int64_t nbytes,
                          const std::string& where) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    auto number = [&](const std::string& text) {
      size_t used = 0;
      int64_t v = -1;
      try {
        v = std::stoll(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      SMELT_CHECK(used == text.size() && v >= 0)
          << where << ": external data " << kv.key() << " '" << text.substr(0, 40) << "' is not a non-negative integer";
      return v;
    };
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = number(kv.value());
    else if (kv.key() == "length") length = number(kv.value());
    else if (kv.key() == "checksum") continue;
    else unsupported(where + ": external data key '" + kv.key().substr(0, 40) + "' is not supported (valid: location, offset, length, checksum)");
  }
  SMELT_CHECK(!location.empty()) << where << ": external data without a 'location'";
  const fs::path path = external_path(location, model_dir, where);
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  SMELT_CHECK(!ec && fs::is_regular_file(path)) << where << ": cannot read external data file '" << location << "'";
  if (length < 0) length = nbytes;
  SMELT_CHECK(length == nbytes) << where << ": external data length " << length << " bytes, but the dims need " << nbytes;
  SMELT_CHECK(offset <= int64_t(size) && length <= int64_t(size) - offset)
      << where << ": external data [" << offset << ", " << offset << " + " << length << ") runs past the end of '"
      << location << "' (" << size << " bytes)";
  std::ifstream f(path, std::ios::binary);
  std::string bytes(size_t(length), '\0');
  f.seekg(offset);
  f.read(bytes.data(), length);
  SMELT_CHECK(f.good() || length == 0) << where << ": reading external data '" << location << "' failed";
  return bytes;
}

// Copies `count` typed values (the proto's repeated field) into t, converting to T.
template <class T, class Field>
void copy_field(const Field& field, int64_t count, Tensor& t, const std::string& where, const char* field_name) {
  SMELT_CHECK(field.size() == count) << where << ": " << field_name << " holds " << field.size()
                                     << " values, the dims need " << count;
  T* out = static_cast<T*>(t.raw_data());
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(field.Get(int(i)));
}

}  // namespace

const char* onnx_type_name(int32_t type) {
  switch (type) {
    case TensorProto::FLOAT: return "float32";
    case TensorProto::UINT8: return "uint8";
    case TensorProto::INT8: return "int8";
    case TensorProto::UINT16: return "uint16";
    case TensorProto::INT16: return "int16";
    case TensorProto::INT32: return "int32";
    case TensorProto::INT64: return "int64";
    case TensorProto::STRING: return "string";
    case TensorProto::BOOL: return "bool";
    case TensorProto::FLOAT16: return "float16";
    case TensorProto::DOUBLE: return "float64";
    case TensorProto::UINT32: return "uint32";
    case TensorProto::UINT64: return "uint64";
    case TensorProto::COMPLEX64: return "complex64";
    case TensorProto::COMPLEX128: return "complex128";
    case TensorProto::BFLOAT16: return "bfloat16";
    default: return "an unknown type";
  }
}

DType dtype_from_onnx(int32_t type, const std::string& where) {
  switch (type) {
    case TensorProto::FLOAT: return DType::Float32;
    case TensorProto::DOUBLE: return DType::Float64;
    case TensorProto::INT64: return DType::Int64;
    case TensorProto::BOOL: return DType::Bool;
    case TensorProto::UINT8: return DType::UInt8;
    case TensorProto::INT8: return DType::Int8;
    case TensorProto::INT32: return DType::Int32;
    default: break;
  }
  unsupported(where + ": dtype " + onnx_type_name(type) + " (" + std::to_string(type) +
              ") is not supported; supported: float32, float64, int64, int32, bool, uint8");
}

int32_t dtype_to_onnx(DType t) {
  switch (t) {
    case DType::Float32: return TensorProto::FLOAT;
    case DType::Float64: return TensorProto::DOUBLE;
    case DType::Int64: return TensorProto::INT64;
    case DType::Bool: return TensorProto::BOOL;
    case DType::UInt8: return TensorProto::UINT8;
    case DType::Int8: return TensorProto::INT8;
    case DType::Int32: return TensorProto::INT32;
  }
  SMELT_INTERNAL_CHECK(false) << "dtype_to_onnx: unknown dtype";
  return 0;
}

Tensor tensor_from_proto(const TensorProto& p, const std::string& model_dir, const std::string& where) {
  SMELT_CHECK(p.has_data_type()) << where << ": the tensor has no data_type";
  if (p.has_segment()) unsupported(where + ": segmented tensors are not supported");
  const DType dtype = dtype_from_onnx(p.data_type(), where);
  const int64_t count = checked_numel(p, where);
  const size_t esize = dtype_size(dtype);
  SMELT_CHECK(count <= INT64_MAX / int64_t(esize)) << where << ": the tensor's byte size overflows";
  const int64_t nbytes = count * int64_t(esize);
  Shape shape(p.dims().begin(), p.dims().end());

  const bool external = p.data_location() == TensorProto::EXTERNAL;
  if (external || p.has_raw_data()) {
    // Refuse before allocating: the bytes must be there (a hostile header may claim 2^60 dims).
    std::string ext;
    const std::string* bytes = &p.raw_data();
    if (external) {
      ext = read_external(p, model_dir, nbytes, where);
      bytes = &ext;
    }
    SMELT_CHECK(int64_t(bytes->size()) == nbytes)
        << where << ": raw_data holds " << bytes->size() << " bytes, the dims " << shape_str(shape) << " of "
        << dtype_name(dtype) << " need " << nbytes;
    Tensor t = zeros(shape, dtype);
    if (nbytes > 0) std::memcpy(t.raw_data(), bytes->data(), size_t(nbytes));
    if (dtype == DType::Bool) {  // bytes other than 0/1 are not valid bools in C++
      auto* b = static_cast<uint8_t*>(t.raw_data());
      for (int64_t i = 0; i < count; ++i) b[i] = b[i] != 0;
    }
    return t;
  }
  // Typed fields: the count must match exactly, so the tensor is no larger than the message.
  int64_t available = 0;
  switch (dtype) {
    case DType::Float32: available = p.float_data_size(); break;
    case DType::Float64: available = p.double_data_size(); break;
    case DType::Int64: available = p.int64_data_size(); break;
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8:
    case DType::Int32: available = p.int32_data_size(); break;
  }
  SMELT_CHECK(available == count) << where << ": the tensor holds " << available << " values, the dims "
                                  << shape_str(shape) << " need " << count;
  Tensor t = zeros(shape, dtype);
  switch (dtype) {
    case DType::Float32: copy_field<float>(p.float_data(), count, t, where, "float_data"); break;
    case DType::Float64: copy_field<double>(p.double_data(), count, t, where, "double_data"); break;
    case DType::Int64: copy_field<int64_t>(p.int64_data(), count, t, where, "int64_data"); break;
    case DType::Bool: {
      auto* out = static_cast<uint8_t*>(t.raw_data());
      for (int64_t i = 0; i < count; ++i) out[i] = p.int32_data(int(i)) != 0;
      break;
    }
    case DType::UInt8: copy_field<uint8_t>(p.int32_data(), count, t, where, "int32_data"); break;
    case DType::Int8: copy_field<int8_t>(p.int32_data(), count, t, where, "int32_data"); break;
    case DType::Int32: copy_field<int32_t>(p.int32_data(), count, t, where, "int32_data"); break;
  }
  return t;
}

TensorProto tensor_to_proto(const Tensor& t, const std::string& name) {
  TensorProto p;
  p.set_name(name);
  p.set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.shape()) p.add_dims(d);
  const Tensor c = t.contiguous();
  p.set_raw_data(std::string(static_cast<const char*>(c.raw_data()), size_t(c.nbytes())));
  return p;
}

}  // namespace smelt::onnx_import
