// Text form of the IR, one node per line, shapes shown; parse(print(g)) rebuilds g and
// print(parse(t)) == t for printed text.
//
//   graph(%x: f32[2,3], %w: f32[3,4] param) {
//     %c0: f32[] = constant 2.5
//     %2: f32[2,4] = matmul(%x, %w)
//     %3: f32[2,4] = mul(%2, %c0)
//     %4: f32[2,2], %5: i64[2,2] = max_pool2d(%3) {kernel=[1,2], stride=[1,2]}
//     return %3, %4
//   }
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"

namespace smelt::ir {

std::string print(const Graph& g);
std::string value_ref(const Value* v);     // "%x" or "%3"
std::string meta_str(const ops::TensorMeta& m);  // "f32[2,3]"

// Parses text IR; errors name the line and column and what was expected.
std::unique_ptr<Graph> parse(const std::string& text);

}  // namespace smelt::ir
