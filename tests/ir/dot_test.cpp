#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "ir/dot.h"
#include "ir/printer.h"
#include "support/check.h"

namespace smelt {
namespace {

const char* kDotText =
    "graph(%x: f32[2,3], %w: f32[3] param) {\n"
    "  %c: f32[] = constant 2.5\n"
    "  %big: f32[6] = constant [1, 2, 3, 4, 5, 6]\n"
    "  %2: f32[2,3] = mul(%x, %w)\n"
    "  %3: f32[2,3] = add(%2, %c)\n"
    "  %4: f32[6] = reshape(%3) {shape=[6]}\n"
    "  %5: f32[6] = mul(%4, %big)\n"
    "  %6: f32[2] = sum(%3) {dims=[1], keepdim=0}\n"
    "  return %5, %6\n"
    "}\n";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Dot, StylesEachKindOfValue) {
  std::string dot = ir::to_dot(*ir::parse(kDotText), "model");
  EXPECT_EQ(dot.rfind("digraph \"model\" {\n", 0), 0u) << dot;
  EXPECT_TRUE(contains(dot, "[label=\"%x\\nf32[2,3]\", shape=ellipse, style=filled, fillcolor=\"#cfe3ff\"]")) << dot;
  EXPECT_TRUE(contains(dot, "[label=\"%w\\nf32[3]\\nparam\", shape=ellipse, style=filled, fillcolor=\"#ffe0b2\"]")) << dot;
  EXPECT_TRUE(contains(dot, "[label=\"%c\\nf32[]\\n= 2.5\", shape=note")) << dot;
  // Large constants show their shape, not their values.
  EXPECT_TRUE(contains(dot, "[label=\"%big\\nf32[6]\", shape=note")) << dot;
  EXPECT_TRUE(contains(dot, "[label=\"sum\\ndims=[1]\\nkeepdim=0\\n%6: f32[2]\", shape=box")) << dot;
  EXPECT_TRUE(contains(dot, "[label=\"return 0\\nf32[6]\", shape=octagon")) << dot;
  EXPECT_TRUE(contains(dot, "[label=\"return 1\\nf32[2]\", shape=octagon")) << dot;
  EXPECT_EQ(dot.back(), '\n');
  EXPECT_TRUE(contains(dot, "\n}\n"));
}

// Every edge joins declared DOT nodes, and edges match the IR's edges one to one.
TEST(Dot, EdgesFollowTheGraph) {
  auto g = ir::parse(kDotText);
  std::string dot = ir::to_dot(*g);
  std::set<std::string> declared;
  std::regex node_re(R"re(^  (\w+) \[label=)re");
  std::regex edge_re(R"re(^  (\w+) -> (\w+) \[label="([^"]*)"\];$)re");
  std::vector<std::array<std::string, 3>> edges;
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, edge_re)) edges.push_back({m[1], m[2], m[3]});
    else if (std::regex_search(line, m, node_re)) declared.insert(m[1]);
  }
  size_t ir_edges = g->outputs().size();
  for (const auto& n : g->nodes()) ir_edges += n->inputs.size();
  EXPECT_EQ(edges.size(), ir_edges);
  EXPECT_EQ(declared.size(), g->inputs().size() + g->constants().size() + g->num_nodes() + g->outputs().size());
  for (const auto& e : edges) {
    EXPECT_TRUE(declared.count(e[0])) << e[0];
    EXPECT_TRUE(declared.count(e[1])) << e[1];
  }
  // The reshape's input edge carries the shape of %3, the edge into the output its name.
  EXPECT_TRUE(contains(dot, "n1 -> n2 [label=\"f32[2,3]\"]")) << dot;
  EXPECT_TRUE(contains(dot, "n3 -> out0 [label=\"%5\"]")) << dot;
}

TEST(Dot, QuotesAndBackslashesAreEscaped) {
  std::string dot = ir::to_dot(*ir::parse(kDotText), "a \"b\" \\c");
  EXPECT_EQ(dot.rfind("digraph \"a \\\"b\\\" \\\\c\" {", 0), 0u) << dot.substr(0, 40);
}

TEST(Dot, WritesDotFilesAndRejectsUnknownExtensions) {
  auto dir = std::filesystem::temp_directory_path() / ("smelt_dot_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string dot = ir::to_dot(*ir::parse(kDotText));
  ir::write_dot(dot, (dir / "g.dot").string());
  std::ifstream f(dir / "g.dot");
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), dot);
  try {
    ir::write_dot(dot, (dir / "g.txt").string());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), ".dot, .svg")) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Dot, SvgNeedsGraphviz) {
  auto dir = std::filesystem::temp_directory_path() / ("smelt_svg_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string svg = (dir / "g.svg").string();
  std::string dot = ir::to_dot(*ir::parse(kDotText));
  if (ir::graphviz_available()) {
    ir::write_dot(dot, svg);
    std::ifstream f(svg);
    std::stringstream ss;
    ss << f.rdbuf();
    EXPECT_TRUE(contains(ss.str(), "<svg")) << ss.str().substr(0, 200);
  } else {
    try {
      ir::write_dot(dot, svg);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "Graphviz")) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(svg));
    EXPECT_FALSE(std::filesystem::exists(svg + ".dot"));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace smelt
