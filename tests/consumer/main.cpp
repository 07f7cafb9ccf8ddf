// Uses the installed headers and library: computes a gradient and checks it.
#include <cmath>
#include <cstdio>

#include "smelt/smelt.h"

int main() {
  smelt::Tensor x = smelt::from_vector(std::vector<float>{1, 2, 3}, {3});
  x.set_requires_grad();
  smelt::Tensor y = smelt::sum(x * x);
  y.backward();
  std::vector<double> g = x.grad().to_vector();
  bool ok = std::fabs(y.item() - 14.0) < 1e-6 && g == std::vector<double>{2, 4, 6};
  std::printf("consumer: sum(x*x) = %g, grad = [%g, %g, %g] %s\n", y.item(), g[0], g[1], g[2],
              ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
