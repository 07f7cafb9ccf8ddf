#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "smelt/creation.h"

namespace smelt::io {
namespace {

std::string descr_of(DType t) {
  switch (t) {
    case DType::Float32: return "<f4";
    case DType::Float64: return "<f8";
    case DType::Int64: return "<i8";
    case DType::Bool: return "|b1";
    case DType::UInt8: return "|u1";
    case DType::Int8: return "|i1";
    case DType::Int32: return "<i4";
  }
  return "";
}

// The value text after 'key': in the header dict.
std::string field(const std::string& header, const std::string& key, const std::string& what) {
  const size_t k = header.find("'" + key + "'");
  SMELT_CHECK(k != std::string::npos) << what << ": the .npy header has no '" << key << "'";
  size_t colon = header.find(':', k);
  SMELT_CHECK(colon != std::string::npos) << what << ": malformed .npy header";
  return header.substr(colon + 1);
}

}  // namespace

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  SMELT_CHECK(bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0) << what << ": not a .npy file (bad magic)";
  const int major = uint8_t(bytes[6]);
  SMELT_CHECK(major >= 1 && major <= 3) << what << ": .npy format version " << major << " (supported: 1-3)";
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
    start = 10;
  } else {
    SMELT_CHECK(bytes.size() >= 12) << what << ": truncated .npy header";
    for (int i = 0; i < 4; ++i) header_len |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    start = 12;
  }
  SMELT_CHECK(header_len <= bytes.size() - start) << what << ": truncated .npy header";
  const std::string header = bytes.substr(start, header_len);
  std::string descr = field(header, "descr", what);
  const size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  SMELT_CHECK(q1 != std::string::npos && q2 != std::string::npos) << what << ": malformed descr";
  descr = descr.substr(q1 + 1, q2 - q1 - 1);
  DType dtype;
  if (descr == "<f4") dtype = DType::Float32;
  else if (descr == "<f8") dtype = DType::Float64;
  else if (descr == "<i8") dtype = DType::Int64;
  else if (descr == "<i4") dtype = DType::Int32;
  else if (descr == "|b1") dtype = DType::Bool;
  else if (descr == "|u1") dtype = DType::UInt8;
  else if (descr == "|i1") dtype = DType::Int8;
  else SMELT_CHECK(false) << what << ": .npy dtype '" << descr.substr(0, 20) << "' is not supported (valid: <f4, <f8, <i8, <i4, |b1, |u1, |i1)";
  const std::string fortran = field(header, "fortran_order", what);
  SMELT_CHECK(fortran.find("False") < fortran.find(',') ) << what << ": Fortran-order .npy files are not supported";
  std::string shape_text = field(header, "shape", what);
  const size_t open = shape_text.find('('), close = shape_text.find(')');
  SMELT_CHECK(open != std::string::npos && close != std::string::npos && open < close) << what << ": malformed shape";
  Shape shape;
  std::stringstream ss(shape_text.substr(open + 1, close - open - 1));
  std::string item;
  int64_t n = 1;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(" ") == std::string::npos) continue;
    int64_t d = -1;
    try {
      d = std::stoll(item);
    } catch (const std::exception&) {
    }
    SMELT_CHECK(d >= 0) << what << ": bad dim '" << item.substr(0, 20) << "' in the shape";
    SMELT_CHECK(d == 0 || n <= INT64_MAX / d / 8) << what << ": the shape is too large";
    n *= d;
    shape.push_back(d);
  }
  const size_t data = start + header_len;
  const size_t nbytes = size_t(n) * dtype_size(dtype);
  SMELT_CHECK(bytes.size() - data == nbytes) << what << ": the data holds " << bytes.size() - data << " bytes, the shape "
                                             << shape_str(shape) << " needs " << nbytes;
  Tensor t = zeros(shape, dtype);
  if (nbytes) std::memcpy(t.raw_data(), bytes.data() + data, nbytes);
  return t;
}

Tensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SMELT_CHECK(f.good()) << "npy: cannot open '" << path << "'";
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_npy(bytes, "'" + path + "'");
}

void write_npy(const std::string& path, const Tensor& t) {
  std::string shape = "(";
  for (int64_t d : t.shape()) shape += std::to_string(d) + ", ";
  if (t.dim() > 1) shape.erase(shape.size() - 2, 1);
  if (t.dim() > 0) shape.pop_back();
  if (t.dim() == 1) shape += ",";
  shape += ")";
  std::string header = "{'descr': '" + descr_of(t.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  SMELT_CHECK(f.good()) << "npy: cannot write '" << path << "'";
  f.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {char(header.size() & 0xff), char(header.size() >> 8)};
  f.write(len, 2);
  f << header;
  const Tensor c = t.contiguous();
  f.write(static_cast<const char*>(c.raw_data()), std::streamsize(c.nbytes()));
  SMELT_CHECK(f.good()) << "npy: writing '" << path << "' failed";
}

}  // namespace smelt::io
