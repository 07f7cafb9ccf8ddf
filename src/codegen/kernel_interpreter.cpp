#include "codegen/kernel_interpreter.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

#include "base/parallel.h"
#include "kernels/scalar.h"
#include "smelt/error.h"

namespace smelt::codegen {
namespace {

using kernels::ScalarDTypes;
using kernels::ScalarFn;
using kernels::ScalarFnInfo;
using kernels::ScalarResult;

constexpr int64_t kTile = 256;
constexpr int kMaxTileDims = 16;

// kernels::scalar_dtypes_visit; lowering only hands over dtypes the rows accept.
template <ScalarDTypes kAccepts, class F>
void visit_dtype(DType dtype, F&& f) {
  SMELT_INTERNAL_CHECK(kernels::scalar_dtypes_visit<kAccepts>(dtype, f))
      << "kernel interpreter: dtype " << dtype_name(dtype) << " is not accepted here";
}

// What a kernel looks like to the interpreter: expression lists per stage, the dims a tile walks.
struct TilePlan {
  const LoopKernel* k;
  bool elementwise;  // one stage, no reductions, nothing per row: tiles span outer and inner dims
  std::vector<std::vector<int>> stage_exprs;  // per stage (last: row), constants excluded
  std::vector<int> constants;
  std::vector<bool> invariant;        // row_invariant_exprs: evaluated in a stage's first tile only
  std::vector<int64_t> tile_dims;     // the dims a tile index runs over, row-major
  std::vector<int64_t> tile_strides;  // [access * kMaxTileDims + d]: each access's stride along them
};

// Per-chunk scratch: one kTile vector per expression, one per access's offsets, accumulators.
struct Frame {
  std::vector<uint64_t> values;  // expression e's vector starts at values[e * kTile]
  std::vector<int64_t> offsets;  // access a's offsets start at offsets[a * kTile]
  std::vector<int64_t> base;     // per access: the offset of the current row
  std::vector<uint64_t> accs;    // per reduction: the accumulator's bytes
  std::vector<uint64_t> maxes;   // per SumExp reduction: its running maximum's bytes
  std::vector<uint8_t> gathered;  // per gather access: whether this row's index is in range

