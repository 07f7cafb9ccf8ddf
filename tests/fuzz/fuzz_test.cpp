// The differential fuzzer in CI: a few thousand random graphs through the default pipeline
// (special values in constants and inputs, results compared bit for bit), the regression cases
// found earlier, and checks that the fuzzer does catch wrong passes, including ones that only
// special values expose.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "codegen/kernel_cache.h"
#include "fusion/fuse.h"
#include "fusion/pattern.h"
#include "fuzz/compile_fuzzer.h"
#include "fuzz/fuzzer.h"
#include "fuzz/second_batch.h"
#include "fuzz/special_values.h"
#include "ir/constant.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "support/check.h"

namespace smelt {
namespace {

constexpr int kCiCases = 3000;

TEST(Fuzz, RandomGraphsAreValidAndVaried) {
  size_t total_nodes = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    auto g = fuzz::random_graph(seed);
    ir::verify(*g);
    total_nodes += g->num_nodes();
    EXPECT_FALSE(g->outputs().empty());
  }
  EXPECT_GT(total_nodes, 200u * 3);  // not all trivial
}

// The generator reaches the op families it promises (so a change to it cannot quietly narrow
// what the fuzzer tests).
TEST(Fuzz, RandomGraphsCoverTheOpTable) {
  std::set<ops::OpId> seen;
  for (uint64_t seed = 1; seed <= 2000; ++seed) {
    auto g = fuzz::random_graph(seed);
    for (const auto& n : g->nodes()) seen.insert(n->op);
  }
  using ops::OpId;
  for (OpId op : {OpId::matmul, OpId::softmax, OpId::log_softmax, OpId::layer_norm, OpId::cat,
                  OpId::index_select, OpId::gather, OpId::pow, OpId::where, OpId::cast, OpId::amax,
                  OpId::amin, OpId::var, OpId::argmax, OpId::slice, OpId::conv2d, OpId::batch_norm,
                  OpId::max_pool2d, OpId::avg_pool2d, OpId::adaptive_avg_pool2d, OpId::dropout,
                  OpId::expand, OpId::permute, OpId::reshape, OpId::lt, OpId::sign}) {
    EXPECT_TRUE(seen.count(op)) << ops::op_name(op) << " never generated";
  }
  EXPECT_GE(seen.size(), 50u);
}

// The generator's row blocks reach the row groups of fusion (a reduction with keepdim and a
// broadcast epilogue of the rows' shape in one group), so the compile fuzzers test them.
TEST(Fuzz, RandomGraphsReachRowGroups) {
  int graphs_with_row_groups = 0;
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    auto g = fuzz::random_graph(seed);
    fusion::fuse(*g);
    bool found = false;
    for (const auto& n : g->nodes()) {
      if (!n->body || n->attrs.get_string("fusion") != "reduction") continue;
      Shape rows;
      std::set<const ir::Value*> after_reduce;  // values depending on a reduce node with keepdim
      for (const auto& b : n->body->nodes()) {
        bool dep = false;
        for (const ir::Value* in : b->inputs) dep |= after_reduce.count(in) > 0;
        if ((b->op == ops::OpId::sum || b->op == ops::OpId::mean || b->op == ops::OpId::amax ||
             b->op == ops::OpId::amin) && b->attrs.get_int("keepdim", 0) != 0) {
          rows = b->inputs[0]->meta.shape;
          dep = true;
        } else if (dep) {
          found |= b->outputs[0]->meta.shape == rows && !rows.empty() && rows.back() > 1;
        }
        if (dep) after_reduce.insert(b->outputs[0]);
      }
    }
    graphs_with_row_groups += found;
  }
  std::printf("%d of 1000 random graphs hold a row group\n", graphs_with_row_groups);
  EXPECT_GE(graphs_with_row_groups, 20);
}

// The generator makes cross_entropy's forward (log_softmax, then nll_loss over its output) often
// enough that the compile fuzzer checks the gather and the fold over rows: a row group holding
// nll_loss.
TEST(Fuzz, RandomGraphsReachNllGathers) {
  int graphs_with_gathers = 0;
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    auto g = fuzz::random_graph(seed);
    fusion::fuse(*g);
    bool found = false;
    for (const auto& n : g->nodes()) {
      if (!n->body || n->attrs.get_string("fusion") != "row") continue;
      for (const auto& b : n->body->nodes()) found |= b->op == ops::OpId::nll_loss;
    }
    graphs_with_gathers += found;
  }
  std::printf("%d of 1000 random graphs hold nll_loss in a row group\n", graphs_with_gathers);
  EXPECT_GE(graphs_with_gathers, 5);  // 9 at this writing: about 18 cases per CI run of 2000
}

