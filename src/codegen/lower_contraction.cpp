#include "codegen/lower_contraction.h"

#include "ops/contraction_tiles.h"
#include "smelt/error.h"

namespace smelt::codegen {
namespace {

bool same_access(const Access& a, const Access& b) {
  return a.offset == b.offset && a.outer_strides == b.outer_strides && a.inner_strides == b.inner_strides;
}

// An output (index into the body's outputs) the GEMM may write the product into and the kernel
// `k` (argument `product_arg` the product) then finish in place; -1 when none fits.
int inplace_output(const LoopKernel& k, const ir::Graph& body, int product_arg, int first_output_arg) {
  const ops::TensorMeta& product = body.nodes().front()->outputs[0]->meta;
  for (size_t o = 0; o < body.outputs().size(); ++o) {
    const ops::TensorMeta& meta = body.outputs()[o]->meta;
    if (meta.shape != product.shape || meta.dtype != product.dtype) continue;
    const int arg = first_output_arg + int(o);
    const Access* store = nullptr;
    int stores = 0;
    for (const Store& s : k.stores) {
      if (k.accesses[size_t(s.access)].arg == arg) store = &k.accesses[size_t(s.access)], ++stores;
    }
    if (stores != 1) continue;
    bool fits = true;
    for (const Access& a : k.accesses) {
      if (a.arg == product_arg && !same_access(a, *store)) fits = false;
    }
    if (fits) return int(o);
  }
  return -1;
}

}  // namespace

std::unique_ptr<ir::Graph> contraction_epilogue_body(const ir::Graph& body) {
  std::unique_ptr<ir::Graph> g = body.clone();
  ir::Node* contraction = g->nodes().front().get();
  ir::Value* result = g->add_input(contraction->outputs[0]->meta);
  g->replace_all_uses(contraction->outputs[0], result);
  g->erase_node(contraction);
  return g;
}

std::optional<TiledContraction> lower_tiled_contraction(const ir::Graph& body, const std::string& name,
                                                        const LowerFn& lower) {
  const ir::Node& first = *body.nodes().front();
  std::vector<ops::TensorMeta> metas;
  for (const ir::Value* v : first.inputs) {
    // An operand that fusion moved into the body as a constant (one element) has no slot among
    // the group's inputs: the two-step path gives it one.
    if (!v->is_graph_input()) return std::nullopt;
    metas.push_back(v->meta);
  }
  LowerOptions options;
  options.tile_col_dims = ops::contraction_tile_col_dims(first.op, metas);
  if (options.tile_col_dims == 0) return std::nullopt;
  TiledContraction t;
  t.lowered = lower(*contraction_epilogue_body(body), name, options);
  if (!t.lowered.kernel) return std::nullopt;
  for (const ir::Value* v : first.inputs) {
    size_t i = 0;
    while (i < body.inputs().size() && body.inputs()[i] != v) ++i;
    SMELT_INTERNAL_CHECK(i < body.inputs().size()) << "plan: a contraction group's first node reads a computed value";
    t.operand_inputs.push_back(int(i));
  }
  for (size_t o = 0; o < body.outputs().size(); ++o) {
    if (body.outputs()[o] == first.outputs[0]) t.product_output = int(o);
  }
  if (t.product_output < 0) {
    const int product_arg = int(body.inputs().size());
    const int first_output_arg = product_arg + 1 + int(t.lowered.constants.size());
    t.product_output = inplace_output(*t.lowered.kernel, body, product_arg, first_output_arg);
  }
  return t;
}

}  // namespace smelt::codegen
