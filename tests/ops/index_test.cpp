// Indexing and joining ops against naive references, gradchecks, and their errors.
#include "ops/reference.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::flat_index;
using testing::grad_of;
using testing::gradcheck;
using testing::positions;
using testing::random_leaf;
using testing::tensor_from;
using testing::throws_with;

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor idx(const std::vector<int64_t>& v, const Shape& shape) { return from_vector(v, shape); }
Tensor idx(const std::vector<int64_t>& v) { return from_vector(v, {int64_t(v.size())}); }

// ---- naive references

Tensor ref_index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  auto xv = x.to_vector(), iv = index.to_vector();
  Shape shape = x.shape();
  shape[dim] = index.numel();
  return tensor_from(shape, x.dtype(), [&](const Shape& p) {
    Shape q = p;
    q[dim] = int64_t(iv[p[dim]]);
    return xv[flat_index(x.shape(), q)];
  });
}

Tensor ref_index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  auto yv = x.to_vector(), iv = index.to_vector(), sv = src.to_vector();
  for (const Shape& p : positions(src.shape())) {
    Shape q = p;
    q[dim] = int64_t(iv[p[dim]]);
    yv[flat_index(x.shape(), q)] += sv[flat_index(src.shape(), p)];
  }
  return from_vector(yv, x.shape(), x.dtype());
}

Tensor ref_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  auto xv = x.to_vector(), iv = index.to_vector();
  return tensor_from(index.shape(), x.dtype(), [&](const Shape& p) {
    Shape q = p;
    q[dim] = int64_t(iv[flat_index(index.shape(), p)]);
    return xv[flat_index(x.shape(), q)];
  });
}

Tensor ref_scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  auto yv = x.to_vector(), iv = index.to_vector(), sv = src.to_vector();
  for (const Shape& p : positions(index.shape())) {
    Shape q = p;
    q[dim] = int64_t(iv[flat_index(index.shape(), p)]);
    yv[flat_index(x.shape(), q)] += sv[flat_index(src.shape(), p)];
  }
  return from_vector(yv, x.shape(), x.dtype());
}

Tensor ref_cat(const std::vector<Tensor>& xs, int64_t dim) {
  Shape shape = xs[0].shape();
  shape[dim] = 0;
  std::vector<int64_t> starts;
  for (const Tensor& x : xs) {
    starts.push_back(shape[dim]);
    shape[dim] += x.size(dim);
  }
  std::vector<std::vector<double>> values;
  for (const Tensor& x : xs) values.push_back(x.to_vector());
  return tensor_from(shape, xs[0].dtype(), [&](const Shape& p) {
    size_t k = xs.size() - 1;
    while (starts[k] > p[dim]) --k;
    Shape q = p;
    q[dim] -= starts[k];
    return values[k][flat_index(xs[k].shape(), q)];
  });
}

// ---- embedding

TEST(Embedding, ForwardMatchesReference) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor w = randn({5, 3}, dtype);
    Tensor i = idx({4, 0, 0, 2, 1, 4}, {2, 3});
    Tensor y = embedding(i, w);
    EXPECT_EQ(y.shape(), (Shape{2, 3, 3}));
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_TRUE(all_close(y, ref_index_select(w, 0, i.reshape({6})).reshape({2, 3, 3})));
  }
}

TEST(Embedding, ScalarIndexAndNonContiguousWeight) {
  Tensor w = randn({3, 6}).t();  // (6, 3), strided
  Tensor y = embedding(from_vector(std::vector<int64_t>{5}, {}), w);
  EXPECT_EQ(y.shape(), (Shape{3}));
  EXPECT_TRUE(all_close(y, w.select(0, 5)));
}

TEST(Embedding, LargeParallelMatchesReference) {
  Generator gen(3);
  Tensor w = randn({300, 64}, DType::Float32, &gen);
  Tensor i = randint(0, 300, {40, 50}, &gen);
  Tensor y = embedding(i, w);
  EXPECT_TRUE(all_close(y, ref_index_select(w, 0, i.reshape({2000})).reshape({40, 50, 64})));
}

