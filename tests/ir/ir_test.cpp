#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/check.h"

namespace smelt {
namespace {

const char* kIrText =
    "graph(%x: f32[2,3], %w: f32[3] param) {\n"
    "  %c: f32[] = constant 2.5\n"
    "  %2: f32[2,3] = mul(%x, %w)\n"
    "  %3: f32[2,3] = mul(%2, %2)\n"
    "  %4: f32[2,3] = add(%3, %c)\n"
    "  %5: f32[2] = sum(%4) {dims=[1], keepdim=0}\n"
    "  return %5, %3\n"
    "}\n";

TEST(IR, PrintParseRoundTrip) {
  auto g = ir::parse(kIrText);
  ir::verify(*g);
  EXPECT_EQ(ir::print(*g), kIrText);
  auto copy = g->clone();
  EXPECT_EQ(ir::print(*copy), kIrText);
}

TEST(IR, DuplicateEdgesAreTwoUses) {
  auto g = ir::parse(kIrText);
  const ir::Node* square = std::next(g->nodes().begin())->get();
  ASSERT_EQ(square->inputs[0], square->inputs[1]);
  EXPECT_EQ(square->inputs[0]->uses.size(), 2u);
}

TEST(IR, ParseErrorsNameLineAndColumn) {
  try {
    ir::parse("graph(%x: f32[2]) {\n  %1: f32[2] = frobnicate(%x)\n  return %1\n}\n");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("line 2, column 16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unknown op 'frobnicate'"), std::string::npos) << msg;
  }
  try {
    ir::parse("graph(%x: f32[2]) {\n  %1: f32[3] = relu(%x)\n  return %1\n}\n");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape rule"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ir::parse("graph(%x: f32[2]) {\n  return %y\n}\n"), Error);
  EXPECT_THROW(ir::parse("graph(%x: q8[2]) {\n  return %x\n}\n"), Error);
}

TEST(IR, VerifierCatchesBrokenUseLists) {
  auto g = ir::parse(kIrText);
  ir::Value* x = g->inputs()[0];
  x->uses.clear();
  EXPECT_THROW(ir::verify(*g), Error);
}

}  // namespace
}  // namespace smelt
