#include "codegen/emit_cpp.h"

#include <algorithm>
#include <sstream>

#include "base/parallel.h"
#include "codegen/emit_cpp_prelude.h"
#include "codegen/emit_cpp_text.h"
#include "smelt/error.h"

namespace smelt::codegen {
namespace {

using kernels::dtype_cpp_type;
using namespace emit;

// Elements of the innermost dim one parallel iteration of an elementwise kernel covers, when the
// dim is long (a multiple of every vector width, so blocks other than the last have no tail).
constexpr int64_t kBlock = 8192;
// Elements per block of an online sum of exponentials (ReduceOp::SumExp): the block's values wait
// in a stack buffer (4 KiB of float, in L1) between its maximum and its exponentials.
constexpr int64_t kSumExpBlock = 1024;

class Emitter {
 public:
  Emitter(const LoopKernel& k, std::string symbol, Dialect dialect) : k_(k), symbol_(std::move(symbol)) {
    sp_.dialect = dialect;
    // Each integer as a Num: a constant, or for a dynamic-shape kernel its polynomial.
    const SizeTerms* b = k.sizes ? &*k.sizes : nullptr;
    auto num = [&](int64_t v, const std::vector<SizePoly>* polys, size_t i) { return b ? (*polys)[i] : Num(v); };
    auto nums = [&](const std::vector<int64_t>& v, const std::vector<SizePoly>* polys) {
      std::vector<Num> r;
      for (size_t i = 0; i < v.size(); ++i) r.push_back(num(v[i], polys, i));
      return r;
    };
    outer_ = nums(k.outer, b ? &b->outer : nullptr);
    inner_ = nums(k.inner, b ? &b->inner : nullptr);
    for (size_t a = 0; a < k.accesses.size(); ++a) {
      const Access& acc = k.accesses[a];
      offset_.push_back(b ? num(acc.offset, &b->offset, a) : Num(acc.offset));
      outer_stride_.push_back(nums(acc.outer_strides, b ? &b->outer_strides[a] : nullptr));
      inner_stride_.push_back(nums(acc.inner_strides, b ? &b->inner_strides[a] : nullptr));
    }
  }

  std::string run() {
    out_ << kernel_prelude(sp_, k_, symbol_);
    out_ << sp_.entry(symbol_) << "(void* const* args) {\n";
    arguments();
    bool row_work = false;
    for (const Store& s : k_.stores) row_work |= s.stage == k_.stages;
    if (k_.stages == 1 && k_.reductions.empty() && !row_work && k_.folds.empty()) elementwise();
    else rows();
    out_ << "}\n";
    if (k_.tiled) tile_entry();
    return out_.str();
  }

 private:
  // The argument pointers a<i> and the constants e<i>, at the top of an entry.
  void arguments() {
    for (size_t i = 0; i < k_.args.size(); ++i) {
      const Arg& a = k_.args[i];
      const std::string t = dtype_cpp_type(a.dtype);
      const std::string q = a.output ? "" : "const ";
      out_ << "  " << sp_.unused() << q << t << "* a" << i << " = (" << q << t << "*)(args[" << i << "]);\n";
    }
    if (k_.sizes) {  // a dynamic-shape kernel: the sizes follow the buffers
      out_ << "  " << sp_.unused() << "const int64_t* const sizes = (const int64_t*)(args[" << k_.args.size()
           << "]);\n";
      for (size_t s = 0; s < k_.sizes->at.size(); ++s) {
        out_ << "  " << sp_.unused() << "const int64_t S" << s << " = sizes[" << s << "];\n";
      }
    }
    for (size_t e = 0; e < k_.exprs.size(); ++e) {
      if (k_.exprs[e].kind != ExprKind::Constant) continue;
      const SizeConstant* term = size_term(k_, int(e));
      out_ << "  " << sp_.unused() << "const " << dtype_cpp_type(k_.exprs[e].dtype) << " e" << e << " = "
           << (term ? size_constant_text(k_.exprs[e].dtype, term->value) : constant_text(sp_, k_.exprs[e]))
           << ";\n";
    }
    if (k_.sizes) {  // Call parameters that follow the batch size: q<expr>_<param>
      for (const SizeConstant& c : k_.sizes->constants) {
        if (c.param < 0) continue;
        out_ << "  " << sp_.unused() << "const double q" << c.expr << "_" << c.param << " = "
             << size_constant_text(DType::Float64, c.value) << ";\n";
      }
    }
  }