  template <class T> T* slot(int e) { return reinterpret_cast<T*>(&values[size_t(e) * kTile]); }
  template <class T> T& acc(int r) { return *reinterpret_cast<T*>(&accs[r]); }
  template <class T> T& running_max(int r) { return *reinterpret_cast<T*>(&maxes[r]); }
};

// Offsets of tile indices [t0, t0 + n) for every access, from each access's row base; the row
// stage addresses the row base alone. Runs along the innermost dim are filled linearly.
void tile_offsets(const TilePlan& p, Frame& f, int64_t t0, int64_t n, bool row) {
  const LoopKernel& k = *p.k;
  const int nd = int(p.tile_dims.size());
  if (row || nd == 0) {  // one position: the row (or the whole dimensionless space)
    for (size_t a = 0; a < k.accesses.size(); ++a) f.offsets[a * kTile] = f.base[a];
    return;
  }
  int64_t idx[kMaxTileDims] = {};
  int64_t rest = t0;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rest % p.tile_dims[d];
    rest /= p.tile_dims[d];
  }
  for (size_t a = 0; a < k.accesses.size(); ++a) {
    const int64_t* stride = &p.tile_strides[a * kMaxTileDims];
    int64_t off = f.base[a];
    for (int d = 0; d < nd; ++d) off += idx[d] * stride[d];
    int64_t* out = &f.offsets[a * kTile];
    int64_t id[kMaxTileDims];
    std::copy(idx, idx + nd, id);
    const int64_t last = p.tile_dims[nd - 1], step = stride[nd - 1];
    for (int64_t j = 0; j < n;) {
      const int64_t run = std::min(n - j, last - id[nd - 1]);
      for (int64_t r = 0; r < run; ++r) out[j + r] = off + r * step;
      j += run;
      off += run * step;
      id[nd - 1] += run;
      for (int d = nd - 1; d > 0 && id[d] == p.tile_dims[d]; --d) {  // carry into the outer dims
        off += stride[d - 1] - id[d] * stride[d];
        id[d] = 0;
        ++id[d - 1];
      }
    }
  }
}

template <class T>
void fill(T* dst, T v, int64_t n) {
  std::fill(dst, dst + n, v);
}

void eval_call(const LoopKernel& k, Frame& f, int e, int64_t n) {
  const Expr& ex = k.exprs[e];
  kernels::scalar_fn_visit(ex.call.fn, [&](auto fn, auto id) {
    constexpr ScalarFn kFn = decltype(id)::value;
    constexpr ScalarFnInfo kInfo = kernels::kScalarFnInfo[int(kFn)];
    if constexpr (kFn == ScalarFn::cast) {
      visit_dtype<ScalarDTypes::All>(ex.dtype, [&](auto to_tag) {
        using To = decltype(to_tag);
        visit_dtype<ScalarDTypes::All>(k.exprs[ex.operands[0]].dtype, [&](auto from_tag) {
          using From = decltype(from_tag);
          const From* x = f.slot<From>(ex.operands[0]);
          To* out = f.slot<To>(e);
          for (int64_t j = 0; j < n; ++j) out[j] = scalar::cast<To>(x[j]);
        });
      });
    } else {
      const DType value = k.exprs[ex.operands[kInfo.arity == 3 ? 1 : 0]].dtype;
      visit_dtype<kInfo.dtypes>(value, [&](auto tag) {
        using T = decltype(tag);
        using R = std::conditional_t<kInfo.result == ScalarResult::Bool, bool, T>;
        R* out = f.slot<R>(e);
        // parameters bind as the eager loops bind them: through scalar::cast
        [[maybe_unused]] const T p0 = scalar::cast<T>(ex.call.params[0]);
        [[maybe_unused]] const T p1 = scalar::cast<T>(ex.call.params[1]);
        if constexpr (kInfo.arity == 1) {
          const T* a = f.slot<T>(ex.operands[0]);
          if constexpr (kInfo.params == 0) for (int64_t j = 0; j < n; ++j) out[j] = fn(a[j]);
          else if constexpr (kInfo.params == 1) for (int64_t j = 0; j < n; ++j) out[j] = fn(a[j], p0);
          else for (int64_t j = 0; j < n; ++j) out[j] = fn(a[j], p0, p1);
        } else if constexpr (kInfo.arity == 2) {
          const T* a = f.slot<T>(ex.operands[0]);
          const T* b = f.slot<T>(ex.operands[1]);
          for (int64_t j = 0; j < n; ++j) out[j] = fn(a[j], b[j]);
        } else {
          const bool* c = f.slot<bool>(ex.operands[0]);
          const T* a = f.slot<T>(ex.operands[1]);
          const T* b = f.slot<T>(ex.operands[2]);
          for (int64_t j = 0; j < n; ++j) out[j] = fn(c[j], a[j], b[j]);
        }
      });
    }
  });
}

void eval_expr(const LoopKernel& k, Frame& f, void* const* args, int e, int64_t n) {
  const Expr& ex = k.exprs[e];
  switch (ex.kind) {
    case ExprKind::Load:
      visit_dtype<ScalarDTypes::All>(ex.dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* src = static_cast<const T*>(args[k.accesses[ex.access].arg]);
        const int64_t* off = &f.offsets[size_t(ex.access) * kTile];
        T* out = f.slot<T>(e);
        if (k.accesses[ex.access].index >= 0 && !f.gathered[size_t(ex.access)]) {
          fill(out, T(0), n);  // an index out of range (an ignored target) loads 0
          return;
        }
        if constexpr (std::is_same_v<T, bool>) {
          // A bool's byte read as a byte: memory holding anything else than 0 or 1 (a planner bug
          // the fuzzer provokes on purpose) gives true, not undefined behaviour.
          const uint8_t* bytes = reinterpret_cast<const uint8_t*>(src);
          for (int64_t j = 0; j < n; ++j) out[j] = bytes[off[j]] != 0;
        } else {
          for (int64_t j = 0; j < n; ++j) out[j] = src[off[j]];
        }
      });
      break;
    case ExprKind::Call: eval_call(k, f, e, n); break;
    case ExprKind::ReductionResult:
      visit_dtype<ScalarDTypes::Numeric>(ex.dtype, [&](auto tag) {
        using T = decltype(tag);
        fill(f.slot<T>(e), f.acc<T>(ex.reduction), n);
      });
      break;
    case ExprKind::Constant: break;  // filled once per frame
  }
}

template <class T>
T reduce_start(ReduceOp op) {
  if (op == ReduceOp::Sum || op == ReduceOp::SumExp) return T(0);
  return op == ReduceOp::Max ? scalar::extreme_identity<T, true>() : scalar::extreme_identity<T, false>();
}