// The generator's conv chains are large enough for the blocked channel layout
// (passes/blocked_layout.cpp), so both fuzzers compare blocked convolutions with plain ones: a
// graph whose default pipeline leaves a conv2d_blocked.
TEST(Fuzz, RandomGraphsReachBlockedConvolutions) {
  int graphs_with_blocked = 0;
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    auto g = fuzz::random_graph(seed);
    passes::run_pipeline(*g, passes::kDefaultPipeline);
    bool found = false;
    for (const auto& n : g->nodes()) found |= n->op == ops::OpId::conv2d_blocked;
    graphs_with_blocked += found;
  }
  std::printf("%d of 1000 random graphs hold a blocked convolution\n", graphs_with_blocked);
  EXPECT_GE(graphs_with_blocked, 5);
}

// What the special-value draws put into the graphs' constants, by kind.
struct SpecialCounts {
  int nan = 0, inf = 0, negative_zero = 0, subnormal = 0, huge = 0, int64_extreme = 0, beyond_2_53 = 0;
};

void count_specials(const Tensor& t, SpecialCounts& c) {
  const std::string bytes = ir::constant_bytes(t);
  if (t.dtype() == DType::Int64) {
    for (size_t off = 0; off < bytes.size(); off += 8) {
      int64_t v;
      std::memcpy(&v, bytes.data() + off, 8);
      c.int64_extreme += v == std::numeric_limits<int64_t>::min() || v == std::numeric_limits<int64_t>::max();
      c.beyond_2_53 += v > (int64_t(1) << 53) || v < -(int64_t(1) << 53);
    }
    return;
  }
  if (!dtype_is_floating(t.dtype())) return;
  for (double v : t.to_vector()) {  // float32 -> double keeps the class and the sign of zero
    c.nan += std::isnan(v);
    c.inf += std::isinf(v);
    c.negative_zero += v == 0 && std::signbit(v);
    const double smallest_normal = t.dtype() == DType::Float32 ? double(std::numeric_limits<float>::min())
                                                               : std::numeric_limits<double>::min();
    c.subnormal += v != 0 && std::fabs(v) < smallest_normal;
    c.huge += std::isfinite(v) && std::fabs(v) >= 1e30;
  }
}

// Constants carry every kind of special value, in float32, float64 and int64.
TEST(Fuzz, ConstantsHoldSpecialValues) {
  SpecialCounts c;
  std::set<DType> special_dtypes;
  for (uint64_t seed = 1; seed <= 2000; ++seed) {
    auto g = fuzz::random_graph(seed);
    for (const ir::Value* v : g->constants()) {
      SpecialCounts before = c;
      count_specials(v->constant, c);
      if (c.nan + c.inf + c.int64_extreme != before.nan + before.inf + before.int64_extreme) {
        special_dtypes.insert(v->meta.dtype);
      }
    }
  }
  EXPECT_GT(c.nan, 20);
  EXPECT_GT(c.inf, 20);
  EXPECT_GT(c.negative_zero, 20);
  EXPECT_GT(c.subnormal, 20);
  EXPECT_GT(c.huge, 20);
  EXPECT_GT(c.int64_extreme, 10);
  EXPECT_GT(c.beyond_2_53, 10);
  EXPECT_TRUE(special_dtypes.count(DType::Float32));
  EXPECT_TRUE(special_dtypes.count(DType::Float64));
  EXPECT_TRUE(special_dtypes.count(DType::Int64));
}