TEST(Embedding, GradientAccumulatesRepeatedRows) {
  Tensor w = random_leaf({4, 2});
  Tensor i = idx({1, 3, 1, 1}, {2, 2});
  sum(embedding(i, w)).backward();
  EXPECT_TRUE(all_close(w.grad(), from_vector(std::vector<double>{0, 0, 3, 3, 0, 0, 1, 1}, {4, 2})));
  Tensor w2 = random_leaf({4, 3}, -1, 1, 2);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return embedding(i, v[0]); }, {w2}));
}

TEST(Embedding, SecondOrderGradient) {
  Tensor i = idx({0, 2, 2});
  Fn f = [&](const std::vector<Tensor>& v) {
    return grad_of([&](const Tensor& w) { Tensor y = embedding(i, w); return sum(y * y * y); }, v[0]);
  };
  EXPECT_TRUE(gradcheck(f, {random_leaf({3, 2})}));
}

TEST(Embedding, Errors) {
  Tensor w = randn({5, 3});
  EXPECT_TRUE(throws_with([&] { embedding(idx({1, 5}), w); },
                          {"embedding", "index 5", "position (1,)", "[0, 4]"}));
  EXPECT_TRUE(throws_with([&] { embedding(idx({-1}), w); }, {"embedding", "index -1", "[0, 4]"}));
  EXPECT_TRUE(throws_with([&] { embedding(randn({2}), w); }, {"embedding", "int64", "float32"}));
  EXPECT_TRUE(throws_with([&] { embedding(idx({1}), randn({5})); }, {"embedding", "2-D", "(5,)"}));
  // the old (weight, indices) order names the swap
  EXPECT_TRUE(throws_with([&] { embedding(w, idx({1})); },
                          {"embedding", "swapped", "embedding(input, weight)", "F.embedding"}));
}

// ---- index_select

TEST(IndexSelect, EveryDimAndLayout) {
  Tensor x = randn({3, 4, 5}, DType::Float64);
  Tensor i = idx({2, 0, 2});
  for (int64_t dim = 0; dim < 3; ++dim) {
    EXPECT_TRUE(all_close(index_select(x, dim, i), ref_index_select(x, dim, i))) << dim;
    Tensor xp = x.permute({2, 0, 1});  // non-contiguous
    EXPECT_TRUE(all_close(index_select(xp, dim, i), ref_index_select(xp, dim, i))) << dim;
  }
  // A large strided source read slice by slice, and a strided index.
  Tensor big = randn({40, 50}).t();  // (50, 40)
  Tensor strided_index = idx({7, 1, 9, 3, 30, 2}).slice(0, 0, 6, 2);  // 7, 9, 30
  EXPECT_TRUE(all_close(index_select(big, 0, strided_index), ref_index_select(big, 0, strided_index)));
  EXPECT_TRUE(all_close(index_select(big, -1, strided_index), ref_index_select(big, 1, strided_index)));
  // Int64 data and an empty index.
  Tensor xi = arange(12).reshape({3, 4});
  EXPECT_TRUE(all_close(index_select(xi, 1, idx({3, 3})), ref_index_select(xi, 1, idx({3, 3}))));
  EXPECT_EQ(index_select(x, 1, idx({})).shape(), (Shape{3, 0, 5}));
}

// Along the last dim every row is one element, copied as a typed element (kernels/index.cpp):
// each element size (1, 4, 8 bytes), repeated indices, rows across threads.
TEST(IndexSelect, SingleElementRowsOfEveryWidth) {
  for (DType dtype : {DType::UInt8, DType::Int8, DType::Int32, DType::Float32, DType::Int64, DType::Float64}) {
    Tensor x = (randn({2000, 37}, DType::Float64) * 50.0).to(dtype);  // 2000 x 66 picks: parallel
    std::vector<double> picks;
    for (int64_t k = 0; k < 64; ++k) picks.push_back(double((k * 7 + 36) % 37));
    picks.push_back(36);
    picks.push_back(0);
    const Tensor i = from_vector(picks, {int64_t(picks.size())}, DType::Int64);
    const Tensor y = index_select(x, 1, i);
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_TRUE(all_close(y, ref_index_select(x, 1, i), 0, 0)) << dtype_name(dtype);
  }
}

TEST(IndexSelect, Gradcheck) {
  Tensor i = idx({1, 1, 0, 3});
  for (int64_t dim : {0, 1}) {
    Tensor x = random_leaf({4, 4});
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return index_select(v[0], dim, i); }, {x}));
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& v) { return index_select(v[0].t(), dim, i) * v[0]; }, {x}));
  }
}