// SumExp: the tile is one block of the online sum (scalar::sumexp_*).
void fold_sumexp(const LoopKernel& k, Frame& f, int r, int64_t n) {
  const Reduction& red = k.reductions[r];
  visit_dtype<ScalarDTypes::Floating>(k.exprs[red.value].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* v = f.slot<T>(red.value);
    T block_max = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < n; ++j) block_max = scalar::sumexp_block_max(block_max, v[j]);
    const T shift = scalar::sumexp_rescale(f.running_max<T>(r), f.acc<double>(r), block_max);
    double part = 0;
    // v - shift <= 0 or NaN: shift is the running maximum, which includes this block's
    for (int64_t j = 0; j < n; ++j) part += double(scalar::exp_nonpositive(T(v[j] - shift)));
    f.acc<double>(r) += part;
  });
}

void fold(const LoopKernel& k, Frame& f, int r, int64_t n) {
  const Reduction& red = k.reductions[r];
  if (red.op == ReduceOp::SumExp) return fold_sumexp(k, f, r, n);
  visit_dtype<ScalarDTypes::Numeric>(red.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* v = f.slot<T>(red.value);
    T acc = f.acc<T>(r);
    switch (red.op) {
      case ReduceOp::Sum: for (int64_t j = 0; j < n; ++j) acc = scalar::add(acc, v[j]); break;
      case ReduceOp::Max: for (int64_t j = 0; j < n; ++j) acc = scalar::maximum(acc, v[j]); break;
      case ReduceOp::Min: for (int64_t j = 0; j < n; ++j) acc = scalar::minimum(acc, v[j]); break;
      case ReduceOp::SumExp: break;  // fold_sumexp
    }
    f.acc<T>(r) = acc;
  });
}

void store(const LoopKernel& k, Frame& f, void* const* args, const Store& s, int64_t n) {
  visit_dtype<ScalarDTypes::All>(k.exprs[s.value].dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dst = static_cast<T*>(args[k.accesses[s.access].arg]);
    const int64_t* off = &f.offsets[size_t(s.access) * kTile];
    const T* v = f.slot<T>(s.value);
    for (int64_t j = 0; j < n; ++j) dst[off[j]] = v[j];
  });
}

// One stage (or the row stage, stage == k.stages, as a tile of one) over tile indices [begin, end).
void run_stage(const TilePlan& p, Frame& f, void* const* args, int stage, int64_t begin, int64_t end) {
  const LoopKernel& k = *p.k;
  for (size_t r = 0; r < k.reductions.size(); ++r) {
    if (k.reductions[r].stage != stage) continue;
    visit_dtype<ScalarDTypes::Numeric>(k.reductions[r].dtype,
                                       [&](auto tag) { f.acc<decltype(tag)>(int(r)) = reduce_start<decltype(tag)>(k.reductions[r].op); });
    if (k.reductions[r].op == ReduceOp::SumExp) {
      visit_dtype<ScalarDTypes::Floating>(k.exprs[k.reductions[r].value].dtype, [&](auto tag) {
        f.running_max<decltype(tag)>(int(r)) = -std::numeric_limits<decltype(tag)>::infinity();
      });
    }
  }
  for (int64_t t0 = begin; t0 < end; t0 += kTile) {
    const int64_t n = std::min(kTile, end - t0);
    tile_offsets(p, f, t0, n, stage == k.stages);
    for (int e : p.stage_exprs[stage]) {
      // A row-invariant value stays in its slot from the stage's first tile (the longest one).
      if (t0 == begin || !p.invariant[size_t(e)]) eval_expr(k, f, args, e, n);
    }
    for (size_t r = 0; r < k.reductions.size(); ++r) {
      if (k.reductions[r].stage == stage) fold(k, f, int(r), n);
    }
    for (const Store& s : k.stores) {
      if (s.stage == stage) store(k, f, args, s, n);
    }
  }
}

// The calling thread's scratch, sized for `p` (reused across calls: no allocation once warm),
// with the constants' vectors filled.
Frame& frame_for(const TilePlan& p) {
  thread_local Frame f;
  const LoopKernel& k = *p.k;
  f.values.resize(std::max(f.values.size(), k.exprs.size() * kTile));
  f.offsets.resize(std::max(f.offsets.size(), k.accesses.size() * kTile));
  f.base.resize(std::max(f.base.size(), k.accesses.size()));
  f.accs.resize(std::max(f.accs.size(), k.reductions.size()));
  f.maxes.resize(std::max(f.maxes.size(), k.reductions.size()));
  f.gathered.resize(std::max(f.gathered.size(), k.accesses.size()));
  for (int e : p.constants) {
    const Expr& ex = k.exprs[e];
    visit_dtype<ScalarDTypes::All>(ex.dtype, [&](auto tag) {
      using T = decltype(tag);
      T v = dtype_is_floating(ex.dtype) ? T(ex.fvalue) : scalar::cast<T>(ex.ivalue);
      fill(f.slot<T>(e), v, kTile);
    });
  }
  return f;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t e : v) n *= e;
  return n;
}