TEST(Fuzz, SpecialValueDrawsAreExactAndSeeded) {
  std::mt19937_64 a(7), b(7);
  fuzz::ElementDraw draw{-10, 10, 0.5};
  Tensor x = fuzz::random_tensor({64}, DType::Int64, draw, a);
  Tensor y = fuzz::random_tensor({64}, DType::Int64, draw, b);
  EXPECT_EQ(ir::constant_bytes(x), ir::constant_bytes(y));  // the same seed, the same bits
  SpecialCounts c;
  count_specials(fuzz::random_tensor({4096}, DType::Int64, {-10, 10, 1.0}, a), c);
  EXPECT_GT(c.int64_extreme, 100);  // INT64_MAX itself, not a double rounded to 2^63
  EXPECT_GT(c.beyond_2_53, 100);
  count_specials(fuzz::random_tensor({4096}, DType::Float32, {-2, 2, 0.0}, a), c);
  EXPECT_EQ(c.nan + c.inf + c.subnormal + c.huge, 0);  // no specials when the share is 0
}

TEST(Fuzz, DefaultPipelineMatchesInterpreterAndEager) {
  int failed = 0, exact_outputs = 0, runtime_errors = 0;
  for (uint64_t seed = 1; seed <= kCiCases; ++seed) {
    auto g = fuzz::random_graph(seed);
    fuzz::CaseResult r = fuzz::check_graph(*g, passes::kDefaultPipeline, seed);
    exact_outputs += r.exact_outputs;
    runtime_errors += r.runtime_error;
    if (!r.passed) {
      ++failed;
      ADD_FAILURE() << "seed " << seed << ": " << r.message << "\n" << ir::print(*fuzz::minimize(*g, passes::kDefaultPipeline, seed));
      if (failed > 5) break;
    }
  }
  EXPECT_EQ(failed, 0);
  EXPECT_GT(exact_outputs, kCiCases);          // most outputs are compared bit for bit
  EXPECT_LT(runtime_errors, kCiCases / 100);   // graphs that fail when run are rare
}

// Fusion after the canonical passes: group nodes run by the interpreter give the unfused
// graph's results bit for bit, every group keeps its pattern's contract, and the random graphs
// do make groups of every pattern (so the comparison tests fusion, not an unchanged graph).
TEST(Fuzz, FusedPipelineMatchesInterpreter) {
  int failed = 0;
  std::map<std::string, int> groups;
  for (uint64_t seed = 1; seed <= kCiCases / 2; ++seed) {
    auto g = fuzz::random_graph(seed);
    fuzz::CaseResult r = fuzz::check_graph(*g, fuzz::kFuzzPipeline, seed);
    if (!r.passed && ++failed <= 5) {
      ADD_FAILURE() << "seed " << seed << ": " << r.message << "\n"
                    << ir::print(*fuzz::minimize(*g, fuzz::kFuzzPipeline, seed));
    }
    passes::PassOptions options;
    std::ostringstream log;
    options.log = &log;
    passes::run_pipeline(*g, fuzz::kFuzzPipeline, options);
    for (const auto& n : g->nodes()) {
      if (!n->body) continue;
      groups[n->attrs.get_string("fusion")]++;
      EXPECT_EQ(fusion::check_group(*n), "") << "seed " << seed;
    }
  }
  EXPECT_EQ(failed, 0);
  std::printf("fusion groups in %d random graphs:", kCiCases / 2);
  for (const auto& [pattern, count] : groups) std::printf(" %s %d", pattern.c_str(), count);
  std::printf("\n");
  for (const char* p : {"pointwise", "reduction", "row", "contraction"}) {
    EXPECT_GT(groups[p], 10) << "random graphs made too few " << p << " groups";
  }
}

// Passes must be right in any order, not only the default one: another order, without
// fold_batchnorm, where every output is compared bit for bit.
TEST(Fuzz, ReorderedPipelineIsBitExact) {
  const std::string pipeline = "simplify,transpose_sink,fold,cse,canonicalize,transpose_normalize,dce";
  int failed = 0, tolerant_outputs = 0;
  for (uint64_t seed = 1; seed <= kCiCases / 3; ++seed) {
    auto g = fuzz::random_graph(seed);
    fuzz::CaseResult r = fuzz::check_graph(*g, pipeline, seed);
    tolerant_outputs += r.tolerant_outputs;
    if (!r.passed && ++failed <= 5) ADD_FAILURE() << "seed " << seed << ": " << r.message;
  }
  EXPECT_EQ(tolerant_outputs, 0);  // no rounding-changing pass in this pipeline
}