TEST(IndexSelect, SecondOrderGradient) {
  Tensor i = idx({1, 1, 0});
  Fn f = [&](const std::vector<Tensor>& v) {
    return grad_of([&](const Tensor& x) {
      Tensor y = index_select(x, 1, i);
      return sum(y * y * x.slice(1, 0, 3));
    }, v[0]);
  };
  EXPECT_TRUE(gradcheck(f, {random_leaf({2, 3})}));
}

TEST(IndexSelect, Errors) {
  Tensor x = randn({3, 4});
  EXPECT_TRUE(throws_with([&] { index_select(x, 1, idx({0, 4})); },
                          {"index_select", "index 4", "dim 1", "[0, 3]"}));
  EXPECT_TRUE(throws_with([&] { index_select(x, 0, idx({0, 1}, {1, 2})); },
                          {"index_select", "1-D", "(1, 2)"}));
  EXPECT_TRUE(throws_with([&] { index_select(x, 2, idx({0})); }, {"index_select", "dim 2"}));
  EXPECT_TRUE(throws_with([&] { index_select(randn({}), 0, idx({0})); }, {"index_select", "0-dim"}));
}

// ---- index_add

TEST(IndexAdd, ForwardWithDuplicates) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor x = randn({4, 3, 2}, dtype);
    for (int64_t dim = 0; dim < 3; ++dim) {
      Shape s = x.shape();
      s[dim] = 3;
      Tensor src = randn(s, dtype);
      const int64_t last = x.size(dim) - 1;
      Tensor i = idx({last, 0, last});  // a repeated index
      EXPECT_TRUE(all_close(index_add(x, dim, i, src), ref_index_add(x, dim, i, src))) << dim;
    }
  }
  Tensor xi = arange(6).reshape({2, 3});
  Tensor si = full({2, 2}, 10, DType::Int64);
  EXPECT_TRUE(all_close(index_add(xi, 1, idx({2, 2}), si), ref_index_add(xi, 1, idx({2, 2}), si)));
}

TEST(IndexAdd, LargeParallelAndStridedInputs) {
  Generator gen(5);
  Tensor x = randn({64, 600}, DType::Float32, &gen).t();  // (600, 64), strided
  Tensor i = randint(0, 600, {700}, &gen);
  Tensor src = randn({64, 700}, DType::Float32, &gen).t();
  EXPECT_TRUE(all_close(index_add(x, 0, i, src), ref_index_add(x, 0, i, src), 1e-5, 1e-5));
  Tensor x2 = randn({80, 30, 20}, DType::Float32, &gen);
  Tensor src2 = randn({80, 5, 20}, DType::Float32, &gen);
  Tensor i2 = idx({4, 4, 29, 0, 4});
  EXPECT_TRUE(all_close(index_add(x2, 1, i2, src2), ref_index_add(x2, 1, i2, src2), 1e-5, 1e-5));
}

TEST(IndexAdd, Gradcheck) {
  Tensor x = random_leaf({3, 4}), src = random_leaf({3, 3}, -1, 1, 2);
  Tensor i = idx({2, 0, 2});
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return index_add(v[0], 1, i, v[1]); },
                        {x, src}));
  // Broadcast into a product so the gradients are not constants.
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& v) { return index_add(v[0], 1, i, v[1] * v[1]) * v[0]; },
      {x, src}));
}

TEST(IndexAdd, Errors) {
  Tensor x = randn({3, 4});
  EXPECT_TRUE(throws_with([&] { index_add(x, 0, idx({3}), randn({1, 4})); },
                          {"index_add", "index 3", "[0, 2]"}));
  EXPECT_TRUE(throws_with([&] { index_add(x, 0, idx({0}), randn({2, 4})); },
                          {"index_add", "(2, 4)", "(1, 4)"}));
  EXPECT_TRUE(throws_with([&] { index_add(x, 0, idx({0}), randn({1, 4}, DType::Float64)); },
                          {"index_add", "float64", "float32"}));
}

// ---- gather

