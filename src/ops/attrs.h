// Op attributes: a small ordered list of named values (ints, floats, int lists, strings, dtypes).
// Ordered so printing is deterministic; lookups are linear (an op has a handful).
//
// Reading an attribute that is missing or has another type is the user's mistake (a hand-written
// IR file, a call with wrong attributes): smelt::Error naming the attribute and the type wanted.
// Shape rules read every attribute their op uses, so a node that passed its shape rule never
// fails later in a kernel or a pass.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "smelt/dtype.h"
#include "smelt/error.h"
#include "smelt/op_types.h"

namespace smelt::ops {

using smelt::AttrValue;
using smelt::Attrs;

// Text of a value, as the IR printer writes it: 3, 2.5, [1,2], "s", f32. Floats always show a
// '.', an exponent, or are inf / -inf / nan, so they read back as floats, bit for bit.
std::string attr_value_str(const AttrValue& v);
const char* attr_type_name(const AttrValue& v);  // "int", "float", "int list", "string", "dtype"

// Short dtype names used by the IR text (f32, f64, i64, i32, bool, u8): smelt/dtype.h's table.
using smelt::dtype_short_name;
bool dtype_from_short_name(const std::string& name, DType* out);
// Shortest decimal text that reads back to the same double (std::to_chars), with inf, -inf, nan.
std::string float_str(double v);

// Checks for shape rules: `op` names the op in the message.
// A list attribute of exactly `size` elements.
const std::vector<int64_t>& get_ints_of_size(const Attrs& attrs, const char* op, const std::string& name,
                                             size_t size);
// A shape attribute: every dim >= 0 and the element count within int64.
const std::vector<int64_t>& get_shape_attr(const Attrs& attrs, const char* op, const std::string& name);
// An int attribute in [lo, hi].
int64_t get_int_in(const Attrs& attrs, const char* op, const std::string& name, int64_t lo, int64_t hi);

}  // namespace smelt::ops