// The tolerance reaches exactly the outputs computed from a batch_norm that fold_batchnorm may
// fold; the others stay bit-exact.
TEST(Fuzz, ToleranceOnlyDownstreamOfFoldedBatchNorm) {
  auto g = ir::parse(R"(graph(%x: f64[2,3]) {
  %w: f64[2,3] = constant [1, 2, 3, 4, 5, 6]
  %g: f64[2] = constant [1, 1]
  %b: f64[2] = constant [0, 0]
  %m: f64[2] = constant [0.5, -0.5]
  %v: f64[2] = constant [1, 2]
  %wt: f64[3,2] = permute(%w) {dims=[1,0]}
  %y: f64[2,2] = matmul(%x, %wt)
  %bn: f64[2,2], %s1: f64[2], %s2: f64[2], %s3: f64[2], %s4: f64[2] = batch_norm(%y, %g, %b, %m, %v) {training=0, momentum=0.1, eps=1e-05}
  %r: f64[2,2] = relu(%bn)
  %e: f64[2,3] = exp(%x)
  return %r, %e
})");
  fuzz::CaseResult r = fuzz::check_graph(*g, passes::kDefaultPipeline, 1);
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_EQ(r.tolerant_outputs, 1);
  EXPECT_EQ(r.exact_outputs, 1);
  r = fuzz::check_graph(*g, "dce,cse,fold,simplify", 1);  // no fold_batchnorm: all exact
  EXPECT_EQ(r.tolerant_outputs, 0);
  EXPECT_EQ(r.exact_outputs, 2);
}

// Wrong passes that look right on ordinary numbers; each must be caught by the fuzzer on the
// default CI cases, which only special values and the bit-exact comparison can do.
// add(x, +0) -> x: wrong at x = -0 (-0 + +0 is +0).
bool drop_add_positive_zero(ir::Graph& g) {
  bool changed = false;
  for (const auto& n : g.nodes()) {
    if (n->op == ops::OpId::add && ir::all_elements_are(n->inputs[1], 0.0) && n->inputs[0]->meta == n->outputs[0]->meta) {
      g.replace_all_uses(n->outputs[0], n->inputs[0]);
      changed = true;
    }
  }
  return changed;
}
// mul(x, 0) -> 0 for floats: wrong at x = inf or NaN (NaN) and x < 0 (-0).
bool float_mul_zero(ir::Graph& g) {
  bool changed = false;
  for (const auto& n : g.nodes()) {
    if (n->op == ops::OpId::mul && dtype_is_floating(n->outputs[0]->meta.dtype) && n->inputs[1]->kind == ir::ValueKind::Constant &&
        n->inputs[1]->meta.shape.empty() && n->inputs[1]->constant.item() == 0) {
      n->op = ops::OpId::sub;  // x - x: 0 for finite x, but NaN at inf, +0 at negative x
      g.set_input(n.get(), 1, n->inputs[0]);
      changed = true;
    }
  }
  return changed;
}

TEST(Fuzz, SpecialValuesCatchWrongRules) {
  passes::register_pass({"test-add-positive-zero", "add(x, +0) -> x (wrong at -0)", drop_add_positive_zero});
  passes::register_pass({"test-float-mul-zero", "mul(x, 0) -> x - x (wrong at inf, NaN, -0)", float_mul_zero});
  for (const char* pass : {"test-add-positive-zero", "test-float-mul-zero"}) {
    int caught = 0;
    for (uint64_t seed = 1; seed <= kCiCases && caught == 0; ++seed) {
      auto g = fuzz::random_graph(seed);
      auto h = g->clone();
      bool fired = false;
      for (int it = 0; it < 2; ++it) { passes::find_pass("canonicalize")->run(*h); fired |= passes::find_pass(pass)->run(*h); }
      if (fired && getenv("DBG")) std::fprintf(stderr, "fired seed %d\n%s", int(seed), ir::print(*g).c_str());
      caught += !fuzz::check_graph(*g, std::string("canonicalize,") + pass, seed).passed;
    }
    EXPECT_GT(caught, 0) << pass << " was never caught";
  }
}

// A deliberately wrong pass: turns every add into sub.
bool break_adds(ir::Graph& g) {
  bool changed = false;
  for (const auto& n : g.nodes()) {
    if (n->op == ops::OpId::add) {
      n->op = ops::OpId::sub;
      changed = true;
    }
  }
  return changed;
}