TEST(Gather, ForwardMatchesReference) {
  Generator gen(11);
  Tensor x = randn({4, 5, 3}, DType::Float64, &gen);
  for (int64_t dim = 0; dim < 3; ++dim) {
    Shape s{3, 4, 2};  // smaller than x except possibly along dim
    s[dim] = 7;
    Tensor i = randint(0, x.size(dim), s, &gen);
    EXPECT_TRUE(all_close(gather(x, dim, i), ref_gather(x, dim, i))) << dim;
    Tensor xp = x.permute({1, 0, 2}).contiguous().permute({1, 0, 2});  // same values, strided
    EXPECT_TRUE(all_close(gather(xp, dim, i), ref_gather(x, dim, i))) << dim;
  }
  Tensor i = idx({2, 0, 1, 1}, {2, 2});
  Tensor it = i.t();  // strided index
  Tensor x2 = arange(6).reshape({2, 3});
  EXPECT_TRUE(all_close(gather(x2, -1, it), ref_gather(x2, 1, it)));
}

TEST(Gather, LargeParallelMatchesReference) {
  Generator gen(12);
  Tensor x = randn({200, 300}, DType::Float32, &gen);
  Tensor i = randint(0, 300, {200, 250}, &gen);
  EXPECT_TRUE(all_close(gather(x, 1, i), ref_gather(x, 1, i)));
}

TEST(Gather, Gradcheck) {
  Tensor x = random_leaf({3, 4});
  Tensor i = idx({0, 0, 3, 2, 1, 1}, {2, 3});  // repeats: gradients accumulate
  for (int64_t dim : {0, 1}) {
    Tensor id = dim == 0 ? idx({0, 2, 2, 1, 0, 0}, {2, 3}) : i;
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return gather(v[0], dim, id); }, {x}));
  }
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return gather(v[0].t(), 0, i); }, {x}));
}

TEST(Gather, SecondOrderGradient) {
  Tensor i = idx({0, 0, 2, 1}, {2, 2});
  Fn f = [&](const std::vector<Tensor>& v) {
    return grad_of([&](const Tensor& x) { Tensor y = gather(x, 1, i); return sum(y * y * y); }, v[0]);
  };
  EXPECT_TRUE(gradcheck(f, {random_leaf({2, 3})}));
}

TEST(Gather, Errors) {
  Tensor x = randn({3, 4});
  EXPECT_TRUE(throws_with([&] { gather(x, 1, idx({0, 4}, {1, 2})); },
                          {"gather", "index 4", "position (0, 1)", "dim 1", "[0, 3]"}));
  EXPECT_TRUE(throws_with([&] { gather(x, 1, idx({0, 1})); }, {"gather", "(2,)", "(3, 4)", "dims"}));
  EXPECT_TRUE(throws_with([&] { gather(x, 1, idx({0, 0, 0, 0}, {4, 1})); },
                          {"gather", "dim 0", "4 > 3"}));
  EXPECT_TRUE(throws_with([&] { gather(x, 1, randn({3, 4})); }, {"gather", "int64"}));
  EXPECT_TRUE(throws_with([&] { gather(x, -3, idx({0}, {1, 1})); }, {"gather", "dim -3"}));
}

// ---- scatter_add

TEST(ScatterAdd, ForwardMatchesReference) {
  Generator gen(21);
  Tensor x = randn({4, 5, 3}, DType::Float64, &gen);
  for (int64_t dim = 0; dim < 3; ++dim) {
    Shape s{3, 4, 2};
    s[dim] = 6;  // more positions than x has along dim: repeats accumulate
    Tensor i = randint(0, x.size(dim), s, &gen);
    Tensor src = randn({6, 6, 6}, DType::Float64, &gen);  // larger than index: extra ignored
    EXPECT_TRUE(all_close(scatter_add(x, dim, i, src), ref_scatter_add(x, dim, i, src))) << dim;
    Tensor src_t = src.permute({2, 1, 0}).contiguous().permute({2, 1, 0});
    EXPECT_TRUE(all_close(scatter_add(x.permute({2, 1, 0}).contiguous().permute({2, 1, 0}), dim, i, src_t), ref_scatter_add(x, dim, i, src)));
  }
  Tensor xi = zeros({2, 3}, DType::Int64);
  Tensor ii = idx({0, 0, 2, 1, 1, 1}, {2, 3});
  Tensor si = arange(6).reshape({2, 3});
  EXPECT_TRUE(all_close(scatter_add(xi, 1, ii, si), ref_scatter_add(xi, 1, ii, si)));
}

