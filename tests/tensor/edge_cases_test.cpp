// Edge cases settled after review: NaN through relu/sign, bool printing, undefined tensors.
#include <cmath>

#include "support/check.h"

namespace smelt {
namespace {

TEST(EdgeCases, NaNPassesThroughReluLeakyReluAndSign) {
  Tensor x = from_vector(std::vector<float>{NAN, -1.0f, 2.0f}, {3});
  for (Tensor y : {relu(x), leaky_relu(x, 0.1), sign(x)}) {
    std::vector<double> v = y.to_vector();
    EXPECT_TRUE(std::isnan(v[0])) << y;
    EXPECT_FALSE(std::isnan(v[1]));
  }
  EXPECT_EQ(relu(x).to_vector()[1], 0.0);
  EXPECT_EQ(sign(x).to_vector()[1], -1.0);
}

TEST(EdgeCases, BoolsPrintAsTrueFalse) {
  Tensor b = gt(from_vector(std::vector<float>{1, -1}, {2}), zeros({}));
  EXPECT_EQ(b.to_string(), "tensor([ True, False])");
}

TEST(EdgeCases, UndefinedTensorIsAnErrorNotACrash) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  try {
    (void)t.shape();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undefined"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)t.dim(), Error);
  EXPECT_THROW((void)t.item(), Error);
  EXPECT_THROW(add(t, ones({1})), Error);
  EXPECT_THROW(t.reshape({1}), Error);
}

}  // namespace
}  // namespace smelt
