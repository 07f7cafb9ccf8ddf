#include "smelt/dtype.h"

#include "smelt/error.h"

namespace smelt {

size_t dtype_size(DType t) {
  switch (t) {
#define SMELT_DTYPE_SIZE_ROW(E, T, N, S) \
  case DType::E: return sizeof(T);
    SMELT_FOR_EACH_DTYPE(SMELT_DTYPE_SIZE_ROW)
#undef SMELT_DTYPE_SIZE_ROW
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
#define SMELT_DTYPE_NAME_ROW(E, T, N, S) \
  case DType::E: return N;
    SMELT_FOR_EACH_DTYPE(SMELT_DTYPE_NAME_ROW)
#undef SMELT_DTYPE_NAME_ROW
  }
  return "?";
}

const char* dtype_short_name(DType t) {
  switch (t) {
#define SMELT_DTYPE_SHORT_ROW(E, T, N, S) \
  case DType::E: return S;
    SMELT_FOR_EACH_DTYPE(SMELT_DTYPE_SHORT_ROW)
#undef SMELT_DTYPE_SHORT_ROW
  }
  return "?";
}

bool dtype_is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }

bool dtype_is_signed_integer(DType t) { return t == DType::Int64 || t == DType::Int32; }

DType dtype_from_name(const std::string& name) {
  std::string valid;
  for (int i = 0; i < kDTypeCount; ++i) {
    const DType t = DType(i);
    if (name == dtype_name(t) || name == dtype_short_name(t)) return t;
    valid += std::string(i ? ", " : "") + dtype_name(t);
    if (std::string(dtype_short_name(t)) != dtype_name(t)) valid += std::string(" (") + dtype_short_name(t) + ")";
  }
  SMELT_CHECK(false) << "unknown dtype '" << name << "'; valid: " << valid;
  return DType::Float32;
}

}  // namespace smelt
