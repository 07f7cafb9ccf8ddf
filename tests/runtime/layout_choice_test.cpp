// The blocked layout as a tuned choice for a whole graph (runtime/layout_choice.h): without a
// record the pass's heuristic decides; a recorded "plain" or "blocked" for the graph's key is what
// every later compile of that graph follows, also after the tuning file is read again (as a new
// process would); the tuner's own compiles (follow_layout_tuning false) ignore the record; the
// key ignores constants' values and changes with shapes; a graph without a conv has no key.
// Each test runs in its own process (gtest_discover_tests).
#include <cstdlib>

#include "ir/printer.h"
#include "kernels/conv_onednn.h"
#include "runtime/layout_choice.h"
#include "runtime/pipeline.h"
#include "runtime/tuning_file.h"
#include "support/check.h"
#include "support/temp_dir.h"

namespace smelt {
namespace {

using runtime::LayoutChoice;

// Two 3x3 convs with a relu between: the heuristic runs them blocked (oneDNN builds).
std::string two_convs(int channels, const std::string& scale) {
  const std::string c = std::to_string(channels);
  return "graph(%x: f32[1," + c + ",24,24], %w1: f32[" + c + "," + c + ",3,3], %w2: f32[" + c + "," + c + ",3,3]) {\n"
         "  %s: f32[] = constant " + scale + "\n"
         "  %1: f32[1," + c + ",24,24] = conv2d(%x, %w1) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1}\n"
         "  %2: f32[1," + c + ",24,24] = relu(%1)\n"
         "  %3: f32[1," + c + ",24,24] = mul(%2, %s)\n"
         "  %4: f32[1," + c + ",24,24] = conv2d(%3, %w2) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1}\n"
         "  return %4\n"
         "}\n";
}

class LayoutChoiceTest : public testing::CacheDirTest {
 protected:
  // Whether `text` compiles to a plan with blocked convs.
  static bool compiles_blocked(const std::string& text, bool follow = true) {
    runtime::PipelineOptions options;
    options.backend = runtime::KernelBackend::Interpreter;
    options.follow_layout_tuning = follow;
    return ir::holds_op(*runtime::compile_graph(ir::parse(text), options).graph, ops::OpId::conv2d_blocked);
  }
};

TEST_F(LayoutChoiceTest, ARecordedChoiceIsFollowedByLaterCompiles) {
  if (kernels::onednn_version()[0] == '\0') GTEST_SKIP() << "built without oneDNN: nothing is blocked";
  const std::string text = two_convs(16, "0.5");
  const std::unique_ptr<ir::Graph> graph = ir::parse(text);
  const std::string key = runtime::layout_tuning_key(*graph);
  EXPECT_EQ(key.rfind("layout threads=", 0), 0u) << key;
  EXPECT_EQ(runtime::tuned_layout(*graph), LayoutChoice::Heuristic);
  EXPECT_TRUE(compiles_blocked(text)) << "the heuristic: two convs oneDNN runs blocked";

  runtime::record_layout_choice(key, LayoutChoice::Plain, "test");
  EXPECT_EQ(runtime::tuned_layout(*graph), LayoutChoice::Plain);
  EXPECT_FALSE(compiles_blocked(text));
  EXPECT_TRUE(compiles_blocked(text, /*follow=*/false)) << "the tuner's compiles ignore the record";
  runtime::tuning_file_reload();  // as a new process would
  EXPECT_EQ(runtime::tuned_layout(*graph), LayoutChoice::Plain);
  EXPECT_FALSE(compiles_blocked(text));

  runtime::record_layout_choice(key, LayoutChoice::Blocked, "test");
  runtime::tuning_file_reload();
  EXPECT_EQ(runtime::tuned_layout(*graph), LayoutChoice::Blocked);
  EXPECT_TRUE(compiles_blocked(text));
}

TEST_F(LayoutChoiceTest, TheKeyIsTheGraphsStructure) {
  const std::string key = runtime::layout_tuning_key(*ir::parse(two_convs(16, "0.5")));
  EXPECT_EQ(runtime::layout_tuning_key(*ir::parse(two_convs(16, "0.25"))), key) << "a constant's value";
  EXPECT_NE(runtime::layout_tuning_key(*ir::parse(two_convs(32, "0.5"))), key) << "another shape";
  const std::string no_conv = "graph(%x: f32[4]) {\n  %1: f32[4] = relu(%x)\n  return %1\n}\n";
  EXPECT_EQ(runtime::layout_tuning_key(*ir::parse(no_conv)), "");
  EXPECT_EQ(runtime::tuned_layout(*ir::parse(no_conv)), LayoutChoice::Heuristic);
  // A recorded choice for one shape says nothing about another.
  runtime::record_layout_choice(key, LayoutChoice::Plain, "test");
  EXPECT_EQ(runtime::tuned_layout(*ir::parse(two_convs(32, "0.5"))), LayoutChoice::Heuristic);
  EXPECT_THROW(runtime::record_layout_choice("", LayoutChoice::Plain, "test"), Error);
  EXPECT_THROW(runtime::record_layout_choice(key, LayoutChoice::Heuristic, "test"), Error);
}

TEST(PipelineWithout, DropsEveryOccurrenceOfThePassOnly) {
  EXPECT_EQ(runtime::pipeline_without("dce,blocked_layout,cse,blocked_layout,dce", "blocked_layout"), "dce,cse,dce");
  EXPECT_EQ(runtime::pipeline_without("blocked_layout", "blocked_layout"), "");
  EXPECT_EQ(runtime::pipeline_without("dce,cse", "blocked_layout"), "dce,cse");
  EXPECT_EQ(runtime::pipeline_without("blocked_layout_x,dce", "blocked_layout"), "blocked_layout_x,dce");
}

}  // namespace
}  // namespace smelt