// Each access's offset at outer index `o` (row-major over k.outer): the base of that row; a
// gather's moves by the row's index (read through its plain index access, based first).
void row_base(const LoopKernel& k, Frame& f, int64_t o, void* const* args) {
  for (size_t a = 0; a < k.accesses.size(); ++a) {
    const Access& acc = k.accesses[a];
    int64_t off = acc.offset, rest = o;
    for (int d = int(k.outer.size()) - 1; d >= 0; --d) {
      off += (rest % k.outer[d]) * acc.outer_strides[d];
      rest /= k.outer[d];
    }
    f.base[a] = off;
  }
  for (size_t a = 0; a < k.accesses.size(); ++a) {
    const Access& acc = k.accesses[a];
    if (acc.index < 0) continue;
    const Access& ix = k.accesses[size_t(acc.index)];
    const int64_t v = static_cast<const int64_t*>(args[ix.arg])[f.base[size_t(acc.index)]];
    f.gathered[a] = v >= 0 && v < acc.index_extent;
    if (f.gathered[a]) f.base[a] += v * acc.index_stride;
  }
}

// The folds' totals over the rows' values (`rows`: per row, per fold, value and count), in row
// order, stored converted to the output's dtype.
void finish_folds(const LoopKernel& k, void* const* args, const std::vector<double>& rows, int64_t outer) {
  const size_t nf = k.folds.size();
  for (size_t i = 0; i < nf; ++i) {
    const RowFold& fold = k.folds[i];
    double total = 0, count = 0;
    for (int64_t o = 0; o < outer; ++o) {
      total += rows[(size_t(o) * nf + i) * 2];
      count += rows[(size_t(o) * nf + i) * 2 + 1];
    }
    const double v = fold.count >= 0 ? total / count : total;
    const Access& a = k.accesses[size_t(fold.access)];
    visit_dtype<ScalarDTypes::All>(k.args[size_t(a.arg)].dtype, [&](auto tag) {
      using T = decltype(tag);
      static_cast<T*>(args[a.arg])[a.offset] = scalar::cast<T>(v);
    });
  }
}

}  // namespace

struct InterpretedKernel::Program {
  LoopKernel kernel;
  TilePlan tiles;
  TilePlan row_tiles;  // tiled kernels: tiles along the inner (column) dim of one row
  int64_t outer = 1, inner = 1;
};

// Programs of a dynamic-shape kernel at sizes other than its own, made on first use; the most
// recently made few are kept (a kernel shared by plans at several sizes).
struct InterpretedKernel::Sized {
  std::mutex mutex;
  std::vector<std::shared_ptr<const Program>> programs;  // most recent last
};

InterpretedKernel::InterpretedKernel(LoopKernel kernel) : program_(prepare(std::move(kernel))) {
  if (program_->kernel.sizes) sized_ = std::make_shared<Sized>();
}

std::shared_ptr<const InterpretedKernel::Program> InterpretedKernel::prepare(LoopKernel kernel) {
  auto made = std::make_shared<Program>();
  Program& plan = *made;
  plan.kernel = std::move(kernel);
  const LoopKernel& k = plan.kernel;
  TilePlan& p = plan.tiles;
  p.k = &k;
  p.stage_exprs.resize(k.stages + 1);
  p.invariant = row_invariant_exprs(k, /*loads=*/false);
  bool row_work = false;
  for (int e = 0; e < int(k.exprs.size()); ++e) {
    if (k.exprs[e].kind == ExprKind::Constant) p.constants.push_back(e);
    else p.stage_exprs[k.exprs[e].stage].push_back(e);
  }
  for (const Store& s : k.stores) row_work |= s.stage == k.stages;
  p.elementwise = k.stages == 1 && k.reductions.empty() && !row_work && k.folds.empty();
  SMELT_INTERNAL_CHECK(k.outer.size() + k.inner.size() <= size_t(kMaxTileDims))
      << "kernel '" << k.name << "': more than " << kMaxTileDims << " dims";
  // Tiles walk outer then inner dims for elementwise kernels, the inner dims of one row else.
  p.tile_dims = k.inner;
  if (p.elementwise) p.tile_dims.insert(p.tile_dims.begin(), k.outer.begin(), k.outer.end());
  p.tile_strides.assign(k.accesses.size() * kMaxTileDims, 0);
  for (size_t a = 0; a < k.accesses.size(); ++a) {
    int d = 0;
    if (p.elementwise) for (int64_t s : k.accesses[a].outer_strides) p.tile_strides[a * kMaxTileDims + d++] = s;
    for (int64_t s : k.accesses[a].inner_strides) p.tile_strides[a * kMaxTileDims + d++] = s;
  }
  plan.outer = product(k.outer);
  plan.inner = product(k.inner);
  if (k.tiled) {
    TilePlan& rows = plan.row_tiles;
    rows = p;
    rows.elementwise = false;
    rows.tile_dims = k.inner;
    rows.tile_strides.assign(k.accesses.size() * kMaxTileDims, 0);
    for (size_t a = 0; a < k.accesses.size(); ++a) rows.tile_strides[a * kMaxTileDims] = k.accesses[a].inner_strides[0];
  }
  return made;
}

