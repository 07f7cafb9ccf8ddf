// The ONNX export cases: one or more per exportable op of the op table, and traced models (an
// MLP, a small CNN, a transformer block). Shared by onnx_export_test.cpp, which round-trips them
// and writes them out for onnx.checker and ONNX Runtime.
#pragma once

#include <string>
#include <vector>

#include "smelt/graph.h"

namespace smelt::export_cases {

struct Case {
  std::string name;
  Graph::Fn fn;
  std::vector<Tensor> inputs;
  std::vector<Tensor> params = {};  // exported as initializers
  // Export and import map every op of the case to itself: the round trip is bit-exact.
  bool exact = true;
  int64_t opset = 17;
  // Integer products in the QDQ form (onnx::ExportOptions::quantized_as_qdq); the import is
  // optimized before it runs, so that fold_qdq makes the integer ops again.
  bool qdq = false;
};

std::vector<Case> all();
// Names of the ops that have an ONNX form: every op of the table except the pooling gradients
// and group.
std::vector<std::string> exportable_ops();

// Graphs for the error tests.
std::vector<Tensor> max_pool_grad(const std::vector<Tensor>& in, const std::vector<Tensor>& params);
std::vector<Tensor> index_add_fn(const std::vector<Tensor>& in, const std::vector<Tensor>& params);

}  // namespace smelt::export_cases
