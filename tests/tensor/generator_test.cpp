// The default generator is one stream for the whole process: manual_seed on any thread seeds it,
// a draw's numbers depend only on the seed and where its reserved range starts (never on the
// thread that draws), and concurrent draws reserve disjoint ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "smelt/creation.h"
#include "support/errors.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::values;

using testing::same_bits;

// Bit-for-bit equality of two tensors' elements (NaN-safe, sign of zero included).
// Runs `fn` on a new std::thread and waits for it.
template <class F>
void on_other_thread(F fn) {
  std::thread t(fn);
  t.join();
}

TEST(Generator, AnotherThreadContinuesTheSameSequence) {
  manual_seed(42);
  Tensor a = rand({7});
  Tensor b = randn({3, 5}, DType::Float64);
  Tensor c = randint(0, 1000, {9});

  manual_seed(42);
  Tensor a2 = rand({7});
  Tensor b2, c2;
  on_other_thread([&] { b2 = randn({3, 5}, DType::Float64); });
  on_other_thread([&] { c2 = randint(0, 1000, {9}); });
  EXPECT_TRUE(same_bits(a, a2));
  EXPECT_TRUE(same_bits(b, b2)) << "a draw on another thread must continue the main sequence";
  EXPECT_TRUE(same_bits(c, c2));
  // ...and the main thread continues after what the other threads drew.
  manual_seed(42);
  rand({7});
  randn({3, 5}, DType::Float64);
  randint(0, 1000, {9});
  Tensor d = rand({4});
  manual_seed(42);
  on_other_thread([] {
    rand({7});
    randn({3, 5}, DType::Float64);
    randint(0, 1000, {9});
  });
  EXPECT_TRUE(same_bits(d, rand({4})));
}

TEST(Generator, SeedingOnAnyThreadSeedsEveryThread) {
  manual_seed(7);
  const Tensor want = randn({100});
  for (int round = 0; round < 3; ++round) {
    manual_seed(999);  // some other state first
    on_other_thread([] { manual_seed(7); });
    Tensor got;
    if (round == 0) got = randn({100});                              // drawn here
    else on_other_thread([&] { got = randn({100}); });               // drawn elsewhere
    EXPECT_TRUE(same_bits(want, got)) << "round " << round;
  }
  // Different seeds give different numbers (the test above could not pass by accident).
  manual_seed(8);
  EXPECT_FALSE(same_bits(want, randn({100})));
}

// Concurrent reservations cover [0, total) exactly: no range overlaps another, none is lost.
TEST(Generator, ConcurrentReservationsNeverOverlap) {
  Generator& gen = default_generator();
  gen.manual_seed(123);
  constexpr int kThreads = 8, kPerThread = 2000;
  std::vector<std::vector<std::pair<GeneratorState, uint64_t>>> taken(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t n = uint64_t(1 + (i * 7 + t) % 5);
        taken[size_t(t)].push_back({gen.reserve(n), n});
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::pair<GeneratorState, uint64_t>> all;
  for (const auto& v : taken) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.first.counter < b.first.counter; });
  uint64_t next = 0;
  for (const auto& [state, n] : all) {
    ASSERT_EQ(state.seed, 123u);
    ASSERT_EQ(state.counter, next) << "a gap or an overlap at counter " << next;
    next += n;
  }
  EXPECT_EQ(gen.state().counter, next);
}

// Tensors drawn concurrently are exactly the tensors the same draws make one after another, in
// some order: each draw got a whole range of its own.
TEST(Generator, ConcurrentDrawsAreTheSequentialDrawsReordered) {
  constexpr int kThreads = 6, kPerThread = 200;
  manual_seed(2024);
  std::vector<std::vector<double>> sequential;
  for (int i = 0; i < kThreads * kPerThread; ++i) sequential.push_back(values(rand({5}, DType::Float64)));

  manual_seed(2024);
  std::vector<std::vector<std::vector<double>>> per_thread(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) per_thread[size_t(t)].push_back(values(rand({5}, DType::Float64)));
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::vector<double>> concurrent;
  for (const auto& v : per_thread) concurrent.insert(concurrent.end(), v.begin(), v.end());
  std::sort(sequential.begin(), sequential.end());
  std::sort(concurrent.begin(), concurrent.end());
  EXPECT_EQ(sequential, concurrent);
}

TEST(Generator, StateRoundTripsThroughATensor) {
  const GeneratorState state{std::numeric_limits<uint64_t>::max(), (1ull << 63) + 5};
  Tensor t = generator_state_tensor(state);
  EXPECT_EQ(t.dtype(), DType::Int64);
  EXPECT_EQ(t.shape(), (Shape{2}));
  EXPECT_EQ(generator_state_from_tensor(t), state);

  // A state names a stream position: restoring it repeats the draws.
  Generator gen(5);
  gen.reserve(3);
  const GeneratorState saved = gen.state();
  Tensor a = rand({6}, DType::Float32, &gen);
  gen.set_state(generator_state_from_tensor(generator_state_tensor(saved)));
  EXPECT_TRUE(same_bits(a, rand({6}, DType::Float32, &gen)));
}

TEST(Generator, StateTensorOfTheWrongKindIsAnError) {
  using testing::expect_error;
  expect_error([] { generator_state_from_tensor(zeros({2})); }, "int64 tensor [2]");
  expect_error([] { generator_state_from_tensor(zeros({3}, DType::Int64)); }, "int64 tensor [2]");
  expect_error([] { generator_state_from_tensor(Tensor()); }, "undefined");
}

TEST(Generator, CopiesAreIndependent) {
  Generator a(11);
  a.reserve(4);
  Generator b = a;
  EXPECT_EQ(b.state(), a.state());
  Tensor from_a = rand({8}, DType::Float32, &a);
  Tensor from_b = rand({8}, DType::Float32, &b);
  EXPECT_TRUE(same_bits(from_a, from_b));
  rand({8}, DType::Float32, &a);
  EXPECT_NE(a.state().counter, b.state().counter);
}

}  // namespace
}  // namespace smelt
