// Reading model bytes into a ModelProto, with protobuf's own parser (never a hand-written one):
// it bounds nesting depth and refuses malformed wire data; we bound the size.
#include <google/protobuf/io/coded_stream.h>

#include <filesystem>
#include <fstream>

#include "onnx/proto.h"

namespace smelt::onnx_import {

std::string read_file_bytes(const std::string& path, int64_t max_bytes) {
  std::error_code ec;
  SMELT_CHECK(std::filesystem::is_regular_file(path, ec)) << "onnx: '" << path << "' is not a readable file";
  const auto size = std::filesystem::file_size(path, ec);
  SMELT_CHECK(!ec) << "onnx: cannot read the size of '" << path << "'";
  SMELT_CHECK(int64_t(size) <= max_bytes) << "onnx: '" << path << "' has " << size << " bytes, more than the "
                                          << max_bytes << " a model file may have (keep weights in external data)";
  std::ifstream f(path, std::ios::binary);
  SMELT_CHECK(f.good()) << "onnx: cannot open '" << path << "'";
  std::string bytes(size, '\0');
  f.read(bytes.data(), std::streamsize(size));
  SMELT_CHECK(f.gcount() == std::streamsize(size)) << "onnx: reading '" << path << "' failed";
  return bytes;
}

::onnx::ModelProto parse_model(const std::string& bytes, const std::string& what) {
  SMELT_CHECK(int64_t(bytes.size()) <= kMaxModelBytes)
      << "onnx: " << what << " has " << bytes.size() << " bytes, more than " << kMaxModelBytes;
  ::onnx::ModelProto model;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), int(bytes.size()));
  in.SetTotalBytesLimit(int(std::min<int64_t>(kMaxModelBytes, INT32_MAX)));
  const bool ok = model.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
  SMELT_CHECK(ok) << "onnx: " << what << " is not a valid ONNX model (the protobuf data is malformed or truncated)";
  SMELT_CHECK(model.has_graph()) << "onnx: " << what << " has no graph";
  return model;
}

}  // namespace smelt::onnx_import