  // The names of expression `e`'s parameters that follow the batch size (arguments()), "" for the
  // others (printed as literals).
  std::vector<std::string> params(int e) const {
    std::vector<std::string> names;
    for (int p = 0; p < kernels::kMaxScalarParams; ++p) {
      names.push_back(size_term(k_, e, p) ? cat("q", e) + "_" + std::to_string(p) : "");
    }
    return names;
  }

  // The tile form's second entry (loop_kernel.h): rows [r0, r1) of the flattened outer dims,
  // columns [c0, c1) of the one inner dim, on the calling thread (a GEMM's worker: no OpenMP).
  void tile_entry() {
    out_ << "\n" << sp_.entry(symbol_)
         << "_tile(void* const* args, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {\n";
    arguments();
    Dims outer{outer_, outer_stride_};
    std::vector<Num> last;
    for (const auto& s : inner_stride_) last.push_back(s[0]);
    outer = merge_dims(outer);
    out_ << "  for (int64_t r = r0; r < r1; ++r) {\n";
    std::vector<std::string> names;
    unflatten("    ", "r", outer.extent, "p", &names);
    offsets("    ", "", nullptr, names, outer.stride);
    std::string pragma = simd_pragma(0);
    if (!pragma.empty()) out_ << "    " << pragma << "\n";
    out_ << "    for (int64_t i = c0; i < c1; ++i) {\n";
    body(0, "      ", "", "i", last);
    out_ << "    }\n  }\n}\n";
  }

  // Declares, for every access, its offset at the current point of the nest: x<a><suffix> =
  // (the access's offset, or x<a><from> when `from` is given) + sum index[d] * strides[a][d].
  void offsets(const std::string& indent, const std::string& suffix, const std::string* from,
               const std::vector<std::string>& index, const std::vector<std::vector<Num>>& strides) {
    for (size_t a = 0; a < k_.accesses.size(); ++a) {
      std::string v = from ? cat("x", a) + *from : offset_[a].text();
      for (size_t d = 0; d < index.size(); ++d) v = add_scaled(v, index[d], strides[a][d]);
      out_ << indent << sp_.unused() << "const int64_t " << cat("x", a) << suffix << " = " << v << ";\n";
    }
  }

  // Splits the flat index `flat` into one index per extent (row-major): p<prefix><d>.
  void unflatten(const std::string& indent, const std::string& flat, const std::vector<Num>& extent,
                 const std::string& prefix, std::vector<std::string>* names) {
    if (extent.empty()) return;
    out_ << indent << "int64_t rest = " << flat << ";\n";
    names->assign(extent.size(), "");
    for (int d = int(extent.size()) - 1; d >= 0; --d) {
      (*names)[d] = prefix + std::to_string(d);
      if (d == 0) {
        out_ << indent << "const int64_t " << (*names)[d] << " = rest;\n";
      } else {
        out_ << indent << "const int64_t " << (*names)[d] << " = rest % " << extent[d].text() << ";\n";
        out_ << indent << "rest /= " << extent[d].text() << ";\n";
      }
    }
  }

  // One iteration of `stage` at the offsets x<a><suffix> + index * innermost stride.
  void body(int stage, const std::string& indent, const std::string& suffix, const std::string& index,
            const std::vector<Num>& inner_stride) {
    auto at = [&](int access) {
      std::string base = cat("x", access) + suffix;
      return index.empty() ? base : add_scaled(base, index, inner_stride[access]);
    };
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      const Expr& e = k_.exprs[i];
      if (e.stage != stage || e.kind == ExprKind::Constant || hoisted_[i]) continue;
      out_ << indent << "const " << dtype_cpp_type(e.dtype) << " e" << i << " = ";
      switch (e.kind) {
        case ExprKind::Load:
          if (k_.accesses[e.access].index >= 0) out_ << gather_load_text(k_, e.access, e.dtype);
          else out_ << "a" << k_.accesses[e.access].arg << "[" << at(e.access) << "]";
          break;
        case ExprKind::ReductionResult: out_ << "r" << e.reduction; break;
        case ExprKind::Call: {
          const int arity = kernels::scalar_fn_info(e.call.fn).arity;
          std::vector<std::string> ops;
          for (int o : e.operands) ops.push_back(cat("e", o));
          out_ << sp_.call(e.call, k_.exprs[e.operands[arity == 3 ? 1 : 0]].dtype, ops, params(int(i)));
          break;
        }
        case ExprKind::Constant: break;
      }
      out_ << ";\n";
    }
    for (size_t r = 0; r < k_.reductions.size(); ++r) {
      const Reduction& red = k_.reductions[r];
      if (red.stage != stage) continue;
      if (red.op == ReduceOp::SumExp) {
        sumexp_fold(int(r), indent, index);
        continue;
      }
      out_ << indent << "r" << r << " = " << sp_.fn(reduce_fold_fn(red.op), red.dtype) << "(r" << r << ", e"
           << red.value << ");\n";
    }
    for (const Store& s : k_.stores) {
      if (s.stage != stage) continue;
      out_ << indent << "a" << k_.accesses[s.access].arg << "[" << at(s.access) << "] = e" << s.value << ";\n";
    }
  }

