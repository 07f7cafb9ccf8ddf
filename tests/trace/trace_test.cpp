#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/check.h"
#include "support/errors.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt {
namespace {

using testing::all_close;

TEST(Trace, ForwardGraphMatchesEager) {
  auto fn = [](const std::vector<Tensor>& in, const std::vector<Tensor>& p) {
    Tensor h = tanh(in[0] * p[0] + 1.0);
    return std::vector<Tensor>{sum(h * h, {1}), h};
  };
  Tensor x = randn({4, 3}), w = randn({3});
  auto g = trace::trace(fn, {x}, {w});
  ir::verify(*g);
  EXPECT_EQ(g->inputs().size(), 2u);
  auto got = trace::interpret(*g, {x, w});
  auto want = fn({x}, {w});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(all_close(got[0], want[0]));
  EXPECT_TRUE(all_close(got[1], want[1]));
  // the printed graph parses back to the same text
  EXPECT_EQ(ir::print(*ir::parse(ir::print(*g))), ir::print(*g));
}

TEST(Trace, JointGraphGivesEagerGradients) {
  auto fn = [](const std::vector<Tensor>& in, const std::vector<Tensor>& p) {
    Tensor h = sigmoid(in[0] * p[0] + p[1]);
    return std::vector<Tensor>{mean(h * h)};
  };
  Tensor x = randn({5, 3}, DType::Float64);
  Tensor w = randn({3}, DType::Float64), b = randn({1}, DType::Float64);
  auto g = trace::trace_joint(fn, {x}, {w, b});
  ir::verify(*g);
  ASSERT_EQ(g->outputs().size(), 3u);
  auto got = trace::interpret(*g, {x, w, b, ones({}, DType::Float64)});

  Tensor we = w.clone().set_requires_grad(), be = b.clone().set_requires_grad();
  Tensor loss = fn({x}, {we, be})[0];
  loss.backward();
  EXPECT_TRUE(all_close(got[0], loss));
  EXPECT_TRUE(all_close(got[1], we.grad(), 1e-10, 1e-12));
  EXPECT_TRUE(all_close(got[2], be.grad(), 1e-10, 1e-12));
}

TEST(Trace, UsingDataWhileTracingIsAClearError) {
  auto fn = [](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    double v = in[0].item();
    return std::vector<Tensor>{in[0] * v};
  };
  try {
    trace::trace(fn, {ones({1})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic"), std::string::npos) << e.what();
  }
}


// A symbolic tensor stands for a value of its own graph only. Value ids restart in every graph,
// so a tensor kept from an earlier trace used to name some other value of the new graph and
// silently read it (here: the new trace's exp(x), value %1 as the old trace's tanh was).
TEST(Trace, SymbolicTensorFromAnEarlierTraceIsAClearError) {
  Tensor kept;
  trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    kept = tanh(in[0]);
    return std::vector<Tensor>{kept};
  }, {ones({3})});
  auto reuse = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    return std::vector<Tensor>{exp(in[0]) + kept};
  };
  testing::expect_error([&] { trace::trace(reuse, {ones({3})}); },
                        {"from an earlier trace", "must not outlive their trace", "Valid here"});
  // As a graph output directly, and in a joint trace.
  testing::expect_error([&] {
    trace::trace([&](const std::vector<Tensor>&, const std::vector<Tensor>&) {
      return std::vector<Tensor>{kept};
    }, {ones({3})});
  }, "from an earlier trace");
  testing::expect_error([&] {
    trace::trace_joint([&](const std::vector<Tensor>& in, const std::vector<Tensor>& p) {
      return std::vector<Tensor>{sum(in[0] * p[0] + kept)};
    }, {ones({3})}, {ones({3})});
  }, "from an earlier trace");
}

TEST(Trace, SymbolicTensorFromAnOuterTraceIsAClearErrorInAnInnerOne) {
  auto outer = [](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    Tensor h = exp(in[0]);
    trace::trace([&](const std::vector<Tensor>& inner_in, const std::vector<Tensor>&) {
      return std::vector<Tensor>{inner_in[0] * h};
    }, {ones({2})});
    return std::vector<Tensor>{h};
  };
  testing::expect_error([&] { trace::trace(outer, {ones({2})}); }, "from an earlier trace");
}

TEST(Trace, SymbolicTensorUsedEagerlyAfterItsTraceIsAClearError) {
  Tensor kept, kept_scalar;
  trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    kept = in[0] * 2.0;
    kept_scalar = sum(kept);
    return std::vector<Tensor>{kept};
  }, {ones({3})});
  testing::expect_error([&] { (void)(kept + ones({3})); }, {"symbolic", "add"});
  testing::expect_error([&] { (void)sum(kept); }, "symbolic");
  testing::expect_error([&] { (void)kept_scalar.item(); }, "symbolic");
  testing::expect_error([&] { (void)kept.to_vector(); }, "symbolic");
  Tensor target = zeros({3});
  testing::expect_error([&] { target.copy_(kept); }, "symbolic");
  testing::expect_error([&] { kept.add_(ones({3})); }, "symbolic");
  auto g = trace::trace([](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    return std::vector<Tensor>{in[0] + 1.0};
  }, {ones({3})});
  testing::expect_error([&] { trace::interpret(*g, {kept}); }, {"interpret: input 0", "symbolic"});
}

}  // namespace
}  // namespace smelt
