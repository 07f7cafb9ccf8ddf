// The snippets of docs/pytorch-users.md, compiled and run. Each region between "// snippet" and
// "// end snippet" must appear verbatim (indentation aside) as a ```cpp block of the page, and
// every block of the page must be one of them (DocsPage.EveryCppBlockIsCompiledHere), so the page
// cannot drift from code that compiles.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/check.h"

namespace smelt {
namespace {

using testing::all_close;

TEST(PyTorchUsers, Creation) {
  // snippet
  Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}, TensorOptions().requires_grad(true));
  Tensor i = tensor({1, 2, 3});              // int64, as torch.tensor([1, 2, 3])
  Tensor z = zeros({2, 3}, Float64);
  // end snippet
  EXPECT_TRUE(x.requires_grad());
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(z.dtype(), DType::Float64);
}

TEST(PyTorchUsers, MethodsAndNumbers) {
  Tensor x = tensor({{1.0, -2.0}, {3.0, -4.0}});
  // snippet
  Tensor y = (x * 2 + 1).relu();
  Tensor s = x.exp().sum({1}, /*keepdim=*/true);
  Tensor m = x.mean();
  // end snippet
  EXPECT_EQ(y.to_vector(), (std::vector<double>{3, 0, 7, 0}));
  EXPECT_EQ(s.shape(), (Shape{2, 1}));
  EXPECT_EQ(m.item(), -0.5);
}

TEST(PyTorchUsers, Masks) {
  Tensor x = tensor({-1.0, 0.5, 2.0});
  // snippet
  Tensor mask = x > 0;                       // bool tensor
  Tensor y = where(mask, x, zeros_like(x));
  Tensor n = (x >= 1).to(Int64).sum();       // torch sums bools directly
  // end snippet
  EXPECT_EQ(n.item(), 1);
  EXPECT_EQ(y.to_vector(), (std::vector<double>{0, 0.5, 2}));
}

TEST(PyTorchUsers, Indexing) {
  Tensor x = arange(12).reshape({3, 4});
  // snippet
  Tensor a = x.index({Slice(1, None), Slice(None, None, 2)});   // x[1:, ::2]
  Tensor b = x.index({Slice(), 0});                             // x[:, 0]
  Tensor c = x.index({None, -1});                               // x[None, -1]
  // end snippet
  EXPECT_EQ(a.to_vector(), (std::vector<double>{4, 6, 8, 10}));
  EXPECT_EQ(b.to_vector(), (std::vector<double>{0, 4, 8}));
  EXPECT_EQ(c.shape(), (Shape{1, 4}));
}

TEST(PyTorchUsers, Attention) {
  Tensor q = randn({2, 5, 8}), k = randn({2, 5, 8}), v = randn({2, 5, 8});
  // snippet
  double d = double(q.size(-1));
  Tensor scores = q.matmul(k.transpose(-2, -1)) / std::sqrt(d);
  Tensor out = scores.softmax(-1).matmul(v);
  // end snippet
  EXPECT_EQ(out.shape(), (Shape{2, 5, 8}));
  EXPECT_TRUE(all_close(scores.softmax(-1).sum({-1}), ones({2, 5}), 1e-5, 1e-6));
}

TEST(PyTorchUsers, DTypes) {
  Tensor x = tensor({1, 2, 3});
  // snippet
  Tensor f = x.to(Float64);
  Tensor h = x + 1.5;                        // int64 + 1.5 -> float32, as in PyTorch
  Tensor k = x * 2;                          // stays int64
  // end snippet
  EXPECT_EQ(f.dtype(), DType::Float64);
  EXPECT_EQ(h.dtype(), DType::Float32);
  EXPECT_EQ(k.dtype(), DType::Int64);
}

TEST(PyTorchUsers, ManualSgdStep) {
  Tensor w = randn({3}, TensorOptions().requires_grad(true));
  Tensor before = w.detach().clone();
  double lr = 0.1;
  // snippet
  Tensor loss = (w * w).sum();
  loss.backward();
  {
    NoGradGuard no_grad;                     // with torch.no_grad():
    w -= lr * w.grad();
  }
  w.zero_grad();                             // w.grad = None
  // end snippet
  EXPECT_TRUE(all_close(w.detach(), before * 0.8));
}

TEST(PyTorchUsers, ConvAndPool) {
  Tensor x = randn({1, 3, 8, 8}), w = randn({4, 3, 3, 3}), b = randn({4});
  // snippet
  Tensor y = conv2d(x, w, b, /*stride=*/2, /*padding=*/1);
  Tensor p = max_pool2d(y.relu(), 2);
  // end snippet
  EXPECT_EQ(p.shape(), (Shape{1, 4, 2, 2}));
}

TEST(PyTorchUsers, EmbeddingAndLoss) {
  Tensor table = randn({10, 4}), w = randn({3, 4}), target = tensor({0, 2});
  Tensor ids = tensor({{1, 7}, {3, 3}});
  // snippet
  Tensor e = embedding(ids, table);          // F.embedding(input, weight)
  Tensor logits = e.mean({1}).matmul(w.t());
  Tensor loss = cross_entropy(logits, target, /*ignore_index=*/-100, /*label_smoothing=*/0.1);
  // end snippet
  EXPECT_EQ(e.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(loss.shape(), Shape{});
}

TEST(PyTorchUsers, RetainGrad) {
  Tensor x = randn({3}, TensorOptions().requires_grad(true));
  // snippet
  Tensor h = x.tanh();
  h.retain_grad();                           // h is not a leaf
  (h * h).sum().backward();
  Tensor dh = h.grad();                      // 2 * h
  // end snippet
  EXPECT_TRUE(all_close(dh, h.detach() * 2));
}

// ---- the page and this file agree

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string strip(const std::string& line) {
  size_t b = line.find_first_not_of(' ');
  size_t e = line.find_last_not_of(' ');
  return b == std::string::npos ? "" : line.substr(b, e - b + 1);
}

// Blocks of lines between `open` and `close` lines (compared stripped).
std::vector<std::string> blocks(const std::string& text, const std::string& open,
                                const std::string& close) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line, cur;
  bool inside = false;
  while (std::getline(in, line)) {
    const std::string s = strip(line);
    if (!inside && s == open) {
      inside = true;
      cur.clear();
    } else if (inside && s == close) {
      inside = false;
      out.push_back(cur);
    } else if (inside) {
      cur += s + "\n";
    }
  }
  return out;
}

TEST(DocsPage, EveryCppBlockIsCompiledHere) {
  const std::filesystem::path dir(SMELT_TEST_DIR);
  const std::string page = read(dir / ".." / "docs" / "pytorch-users.md");
  const std::string self = read(dir / "api" / "pytorch_users_test.cpp");
  ASSERT_FALSE(page.empty());
  std::vector<std::string> doc = blocks(page, "```cpp", "```");
  std::vector<std::string> code = blocks(self, "// snippet", "// end snippet");
  EXPECT_EQ(doc.size(), 10u);
  EXPECT_EQ(doc.size(), code.size());
  for (const std::string& d : doc) {
    EXPECT_NE(std::find(code.begin(), code.end(), d), code.end())
        << "a C++ block of docs/pytorch-users.md is not compiled by this test:\n" << d;
  }
  for (const std::string& c : code) {
    EXPECT_NE(std::find(doc.begin(), doc.end(), c), doc.end())
        << "a snippet of this test is missing from docs/pytorch-users.md:\n" << c;
  }
}

}  // namespace
}  // namespace smelt