  // A SumExp's part of one iteration: inside a block loop (index `i`, the block starting at c0)
  // the value waits in the block's buffer and joins its maximum; without inner dims (no index)
  // the element is a block of its own.
  void sumexp_fold(int r, const std::string& indent, const std::string& index) {
    const int v = k_.reductions[r].value;
    const DType dt = k_.exprs[v].dtype;
    const std::string t = dtype_cpp_type(dt);
    if (!index.empty()) {
      out_ << indent << "vb" << r << "[" << index << " - c0] = e" << v << ";\n";
      out_ << indent << "bm" << r << " = " << sp_.fn("sumexp_block_max", dt) << "(bm" << r << ", e" << v << ");\n";
      return;
    }
    out_ << indent << "{\n" << indent << "  const " << t << " sh = " << sp_.fn("sumexp_rescale", dt) << "("
         << sp_.ref(cat("m", r)) << ", " << sp_.ref(cat("r", r)) << ", " << sp_.fn("sumexp_block_max", dt) << "(("
         << t << ")(-INFINITY), e" << v << "));\n";
    out_ << indent << "  r" << r << " += (double)(" << sp_.fn("exp_nonpositive", dt) << "((" << t << ")(e" << v
         << " - sh)));\n" << indent << "}\n";
  }

  bool has_sumexp(int stage) const {
    for (const Reduction& r : k_.reductions) {
      if (r.stage == stage && r.op == ReduceOp::SumExp) return true;
    }
    return false;
  }

  // Whether the iterations of `stage` are independent: every buffer the stage stores into is
  // read and written through one and the same access pattern (in place at most).
  bool simd_legal(int stage) const {
    std::vector<int> touched;
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      if (k_.exprs[i].stage == stage && k_.exprs[i].kind == ExprKind::Load) touched.push_back(k_.exprs[i].access);
    }
    for (const Store& s : k_.stores) {
      if (s.stage == stage) touched.push_back(s.access);
    }
    for (const Store& s : k_.stores) {
      if (s.stage != stage) continue;
      const Access& w = k_.accesses[s.access];
      for (int t : touched) {
        const Access& o = k_.accesses[t];
        if (o.arg == w.arg && (o.offset != w.offset || o.outer_strides != w.outer_strides ||
                               o.inner_strides != w.inner_strides)) {
          return false;
        }
      }
    }
    return true;
  }

  std::string simd_pragma(int stage) const {
    if (!simd_legal(stage)) return "";
    std::string p = "simd";
    for (size_t r = 0; r < k_.reductions.size(); ++r) {
      const Reduction& red = k_.reductions[r];
      if (red.stage != stage) continue;
      if (red.op == ReduceOp::SumExp) {
        p += " reduction(" + block_max_udr(k_.exprs[red.value].dtype) + " : bm" + std::to_string(r) + ")";
      } else {
        p += " reduction(" + udr_name(red) + " : r" + std::to_string(r) + ")";
      }
    }
    return sp_.omp(p);
  }

