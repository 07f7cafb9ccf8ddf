#include "codegen/emit_cpp_prelude.h"

#include <set>
#include <sstream>

#include "codegen/emit_cpp_text.h"

namespace smelt::codegen::emit {
namespace {

using kernels::dtype_cpp_type;

// C++ only: the #includes and the helpers every kernel shares (the C export's prelude has its own).
void headers(std::ostream& out, const LoopKernel& k) {
  // scalar.h first: it must compile on its own (it includes the standard headers it uses)
  out << "#include \"kernels/scalar.h\"\n\n#include <cstdint>\n#include <cstring>\n#include <limits>\n";
  if (!k.folds.empty()) out << "#include <vector>\n";  // the folds' per-row values
  out << "\n";
  out << "#ifndef SMELT_KERNEL_PRELUDE\n#define SMELT_KERNEL_PRELUDE\n"
      << "namespace {\n[[maybe_unused]] inline double smelt_f64_from_bits(uint64_t b) {\n"
      << "  double d;\n  std::memcpy(&d, &b, sizeof d);\n  return d;\n}\n}  // namespace\n#endif\n\n";
}

// The OpenMP user-defined reductions the kernel's loops name.
void reductions(std::ostream& out, const Spelling& sp, const LoopKernel& k) {
  std::set<std::string> declared;
  for (const Reduction& r : k.reductions) {
    if (r.op == ReduceOp::SumExp) {
      const DType v = k.exprs[r.value].dtype;
      const std::string t = dtype_cpp_type(v);
      const std::string name = block_max_udr(v);
      if (!declared.insert(name).second) continue;
      out << "#ifndef SMELT_UDR_" << name << "\n#define SMELT_UDR_" << name << "\n";
      out << sp.omp("declare reduction(" + name + " : " + t + " : omp_out = " + sp.fn("sumexp_block_max", v) +
                    "(omp_out, omp_in)) initializer(omp_priv = (" + t + ")(-INFINITY))")
          << "\n#endif\n";
      continue;
    }
    const std::string name = udr_name(r);
    if (!declared.insert(name).second) continue;
    const std::string t = dtype_cpp_type(r.dtype);
    out << "#ifndef SMELT_UDR_" << name << "\n#define SMELT_UDR_" << name << "\n";
    out << sp.omp("declare reduction(" + name + " : " + t + " : omp_out = " + sp.fn(reduce_fold_fn(r.op), r.dtype) +
                  "(omp_out, omp_in)) initializer(omp_priv = " + reduce_start(sp, r.op, r.dtype) + ")")
        << "\n#endif\n";
  }
  if (!declared.empty()) out << "\n";
}

}  // namespace

std::string kernel_prelude(const Spelling& sp, const LoopKernel& k, const std::string& symbol) {
  std::ostringstream out;
  out << "// smelt generated kernel " << symbol << ": " << k.name << "\n";
  std::istringstream comment(k.comment);
  for (std::string line; std::getline(comment, line);) out << "// " << line << "\n";
  out << "/* loop kernel:\n" << print_kernel(k) << "*/\n";
  if (sp.dialect == Dialect::Cpp) headers(out, k);
  reductions(out, sp, k);
  return out.str();
}

}  // namespace smelt::codegen::emit
