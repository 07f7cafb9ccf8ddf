// The C++ emitter's pieces for work across rows (emit_cpp_text.h): nll_loss's gather and the
// folds of row values over the rows (codegen/loop_kernel.h).
#include "codegen/emit_cpp_text.h"

#include "smelt/error.h"

namespace smelt::codegen::emit {

using kernels::dtype_cpp_type;

std::string gather_load_text(const LoopKernel& k, int access, DType dtype) {
  const Access& a = k.accesses[size_t(access)];
  const std::string v = cat("a", k.accesses[size_t(a.index)].arg) + "[" + cat("x", a.index) + "]";
  return "((uint64_t)(" + v + ") < (uint64_t)(" + std::to_string(a.index_extent) + ") ? " + cat("a", a.arg) + "[" +
         add_scaled(cat("x", access), v, Num(a.index_stride)) + "] : (" + dtype_cpp_type(dtype) + ")(0))";
}

void emit_fold_scratch(std::ostream& out, const Spelling& sp, const LoopKernel& k, const Num& rows) {
  if (k.folds.empty()) return;
  if (sp.dialect == Dialect::C) {  // the export's shapes are fixed: on the stack (reentrant), bounded
    const int64_t n = rows.value() * int64_t(k.folds.size()) * 2;
    SMELT_CHECK(n <= 8192) << "emit_c: kernel " << k.name << " folds " << rows.value()
                           << " rows, whose partial results would take " << n * 8
                           << " bytes of stack; at most 4096 rows per fold are exported";
    out << "  double fr[" << n << " + 1];\n";
    return;
  }
  // per row and fold: value and count; thread_local, so a warm kernel allocates nothing
  out << "  static thread_local std::vector<double> fold_rows;\n";
  out << "  fold_rows.resize(size_t(" << rows.text() << ") * " << k.folds.size() * 2 << ");\n";
  out << "  double* const fr = fold_rows.data();\n";
}

void emit_fold_rows(std::ostream& out, const LoopKernel& k) {
  const size_t nf = k.folds.size();
  for (size_t i = 0; i < nf; ++i) {
    const RowFold& f = k.folds[i];
    out << "    fr[(o * " << nf << " + " << i << ") * 2] = e" << f.value << ";\n";
    out << "    fr[(o * " << nf << " + " << i << ") * 2 + 1] = " << (f.count >= 0 ? cat("e", f.count) : "0.0") << ";\n";
  }
}

void emit_finish_folds(std::ostream& out, const Spelling& sp, const LoopKernel& k, const Num& rows,
                       const std::vector<Num>& offsets) {
  const size_t nf = k.folds.size();
  for (size_t i = 0; i < nf; ++i) {
    const RowFold& f = k.folds[i];
    const Access& a = k.accesses[size_t(f.access)];
    out << "  {\n    double total = 0, count = 0;\n";
    out << "    for (int64_t o = 0; o < " << rows.text() << "; ++o) {\n";
    out << "      total += fr[(o * " << nf << " + " << i << ") * 2];\n";
    out << "      count += fr[(o * " << nf << " + " << i << ") * 2 + 1];\n    }\n";
    out << "    a" << a.arg << "[" << offsets[size_t(f.access)].text()
        << "] = " << sp.cast(k.args[size_t(a.arg)].dtype, DType::Float64, f.count >= 0 ? "total / count" : "total")
        << ";\n  }\n";
  }
}

}  // namespace smelt::codegen::emit