  // No reductions: one flat space; the innermost dim is the simd loop, cut into blocks when long,
  // and the blocks times the other dims are the parallel loop.
  void elementwise() {
    Dims all;
    all.extent = outer_;
    all.extent.insert(all.extent.end(), inner_.begin(), inner_.end());
    for (size_t a = 0; a < k_.accesses.size(); ++a) {
      std::vector<Num> s = outer_stride_[a];
      s.insert(s.end(), inner_stride_[a].begin(), inner_stride_[a].end());
      all.stride.push_back(s);
    }
    Dims m = merge_dims(all);
    if (m.extent.empty()) {  // a single element
      m.extent.push_back(1);
      for (auto& s : m.stride) s.push_back(0);
    }
    const Num n = m.extent.back();
    std::vector<Num> par(m.extent.begin(), m.extent.end() - 1);
    std::vector<Num> last;
    std::vector<std::vector<Num>> strides;
    for (auto& s : m.stride) {
      strides.emplace_back(s.begin(), s.end() - 1);
      last.push_back(s.back());
    }
    if (!n.constant() || !product(par).constant()) return elementwise_dynamic(n, par, strides, last);
    const int64_t block = n.value() > 2 * kBlock ? kBlock : n.value();
    const int64_t blocks = block == 0 ? 0 : (n.value() + block - 1) / block;
    const int64_t iterations = product(par).value() * blocks;
    if (product(par).value() * n.value() >= kParallelGrain && iterations > 1) {
      out_ << "  " << sp_.omp("parallel for schedule(static)") << "\n";
    }
    out_ << "  for (int64_t t = 0; t < " << iterations << "; ++t) {\n";
    std::vector<std::string> names;
    unflatten("    ", blocks > 1 ? "t / " + std::to_string(blocks) : "t", par, "p", &names);
    std::string trip = std::to_string(block);
    if (blocks > 1) {
      out_ << "    const int64_t blk = t % " << blocks << ";\n";
      names.push_back("blk");
      for (size_t a = 0; a < strides.size(); ++a) strides[a].push_back(Num(block) * last[a]);
      if (n.value() % block != 0) {
        trip = "(blk == " + std::to_string(blocks - 1) + " ? " + std::to_string(n.value() - (blocks - 1) * block) +
               " : " + std::to_string(block) + ")";
      }
    }
    offsets("    ", "", nullptr, names, strides);
    std::string pragma = simd_pragma(0);
    if (!pragma.empty()) out_ << "    " << pragma << "\n";
    out_ << "    for (int64_t i = 0; i < " << trip << "; ++i) {\n";
    body(0, "      ", "", "i", last);
    out_ << "    }\n  }\n";
  }

  // elementwise() for extents that depend on the batch size: the same loops, the blocks and the
  // decision to run in parallel computed at run time.
  void elementwise_dynamic(const Num& n, const std::vector<Num>& par, std::vector<std::vector<Num>> strides,
                           const std::vector<Num>& last) {
    out_ << "  const int64_t n = " << n.text() << ";\n";
    out_ << "  const int64_t block = n > " << 2 * kBlock << " ? " << kBlock << " : n;\n";
    out_ << "  const int64_t blocks = block == 0 ? 0 : (n + block - 1) / block;\n";
    out_ << "  const int64_t rows = " << product(par).text() << ";\n";
    out_ << "  #pragma omp parallel for schedule(static) if (rows * n >= " << kParallelGrain
         << " && rows * blocks > 1)\n";
    out_ << "  for (int64_t t = 0; t < rows * blocks; ++t) {\n";
    std::vector<std::string> names;
    unflatten("    ", "t / blocks", par, "p", &names);
    out_ << "    const int64_t blk = t % blocks;\n    const int64_t start = blk * block;\n";
    names.push_back("start");
    for (size_t a = 0; a < strides.size(); ++a) strides[a].push_back(last[a]);
    offsets("    ", "", nullptr, names, strides);
    std::string pragma = simd_pragma(0);
    if (!pragma.empty()) out_ << "    " << pragma << "\n";
    out_ << "    for (int64_t i = 0; i < (blk == blocks - 1 ? n - start : block); ++i) {\n";
    body(0, "      ", "", "i", last);
    out_ << "    }\n  }\n";
  }

