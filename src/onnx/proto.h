// The ONNX protobuf schema (Debian's libonnx-dev) and reading it safely: files and bytes become
// onnx::ModelProto / TensorProto with size limits, and TensorProto <-> smelt::Tensor with every
// count, dim and byte length checked against what the message really holds.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "smelt/onnx.h"
#include "smelt/tensor.h"

namespace smelt::onnx_import {

// A model file is refused past this many bytes (protobuf's own limit is 2 GiB; larger models keep
// their weights in external data files).
inline constexpr int64_t kMaxModelBytes = int64_t(2) << 30;

// Parses a ModelProto; `what` names the source in errors (a path, "bytes").
::onnx::ModelProto parse_model(const std::string& bytes, const std::string& what);
std::string read_file_bytes(const std::string& path, int64_t max_bytes);

// The smelt dtype of an ONNX TensorProto data type; onnx::Unsupported for the others (float16,
// int32, strings, ...), naming `where`.
DType dtype_from_onnx(int32_t onnx_type, const std::string& where);
int32_t dtype_to_onnx(DType t);
const char* onnx_type_name(int32_t onnx_type);  // "float32", "int32", ... "type 99"

// A TensorProto's data as a tensor (always a fresh, contiguous copy). External data is read from
// `model_dir` (empty: refused), only from files inside it. `where` names the tensor in errors.
Tensor tensor_from_proto(const ::onnx::TensorProto& proto, const std::string& model_dir,
                         const std::string& where);
::onnx::TensorProto tensor_to_proto(const Tensor& t, const std::string& name);

}  // namespace smelt::onnx_import