const LoopKernel& InterpretedKernel::kernel() const { return program_->kernel; }

std::shared_ptr<const InterpretedKernel::Program> InterpretedKernel::program_for(void* const* args) const {
  const LoopKernel& k = program_->kernel;
  if (!k.sizes) return program_;
  // the sizes follow the buffers, as the generated code reads them (loop_kernel.h SizeTerms)
  const auto* sizes = static_cast<const int64_t*>(args[k.args.size()]);
  const SymbolPoint p(sizes, sizes + k.sizes->at.size());
  if (p == k.sizes->at) return program_;
  constexpr size_t kKept = 8;
  std::lock_guard<std::mutex> lock(sized_->mutex);
  auto& programs = sized_->programs;
  for (auto it = programs.begin(); it != programs.end(); ++it) {
    if ((*it)->kernel.sizes->at != p) continue;
    std::shared_ptr<const Program> found = *it;
    programs.erase(it);
    programs.push_back(found);
    return found;
  }
  programs.push_back(prepare(kernel_at(k, p)));
  if (programs.size() > kKept) programs.erase(programs.begin());
  return programs.back();
}

void InterpretedKernel::run(void* const* args) const {
  const std::shared_ptr<const Program> program = program_for(args);
  const LoopKernel& k = program->kernel;
  const TilePlan& p = program->tiles;
  const int64_t outer = program->outer, inner = program->inner;
  if (p.elementwise) {
    parallel_for(outer * inner, kParallelGrain, [&](int64_t begin, int64_t end) {
      Frame& f = frame_for(p);
      for (size_t a = 0; a < k.accesses.size(); ++a) f.base[a] = k.accesses[a].offset;
      run_stage(p, f, args, 0, begin, end);
    });
    return;
  }
  const int64_t work_per_row = std::max<int64_t>(1, inner * k.stages);
  // The folds' per-row values, on the calling thread (no allocation once warm).
  thread_local std::vector<double> fold_rows;
  const size_t nf = k.folds.size();
  if (nf) fold_rows.resize(size_t(outer) * nf * 2);
  double* fold_row = fold_rows.data();
  parallel_for(outer, std::max<int64_t>(1, kParallelGrain / work_per_row), [&](int64_t begin, int64_t end) {
    Frame& f = frame_for(p);
    for (int64_t o = begin; o < end; ++o) {
      row_base(k, f, o, args);
      for (int s = 0; s < k.stages; ++s) run_stage(p, f, args, s, 0, inner);
      run_stage(p, f, args, k.stages, 0, 1);
      for (size_t i = 0; i < nf; ++i) {
        const RowFold& fold = k.folds[i];
        fold_row[(size_t(o) * nf + i) * 2] = f.slot<double>(fold.value)[0];
        fold_row[(size_t(o) * nf + i) * 2 + 1] = fold.count >= 0 ? f.slot<double>(fold.count)[0] : 0.0;
      }
    }
  });
  if (nf) finish_folds(k, args, fold_rows, outer);
}

void InterpretedKernel::run_tile(void* const* args, int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
  const std::shared_ptr<const Program> program = program_for(args);
  const LoopKernel& k = program->kernel;
  SMELT_INTERNAL_CHECK(k.tiled) << "kernel '" << k.name << "': a tile run of a kernel not in tile form";
  const TilePlan& p = program->row_tiles;
  Frame& f = frame_for(p);
  for (int64_t r = r0; r < r1; ++r) {
    row_base(k, f, r, args);
    run_stage(p, f, args, 0, c0, c1);
  }
}


void run_interpreted(const LoopKernel& kernel, void* const* args) { InterpretedKernel(kernel).run(args); }

}  // namespace smelt::codegen