  // Reductions: the outer dims are the parallel loop; per row, each stage loops over the inner
  // dims, then the row expressions run.
  void rows() {
    Dims outer{outer_, outer_stride_}, inner{inner_, inner_stride_};
    outer = merge_dims(outer);
    inner = merge_dims(inner);
    const Num rows = product(outer.extent), per_row = product(inner.extent);
    emit_fold_scratch(out_, sp_, k_, rows);
    if (rows.constant() && per_row.constant()) {
      if (rows.value() > 1 && rows.value() * per_row.value() * k_.stages >= kParallelGrain) {
        out_ << "  " << sp_.omp("parallel for schedule(static)") << "\n";
      }
    } else {  // a dynamic batch: the same decision at run time
      out_ << "  #pragma omp parallel for schedule(static) if (" << rows.text() << " > 1 && " << rows.text()
           << " * " << per_row.text() << " * " << k_.stages << " >= " << kParallelGrain << ")\n";
    }
    out_ << "  for (int64_t o = 0; o < " << rows.text() << "; ++o) {\n";
    std::vector<std::string> names;
    unflatten("    ", "o", outer.extent, "p", &names);
    offsets("    ", "", nullptr, names, outer.stride);
    for (size_t r = 0; r < k_.reductions.size(); ++r) {
      const Reduction& red = k_.reductions[r];
      out_ << "    " << dtype_cpp_type(red.dtype) << " r" << r << " = " << reduce_start(sp_, red.op, red.dtype) << ";\n";
      if (red.op == ReduceOp::SumExp) {
        const std::string t = dtype_cpp_type(k_.exprs[red.value].dtype);
        out_ << "    " << t << " m" << r << " = (" << t << ")(-INFINITY);\n";
        if (!inner.extent.empty()) {
          const Num& n = inner.extent.back();
          out_ << "    " << t << " vb" << r << "["
               << (n.constant() ? std::max<int64_t>(1, std::min(kSumExpBlock, n.value())) : kSumExpBlock) << "];\n";
        }
      }
    }
    const int levels = int(inner.extent.size());
    const std::vector<bool> invariant = row_invariant_exprs(k_);
    for (int s = 0; s < k_.stages; ++s) {
      out_ << "    {  // stage " << s << "\n";
      std::string indent = "      ", suffix;
      // Row-invariant values once per row, before the stage's loops (a libm call such as log
      // inside them would also keep the loop from vectorizing).
      if (levels > 0) {
        hoisted_.assign(k_.exprs.size(), false);
        for (size_t i = 0; i < k_.exprs.size(); ++i) hoisted_[i] = k_.exprs[i].stage == s && invariant[i];
        std::vector<bool> keep = hoisted_;
        hoisted_.assign(k_.exprs.size(), false);
        body_exprs(s, indent, keep);
        hoisted_ = keep;
      }
      for (int l = 0; l + 1 < levels; ++l) {
        out_ << indent << "for (int64_t i" << l << " = 0; i" << l << " < " << inner.extent[l].text() << "; ++i" << l
             << ") {\n";
        indent += "  ";
        std::vector<std::vector<Num>> st;
        for (auto& v : inner.stride) st.push_back({v[l]});
        offsets(indent, cat("_", l), &suffix, {cat("i", l)}, st);
        suffix = cat("_", l);
      }
      if (levels == 0) {
        body(s, indent, suffix, "", {});
      } else if (has_sumexp(s)) {
        std::vector<Num> last;
        for (auto& v : inner.stride) last.push_back(v.back());
        sumexp_blocks(s, indent, suffix, cat("i", levels - 1), inner.extent.back(), last);
      } else {
        std::string pragma = simd_pragma(s);
        if (!pragma.empty()) out_ << indent << pragma << "\n";
        const std::string i = cat("i", levels - 1);
        out_ << indent << "for (int64_t " << i << " = 0; " << i << " < " << inner.extent.back().text() << "; ++" << i
             << ") {\n";
        std::vector<Num> last;
        for (auto& v : inner.stride) last.push_back(v.back());
        body(s, indent + "  ", suffix, i, last);
        out_ << indent << "}\n";
      }
      for (int l = levels - 2; l >= 0; --l) {
        indent.resize(indent.size() - 2);
        out_ << indent << "}\n";
      }
      out_ << "    }\n";
    }
    hoisted_.assign(k_.exprs.size(), false);
    body(k_.stages, "    ", "", "", {});
    emit_fold_rows(out_, k_);
    out_ << "  }\n";
    emit_finish_folds(out_, sp_, k_, rows, offset_);
  }

