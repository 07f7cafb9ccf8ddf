// The safetensors header: strict JSON (exactly one object, padded only with spaces, nesting
// bounded), every entry checked on its own. Errors echo user data only as bounded excerpts.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "base/excerpt.h"
#include "io/safetensors_format.h"

namespace smelt::io::detail {
namespace {

using nlohmann::json;
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {{DType::Float32, "F32"},
                                     {DType::Float64, "F64"},
                                     {DType::Int64, "I64"},
                                     {DType::Bool, "BOOL"},
                                     {DType::UInt8, "U8"}, {DType::Int8, "I8"},
                                     {DType::Int32, "I32"}};
// Valid in the format, but with no smelt dtype to load them into.
constexpr const char* kUnsupportedDTypes[] = {"F16", "BF16", "F8_E4M3", "F8_E5M2", "I8",
                                              "I16", "U16",  "U32",     "U64"};

std::string supported_dtypes() { return "F32, F64, I64, I32, BOOL, U8"; }

// 'text' cut to a readable length.
std::string in_quotes(const std::string& text) {
  std::string out = "'";
  out += excerpt(text);
  out += '\'';
  return out;
}

// A JSON value for an error message. Safe to print recursively: parse_header refuses nesting
// deeper than kMaxJsonDepth before any value is printed.
std::string shown(const json& j) {
  return excerpt(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

Entry parse_entry(const std::string& where_file, const std::string& name, const json& j) {
  const std::string where = where_file + "tensor " + in_quotes(name) + ": ";
  SMELT_CHECK(j.is_object()) << where << "the entry must be a JSON object, got " << j.type_name();
  for (const auto& [key, _] : j.items()) {
    SMELT_CHECK(key == "dtype" || key == "shape" || key == "data_offsets")
        << where << "unknown field " << in_quotes(key) << "; valid fields: dtype, shape, data_offsets";
  }
  SMELT_CHECK(j.contains("dtype") && j.contains("shape") && j.contains("data_offsets"))
      << where << "needs the fields dtype, shape and data_offsets";

  Entry e;
  e.name = name;
  const json& dtype = j["dtype"];
  SMELT_CHECK(dtype.is_string()) << where << "dtype must be a string, got " << shown(dtype);
  const std::string dname = dtype.get<std::string>();
  auto known = std::find_if(std::begin(kDTypeNames), std::end(kDTypeNames),
                            [&](const DTypeName& d) { return dname == d.name; });
  if (known == std::end(kDTypeNames)) {
    bool valid_elsewhere =
        std::find_if(std::begin(kUnsupportedDTypes), std::end(kUnsupportedDTypes),
                     [&](const char* n) { return dname == n; }) != std::end(kUnsupportedDTypes);
    SMELT_CHECK(false) << where << "dtype " << in_quotes(dname) << " is "
                       << (valid_elsewhere ? "not supported by smelt" : "not a safetensors dtype")
                       << "; supported: " << supported_dtypes();
  }
  e.dtype = known->dtype;

  const json& shape = j["shape"];
  SMELT_CHECK(shape.is_array()) << where << "shape must be an array, got " << shown(shape);
  // numel, and the product of the non-zero dims: a tensor's strides are products of its dims,
  // so they must fit in int64 even when a zero dim makes the tensor empty.
  uint64_t numel = 1, strides_extent = 1;
  for (const json& d : shape) {
    SMELT_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t(INT64_MAX))
        << where << "shape " << shown(shape) << " must hold non-negative integers";
    const uint64_t size = d.get<uint64_t>();
    SMELT_CHECK(!__builtin_mul_overflow(numel, size, &numel) &&
                !__builtin_mul_overflow(strides_extent, std::max<uint64_t>(size, 1),
                                        &strides_extent) &&
                strides_extent <= uint64_t(INT64_MAX))
        << where << "shape " << shown(shape) << " has too many elements (more than 2^63)";
    e.shape.push_back(int64_t(size));
  }
  uint64_t nbytes = 0;
  SMELT_CHECK(!__builtin_mul_overflow(numel, uint64_t(dtype_size(e.dtype)), &nbytes) &&
              nbytes <= uint64_t(INT64_MAX))
      << where << "shape " << shown(shape) << " is too large";

  const json& offsets = j["data_offsets"];
  SMELT_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
              offsets[1].is_number_unsigned())
      << where << "data_offsets must be two non-negative integers [begin, end], got "
      << shown(offsets);
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  SMELT_CHECK(e.begin <= e.end) << where << "data_offsets [" << e.begin << ", " << e.end
                                << "] end before they begin";
  SMELT_CHECK(e.end - e.begin == nbytes)
      << where << "data_offsets [" << e.begin << ", " << e.end << "] span " << e.end - e.begin
      << " bytes, but " << dname << " " << shown(shape) << " needs " << nbytes;
  return e;
}

// The format: the header is one JSON object starting at its first byte, padded at the end with
// spaces only. nlohmann's parser would stop at a NUL byte and ignore what follows, and accepts
// any whitespace, so the frame is checked here first.
std::string_view json_text(const std::string& text, const std::string& where) {
  const size_t nul = text.find('\0');
  SMELT_CHECK(nul == std::string::npos)
      << where << "the header is not valid JSON: it holds a NUL byte at offset " << nul
      << " (the header must be exactly one JSON object, padded only with spaces)";
  SMELT_CHECK(!text.empty() && text.front() == '{')
      << where << "the header must be a JSON object starting with '{' at its first byte, got '"
      << excerpt(text.substr(0, 1)) << "'";
  const size_t last = text.find_last_not_of(' ');
  SMELT_CHECK(text[last] == '}')
      << where << "the header is not valid JSON: it must end with the object's '}' followed "
      << "only by spaces, but ends with '" << excerpt(text.substr(last, 1)) << "'";
  return std::string_view(text).substr(0, last + 1);
}

}  // namespace

Header parse_header(const std::string& text, const std::string& where) {
  const std::string_view body = json_text(text, where);
  // nlohmann keeps the last of duplicated keys silently; a checkpoint must not be ambiguous.
  std::string duplicate;
  std::vector<std::set<std::string>> keys_at_depth;
  // depth = how many containers enclose this event (the header object starts at 0).
  auto on_event = [&](int depth, json::parse_event_t event, json& value) {
    using E = json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      SMELT_CHECK(depth < kMaxJsonDepth)
          << where << "the header nests JSON deeper than " << kMaxJsonDepth
          << " levels; a safetensors header needs 3";
    }
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
  json j;
  try {
    j = json::parse(body.begin(), body.end(), on_event);
  } catch (const json::exception& e) {
    // nlohmann's message quotes the last token read, which can be the whole header.
    SMELT_CHECK(false) << where << "the header is not valid JSON: " << excerpt(e.what(), 200);
  }
  SMELT_CHECK(duplicate.empty()) << where << "the header names " << in_quotes(duplicate) << " twice";
  SMELT_CHECK(j.is_object()) << where << "the header must be a JSON object, got " << j.type_name();

  Header header;
  for (const auto& [name, value] : j.items()) {
    if (name == kMetadataKey) {
      SMELT_CHECK(value.is_object())
          << where << "__metadata__ must be an object of strings, got " << value.type_name();
      for (const auto& [k, v] : value.items()) {
        SMELT_CHECK(v.is_string())
            << where << "__metadata__[" << in_quotes(k) << "] must be a string, got " << shown(v);
        header.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    SMELT_CHECK(!name.empty()) << where << "a tensor has an empty name";
    header.entries.push_back(parse_entry(where, name, value));
  }
  return header;
}

}  // namespace smelt::io::detail
