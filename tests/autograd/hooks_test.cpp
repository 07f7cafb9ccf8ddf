// Post-accumulate gradient hooks and end-of-backward callbacks (what data-parallel training is
// built on): when they run, what they see, and their errors.
#include <stdexcept>

#include "smelt/autograd.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::random_leaf;

// The hook sees the accumulated .grad (including what was there before), once per backward, and
// before the callbacks it queued; the callbacks run after every leaf's accumulation.
TEST(PostAccumulateHooks, SeeTheAccumulatedGradThenCallbacksRunAtTheEnd) {
  Tensor a = random_leaf({3}, -1, 1, 1), b = random_leaf({3}, -1, 1, 2);
  std::vector<std::string> events;
  Tensor seen;
  a.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    events.push_back("a");
    seen = leaf.grad().clone();
    autograd::queue_callback([&] {
      events.push_back("end");
      EXPECT_TRUE(b.grad().defined()) << "the callback runs after every accumulation";
      autograd::queue_callback([&] { events.push_back("queued by a callback"); });
    });
  });
  b.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("b"); });
  sum(a * b).backward();
  EXPECT_TRUE(all_close(seen, b.detach()));
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[2], "end");
  EXPECT_EQ(events[3], "queued by a callback");
  // A second backward accumulates: the hook sees the sum.
  events.clear();
  sum(a * b).backward();
  EXPECT_TRUE(all_close(seen, b.detach() * 2.0));
  EXPECT_EQ(events.size(), 4u);
}

TEST(PostAccumulateHooks, RunAfterGradHooksAndCanBeRemoved) {
  Tensor a = random_leaf({2}, -1, 1, 3);
  a.register_hook([](const Tensor& g) { return g * 10.0; });
  int calls = 0;
  const uint64_t id = a.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    ++calls;
    EXPECT_TRUE(all_close(leaf.grad(), full({2}, 10.0, leaf.dtype())));
  });
  sum(a).backward();
  EXPECT_EQ(calls, 1);
  a.remove_post_accumulate_grad_hook(id);
  a.remove_post_accumulate_grad_hook(id + 1000);  // unknown: ignored
  sum(a).backward();
  EXPECT_EQ(calls, 1);
}

TEST(PostAccumulateHooks, NotForAutogradGradNorNonLeaves) {
  Tensor a = random_leaf({2}, -1, 1, 4);
  int calls = 0;
  a.register_post_accumulate_grad_hook([&](const Tensor&) { ++calls; });
  autograd::grad({sum(a * a)}, {a});
  EXPECT_EQ(calls, 0) << "autograd::grad accumulates nothing";
  expect_error([&] { (a * 2.0).register_post_accumulate_grad_hook([](const Tensor&) {}); }, {"must be a leaf"});
  expect_error([] { zeros({2}).register_post_accumulate_grad_hook([](const Tensor&) {}); }, {"requires grad"});
}

TEST(QueueCallback, OutsideABackwardIsAnError) {
  expect_error([] { autograd::queue_callback([] {}); }, {"no backward is running"});
}

// A hook that throws ends the backward with its error; its queued callbacks never run, and the
// next backward starts clean.
TEST(QueueCallback, ABackwardThatThrowsDropsItsCallbacks) {
  Tensor a = random_leaf({2}, -1, 1, 5);
  int ran = 0;
  bool fail = true;
  a.register_post_accumulate_grad_hook([&](const Tensor&) {
    autograd::queue_callback([&] { ++ran; });
    if (fail) throw std::runtime_error("hook failed");
  });
  EXPECT_THROW(sum(a).backward(), std::runtime_error);
  EXPECT_EQ(ran, 0);
  fail = false;
  sum(a).backward();
  EXPECT_EQ(ran, 1);
  expect_error([] { autograd::queue_callback([] {}); }, {"no backward is running"});
}

}  // namespace
}  // namespace smelt
