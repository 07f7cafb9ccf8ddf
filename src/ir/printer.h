// Text form of the IR, one node per line, shapes shown; parse(print(g)) rebuilds g bit for bit
// and print(parse(t)) == t for printed text.
//
//   graph(%x: f32[2,3], %w: f32[3,4] param) {
//     %c0: f32[] = constant 2.5
//     %2: f32[2,4] = matmul(%x, %w)
//     %3: f32[2,4] = mul(%2, %c0)
//     %4: f32[2,2], %5: i64[2,2] = max_pool2d(%3) {kernel=[1,2], stride=[1,2]}
//     %6: f32[2,4] = cast(%3) {dtype=f32}
//     %7: f32[2,4] = group(%3, %6) graph(%0: f32[2,4], %1: f32[2,4]) {
//       %2: f32[2,4] = add(%0, %1)
//       return %2
//     }
//     return %3, %4, %7
//   }
//
// Numbers: integers in decimal; floats as the shortest decimal that reads back to the same bits,
// and `inf`, `-inf`, `-0`, `nan` (the default quiet NaN) or `nan:0x<all bits in hex>` (any other
// NaN, sign and payload kept). Attribute floats always show a '.', an exponent, inf or nan.
// Value names: `%<number>` is the value's id (no leading zeros, below kMaxValueId); `%<name>`
// keeps a name. A group's body has value names of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ir/graph.h"

namespace smelt::ir {

std::string print(const Graph& g);

struct PrintOptions {
  // Constants with more elements print as `constant <N values not shown>`: an imported model's
  // weights would otherwise be most of the text (ResNet-18: 11M numbers). Such text does not
  // parse back; the default shows everything.
  size_t max_constant_elements = SIZE_MAX;
};
std::string print(const Graph& g, const PrintOptions& options);
std::string value_ref(const Value* v);     // "%x" or "%3"
std::string node_ref(const Node& n);       // "%y = relu" (its first output, or "?")
std::string meta_str(const ops::TensorMeta& m);  // "f32[2,3]"

// Parses text IR; errors name the line and column and what was expected.
std::unique_ptr<Graph> parse(const std::string& text);

}  // namespace smelt::ir
