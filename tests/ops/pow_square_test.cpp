// pow by 2 and by 1 are the multiplication and the value (kernels/scalar.h): eager, the fused-
// kernel interpreter and generated code give x * x and x bit for bit, special values included,
// and other exponents still go to libm's pow.
#include <cmath>
#include <vector>

#include "smelt/compile.h"
#include "smelt/smelt.h"
#include "support/check.h"

namespace smelt {
namespace {

TEST(PowSquare, IsTheMultiplicationEverywhere) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor x = from_vector(std::vector<double>{1.1, -3.7, 0.0, -0.0, 1e-40, 1e200, NAN, INFINITY, -INFINITY, 2.5e-3},
                                 {10}, dtype);
    const Tensor want_square = x * x;
    EXPECT_TRUE(testing::same_bits(pow(x, 2.0), want_square)) << dtype_name(dtype);
    EXPECT_TRUE(testing::same_bits(pow(x, 1.0), x)) << dtype_name(dtype);
    const Tensor cube = pow(x, 3.0);
    const std::vector<double> v = x.to_vector(), c = cube.to_vector();
    for (size_t i = 0; i < v.size(); ++i) {
      const double ref = dtype == DType::Float32 ? double(::powf(float(v[i]), 3.0f)) : std::pow(v[i], 3.0);
      EXPECT_TRUE((std::isnan(ref) && std::isnan(c[i])) || ref == c[i]) << i;
    }
    for (const char* backend : {"interpreter", "cpp"}) {
      CompileOptions o;
      o.backend = backend;
      CompiledFunction f = compile(
          [](const std::vector<Tensor>& in) { return std::vector<Tensor>{pow(in[0], 2.0) + pow(in[0], 1.0)}; }, o);
      EXPECT_TRUE(testing::same_bits(f({x})[0], want_square + x)) << backend << " " << dtype_name(dtype);
    }
  }
}

}  // namespace
}  // namespace smelt