TEST(ScatterAdd, LargeParallelMatchesReference) {
  Generator gen(22);
  Tensor x = randn({300, 40}, DType::Float32, &gen);
  Tensor i = randint(0, 300, {900, 40}, &gen);
  Tensor src = randn({900, 40}, DType::Float32, &gen);
  EXPECT_TRUE(all_close(scatter_add(x, 0, i, src), ref_scatter_add(x, 0, i, src), 1e-5, 1e-5));
}

TEST(ScatterAdd, Gradcheck) {
  Tensor x = random_leaf({3, 4}), src = random_leaf({3, 5}, -1, 1, 2);
  Tensor i = idx({3, 3, 0, 1, 2, 2}, {2, 3});  // covers part of src only
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return scatter_add(v[0], 1, i, v[1]); },
                        {x, src}));
  Tensor i0 = idx({2, 0, 0, 1, 1, 2}, {2, 3});
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& v) { return scatter_add(v[0], 0, i0, v[1] * v[1]) * v[0]; },
      {x, src}));
}

TEST(ScatterAdd, Errors) {
  Tensor x = randn({3, 4});
  EXPECT_TRUE(throws_with([&] { scatter_add(x, 0, idx({3}, {1, 1}), randn({1, 1})); },
                          {"scatter_add", "index 3", "[0, 2]"}));
  EXPECT_TRUE(throws_with([&] { scatter_add(x, 0, idx({0, 0}, {1, 2}), randn({1, 1})); },
                          {"scatter_add", "src", "(1, 1)", "(1, 2)"}));
  EXPECT_TRUE(throws_with([&] { scatter_add(x, 0, idx({0}, {1, 1}), randn({1, 1}, DType::Float64)); },
                          {"scatter_add", "float64"}));
}

// ---- one_hot

TEST(OneHot, ForwardAndErrors) {
  Tensor i = idx({2, 0, 1, 2}, {2, 2});
  Tensor y = one_hot(i, 3);
  EXPECT_EQ(y.dtype(), DType::Int64);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  auto iv = i.to_vector();
  EXPECT_TRUE(all_close(y, tensor_from({2, 2, 3}, DType::Int64, [&](const Shape& p) {
    return double(iv[size_t(p[0] * 2 + p[1])] == double(p[2]));
  })));
  EXPECT_TRUE(all_close(one_hot(i.t(), 4).select(2, 3), zeros({2, 2}, DType::Int64)));
  EXPECT_TRUE(throws_with([&] { one_hot(i, 2); }, {"one_hot", "index 2", "[0, 1]"}));
  EXPECT_TRUE(throws_with([&] { one_hot(idx({-1}), 3); }, {"one_hot", "index -1", "[0, 2]"}));
  EXPECT_TRUE(throws_with([&] { one_hot(i, 0); }, {"one_hot", "num_classes", "0"}));
  EXPECT_TRUE(throws_with([&] { one_hot(randn({2}), 3); }, {"one_hot", "int64"}));
}

// ---- cat, stack, split

TEST(Cat, ForwardMatchesReference) {
  Tensor a = randn({2, 3, 4}, DType::Float64), b = randn({2, 3, 4}, DType::Float64);
  for (int64_t dim = 0; dim < 3; ++dim) {
    Shape s = a.shape();
    s[dim] = 1;
    Tensor c = randn(s, DType::Float64);
    Tensor empty_piece = zeros([&] { Shape e = a.shape(); e[dim] = 0; return e; }(), DType::Float64);
    std::vector<Tensor> xs{a, b.permute({0, 1, 2}), c, empty_piece};
    EXPECT_TRUE(all_close(cat(xs, dim), ref_cat(xs, dim))) << dim;
    Tensor bt = b.transpose(0, 2).contiguous().transpose(0, 2);  // strided copy of b
    EXPECT_TRUE(all_close(cat({bt, a}, dim - 3), ref_cat({b, a}, dim))) << dim;
  }
  Tensor i = cat({arange(3), arange(2)});
  EXPECT_EQ(i.to_vector(), (std::vector<double>{0, 1, 2, 0, 1}));
  EXPECT_TRUE(all_close(cat({a}, 1), a));
}

TEST(Cat, LargeParallelMatchesReference) {
  Tensor a = randn({300, 100}), b = randn({300, 60}).t().contiguous().t();
  EXPECT_TRUE(all_close(cat({a, b}, 1), ref_cat({a, b}, 1)));
}

