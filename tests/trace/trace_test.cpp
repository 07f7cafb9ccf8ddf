#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/check.h"
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

}  // namespace
}  // namespace smelt
