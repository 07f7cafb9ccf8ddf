// Graphviz pictures of a graph. Op nodes are boxes labeled with the op, its attributes and its
// outputs' shapes; graph inputs are blue ellipses, parameters orange ellipses, constants grey
// notes (small ones show their values), graph outputs green octagons. Edges carry the shape of the
// value they move.
//
//   smelt opt model.ir --dot model.svg      (or model.dot for the text)
#pragma once

#include <string>

#include "ir/graph.h"

namespace smelt::ir {

// The graph in the DOT language.
std::string to_dot(const Graph& g, const std::string& title = "smelt");

// True when Graphviz's `dot` program can be run.
bool graphviz_available();

// Writes `dot_text` to `path`: as it is for a .dot path, rendered by Graphviz for .svg, .png or
// .pdf. Throws smelt::Error when the path cannot be written, the extension is unknown, or
// rendering needs Graphviz and it is not installed.
void write_dot(const std::string& dot_text, const std::string& path);

}  // namespace smelt::ir