TEST(Fuzz, CatchesAndMinimizesAWrongPass) {
  passes::register_pass({"test-break-adds", "turns add into sub (a wrong pass, for this test)", break_adds});
  int caught = 0;
  for (uint64_t seed = 1; seed <= 300 && caught < 3; ++seed) {
    auto g = fuzz::random_graph(seed);
    bool has_add = false;
    for (const auto& n : g->nodes()) has_add |= n->op == ops::OpId::add;
    if (!has_add) continue;
    fuzz::CaseResult r = fuzz::check_graph(*g, "test-break-adds", seed);
    if (r.passed) continue;  // e.g. add(x, 0) == sub(x, 0)
    ++caught;
    auto small = fuzz::minimize(*g, "test-break-adds", seed);
    EXPECT_LE(small->num_nodes(), g->num_nodes());
    EXPECT_FALSE(fuzz::check_graph(*small, "test-break-adds", seed).passed);
    bool small_has_add = false;
    for (const auto& n : small->nodes()) small_has_add |= n->op == ops::OpId::add;
    EXPECT_TRUE(small_has_add) << ir::print(*small);
  }
  EXPECT_EQ(caught, 3);
}

// A regression file replays its case: special constants (NaN, -0, subnormals, INT64_MAX) and
// attributes (infinite clamp bounds) print and parse back to the same bits.
TEST(Fuzz, GraphsRoundTripThroughText) {
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    auto g = fuzz::random_graph(seed);
    const std::string text = ir::print(*g);
    auto parsed = ir::parse(text);
    ASSERT_EQ(ir::print(*parsed), text) << "seed " << seed;
    ASSERT_EQ(parsed->constants().size(), g->constants().size());
    for (size_t i = 0; i < g->constants().size(); ++i) {
      EXPECT_EQ(ir::constant_bytes(parsed->constants()[i]->constant), ir::constant_bytes(g->constants()[i]->constant))
          << "seed " << seed << ", constant " << i << "\n" << text;
    }
  }
}

// Every minimized failure ever found stays fixed.
TEST(Fuzz, RegressionCases) {
  std::filesystem::path dir = std::filesystem::path(SMELT_TEST_DIR) / "fuzz" / "regressions";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".ir") continue;
    std::ifstream f(entry.path());
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str();
    auto field = [&](const std::string& key) {
      size_t p = text.find(key);
      EXPECT_NE(p, std::string::npos) << entry.path() << " has no " << key;
      size_t eol = text.find('\n', p);
      return text.substr(p + key.size(), eol - p - key.size());
    };
    std::string pipeline = field("# PIPELINE: ");
    uint64_t seed = std::stoull(field("# INPUT-SEED: "));
    auto g = ir::parse(text);
    fuzz::CaseResult r = fuzz::check_graph(*g, pipeline, seed);
    EXPECT_TRUE(r.passed) << entry.path() << ": " << r.message;
    // Every case also through the compile path (compile_graph fuses after the passes, so a
    // pipeline's trailing fuse is dropped); a "# COMPILE: cpp" case on generated C++ too.
    fuzz::CompileCheckOptions options;
    options.passes = pipeline;
    const std::string fuse = ",fuse";
    if (options.passes.size() > fuse.size() && options.passes.ends_with(fuse)) options.passes.resize(options.passes.size() - fuse.size());
    std::vector<fuzz::CompileBackend> backends{fuzz::CompileBackend::Interpreter};
    if (text.find("# COMPILE: cpp") != std::string::npos && codegen::KernelCache::global().compiler().available()) {
      backends.push_back(fuzz::CompileBackend::Cpp);
    }
    for (fuzz::CompileBackend b : backends) {
      options.backend = b;
      fuzz::CompileCaseResult c = fuzz::check_compiled(*g, options, seed);
      EXPECT_TRUE(c.passed) << entry.path() << " compiled (" << fuzz::compile_backend_name(b) << "): " << c.message;
      if (text.starts_with("# SECOND-BATCH")) {  // found at another batch size: replayed there too
        const fuzz::SecondBatchResult s = fuzz::check_second_batch(*g, options, seed);
        EXPECT_TRUE(s.applicable) << entry.path();
        EXPECT_TRUE(s.passed) << entry.path() << " second batch (" << fuzz::compile_backend_name(b) << "): " << s.message;
      }
    }
  }
}

}  // namespace
}  // namespace smelt