  // The expressions of `stage` selected by `only` (Calls and ReductionResults), outside any loop.
  void body_exprs(int stage, const std::string& indent, const std::vector<bool>& only) {
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      const Expr& e = k_.exprs[i];
      if (e.stage != stage || e.kind == ExprKind::Constant || !only[i]) continue;
      out_ << indent << "const " << dtype_cpp_type(e.dtype) << " e" << i << " = ";
      if (e.kind == ExprKind::ReductionResult) {
        out_ << "r" << e.reduction;
      } else if (e.kind == ExprKind::Load) {  // one element per row: the row's own offset
        out_ << "a" << k_.accesses[e.access].arg << "[x" << e.access << "]";
      } else {
        const int arity = kernels::scalar_fn_info(e.call.fn).arity;
        std::vector<std::string> ops;
        for (int o : e.operands) ops.push_back(cat("e", o));
        out_ << sp_.call(e.call, k_.exprs[e.operands[arity == 3 ? 1 : 0]].dtype, ops, params(int(i)));
      }
      out_ << ";\n";
    }
  }

  // The innermost loop of a stage with SumExp reductions, cut into blocks: each block's loop runs
  // the stage and gathers the values and their maximum, then every SumExp rescales its sum and
  // adds the block's exponentials (a second, vectorized loop over the buffer, in L1).
  void sumexp_blocks(int stage, const std::string& indent, const std::string& suffix, const std::string& i,
                     const Num& num, const std::vector<Num>& last) {
    const int64_t block = num.constant() ? std::min(kSumExpBlock, num.value()) : kSumExpBlock;
    const std::string in = indent + "  ", n = num.text();
    out_ << indent << "for (int64_t c0 = 0; c0 < " << n << "; c0 += " << block << ") {\n";
    if (num.constant() && num.value() % block == 0) out_ << in << "const int64_t cn = " << block << ";\n";
    else out_ << in << "const int64_t cn = " << n << " - c0 < " << block << " ? " << n << " - c0 : " << block << ";\n";
    for (size_t r = 0; r < k_.reductions.size(); ++r) {
      const Reduction& red = k_.reductions[r];
      if (red.stage != stage || red.op != ReduceOp::SumExp) continue;
      const std::string t = dtype_cpp_type(k_.exprs[red.value].dtype);
      out_ << in << t << " bm" << r << " = (" << t << ")(-INFINITY);\n";
    }
    std::string pragma = simd_pragma(stage);
    if (!pragma.empty()) out_ << in << pragma << "\n";
    out_ << in << "for (int64_t " << i << " = c0; " << i << " < c0 + cn; ++" << i << ") {\n";
    body(stage, in + "  ", suffix, i, last);
    out_ << in << "}\n";
    for (size_t r = 0; r < k_.reductions.size(); ++r) {
      const Reduction& red = k_.reductions[r];
      if (red.stage != stage || red.op != ReduceOp::SumExp) continue;
      const DType dt = k_.exprs[red.value].dtype;
      const std::string t = dtype_cpp_type(dt), R = std::to_string(r);
      out_ << in << "{\n";
      out_ << in << "  const " << t << " sh = " << sp_.fn("sumexp_rescale", dt) << "(" << sp_.ref("m" + R) << ", "
           << sp_.ref("r" + R) << ", bm" << R << ");\n";
      out_ << in << "  double part = 0;\n";
      out_ << in << "  " << sp_.omp("simd reduction(+ : part)") << "\n";
      out_ << in << "  for (int64_t j = 0; j < cn; ++j) part += (double)(" << sp_.fn("exp_nonpositive", dt) << "(("
           << t << ")(vb" << R << "[j] - sh)));\n";
      out_ << in << "  r" << R << " += part;\n" << in << "}\n";
    }
    out_ << indent << "}\n";
  }

  const LoopKernel& k_;
  std::string symbol_;
  Spelling sp_;
  // The kernel's integers (loop_kernel.h) as Nums: constants, or polynomials (LoopKernel::sizes).
  std::vector<Num> outer_, inner_, offset_;
  std::vector<std::vector<Num>> outer_stride_, inner_stride_;  // [access][dim]
  std::vector<bool> hoisted_ = std::vector<bool>(k_.exprs.size(), false);  // emitted before the loops
  std::ostringstream out_;
};

}  // namespace

namespace {
void check_symbol(const std::string& symbol) {
  SMELT_CHECK(!symbol.empty() && symbol.find_first_not_of(
                                     "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
                                     std::string::npos)
      << "emit_cpp: symbol '" << symbol << "' is not a C identifier; valid: letters, digits, _";
}
}  // namespace

std::string emit_cpp(const LoopKernel& kernel, const std::string& symbol) {
  check_symbol(symbol);
  return Emitter(kernel, symbol, Dialect::Cpp).run();
}

std::string emit_c(const LoopKernel& kernel, const std::string& symbol) {
  check_symbol(symbol);
  SMELT_CHECK(!kernel.sizes) << "emit_c: kernel " << kernel.name
                             << " has symbolic sizes; the C export takes fixed shapes only";
  return Emitter(kernel, symbol, Dialect::C).run();
}

}  // namespace smelt::codegen