TEST(Cat, Gradcheck) {
  Tensor a = random_leaf({2, 3}), b = random_leaf({2, 2}, -1, 1, 2), c = random_leaf({3}, -1, 1, 3);
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& v) { return cat({v[0], v[1].t().reshape({2, 2}), v[0]}, 1); },
      {a, b}));
  // Broadcast after the join, and a second-order check.
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return cat({v[0], v[1]}, -1) * v[2].slice(0, 0, 1); },
                        {a, b, c}));
  Fn f = [](const std::vector<Tensor>& v) {
    return grad_of([](const Tensor& x) { Tensor y = cat({x, x * x}, 0); return sum(y * y); }, v[0]);
  };
  EXPECT_TRUE(gradcheck(f, {c}));
}

TEST(Cat, Errors) {
  EXPECT_TRUE(throws_with([] { cat({randn({2, 3}), randn({3, 3})}, 1); },
                          {"cat", "input 1", "(3, 3)", "(2, 3)", "dim 0"}));
  EXPECT_TRUE(throws_with([] { cat({randn({2, 3}), randn({2, 3}, DType::Float64)}); },
                          {"cat", "float64", "float32"}));
  EXPECT_TRUE(throws_with([] { cat({randn({2, 3}), randn({2})}); }, {"cat", "dims"}));
  EXPECT_TRUE(throws_with([] { cat({randn({})}); }, {"cat", "0-dim"}));
  EXPECT_TRUE(throws_with([] { cat({}); }, {"cat", "at least one"}));
  EXPECT_TRUE(throws_with([] { cat({randn({2})}, 1); }, {"cat", "dim 1"}));
}

TEST(Stack, ForwardGradAndErrors) {
  Tensor a = random_leaf({2, 3}), b = random_leaf({2, 3}, -1, 1, 2);
  Tensor y = stack({a, b}, 1);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  EXPECT_TRUE(all_close(y.select(1, 0), a));
  EXPECT_TRUE(all_close(y.select(1, 1), b));
  EXPECT_EQ(stack({a, b}, -1).shape(), (Shape{2, 3, 2}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return stack({v[0], v[1].t().t()}, 2); },
                        {a, b}));
  EXPECT_TRUE(throws_with([&] { stack({a, random_leaf({3, 2})}); }, {"stack", "(3, 2)", "(2, 3)"}));
  EXPECT_TRUE(throws_with([&] { stack({a, b}, 3); }, {"stack", "dim 3"}));
  EXPECT_EQ(stack({scalar_tensor(1), scalar_tensor(2)}).to_vector(), (std::vector<double>{1, 2}));
}

TEST(Split, PiecesAreViews) {
  Tensor x = randn({7, 2});
  auto pieces = split(x, 3);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[2].shape(), (Shape{1, 2}));
  for (const Tensor& p : pieces) EXPECT_EQ(p.storage().get(), x.storage().get());
  EXPECT_TRUE(all_close(cat(pieces), x));
  auto sized = split(x, std::vector<int64_t>{1, 0, 6}, 0);
  ASSERT_EQ(sized.size(), 3u);
  EXPECT_EQ(sized[1].shape(), (Shape{0, 2}));
  EXPECT_TRUE(all_close(sized[2], x.slice(0, 1, 7)));
  auto cols = split(x, 1, -1);
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_TRUE(all_close(cols[1], x.select(1, 1).unsqueeze(1)));
  EXPECT_EQ(split(zeros({0, 2}), 2).size(), 1u);
}

TEST(Split, GradientAndErrors) {
  Tensor x = random_leaf({5, 2});
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& v) {
        auto p = split(v[0], std::vector<int64_t>{2, 3});
        return cat({p[1] * 2.0, p[0] * p[0]});
      },
      {x}));
  EXPECT_TRUE(throws_with([&] { split(x, 0); }, {"split", "positive", "0"}));
  EXPECT_TRUE(throws_with([&] { split(x, std::vector<int64_t>{2, 2}); }, {"split", "4", "5"}));
  EXPECT_TRUE(throws_with([&] { split(x, std::vector<int64_t>{6, -1}); }, {"split", "-1"}));
  EXPECT_TRUE(throws_with([&] { split(scalar_tensor(1), 1); }, {"split", "0-dim"}));
}

}  // namespace
}  // namespace smelt
