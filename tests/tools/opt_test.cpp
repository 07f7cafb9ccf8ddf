// Runs the built `smelt opt` program (SMELT_CLI_PATH) on small IR files and checks its output,
// its stderr and its exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

class Opt : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("smelt_opt_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes a file in the test's directory; returns its path quoted for the shell.
  std::string write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return quote(p);
  }
  static std::string quote(const fs::path& p) {
    std::string q(1, '\'');
    q += p.string();
    q += '\'';
    return q;
  }
  static std::string read(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // `smelt opt <args>`, stdout captured through a pipe, stderr through a file.
  CliResult opt(const std::string& args) {
    fs::path err = dir_ / "stderr.txt";
    std::string command = quote(SMELT_CLI_PATH);
    command += " opt ";
    command += args;
    command += " 2>";
    command += quote(err);
    CliResult r;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return r;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.out.append(buf, n);
    int status = ::pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = read(err);
    return r;
  }
  fs::path dir_;
};

const char* kGraph =
    "graph(%x: f32[2,3]) {\n"
    "  %o: f32[] = constant 1\n"
    "  %1: f32[2,3] = mul(%x, %o)\n"
    "  %2: f32[2,3] = neg(%1)\n"
    "  %3: f32[2,3] = neg(%2)\n"
    "  %4: f32[2,3] = exp(%3)\n"
    "  return %4\n"
    "}\n";

const char* kOptimized =
    "graph(%x: f32[2,3]) {\n"
    "  %4: f32[2,3] = exp(%x)\n"
    "  return %4\n"
    "}\n";

size_t line_count(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

TEST_F(Opt, PrintsTheOptimizedIR) {
  CliResult r = opt(write("g.ir", kGraph));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kOptimized);
  EXPECT_EQ(r.err, "");
}

TEST_F(Opt, RunsTheGivenPipelineOnly) {
  CliResult r = opt(write("g.ir", kGraph) + " --passes=dce");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kGraph);
}

TEST_F(Opt, StatsAndPrintedIRGoToStderr) {
  CliResult r = opt(write("g.ir", kGraph) + " --stats --print-ir-after=simplify");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kOptimized);
  EXPECT_NE(r.err.find("// IR after simplify (iteration 1)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("// IR after dce"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("converged after"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("simplify"), std::string::npos) << r.err;

  CliResult all = opt(write("g.ir", kGraph) + " --print-ir-after-all");
  EXPECT_NE(all.err.find("// IR after dce"), std::string::npos) << all.err;
}

TEST_F(Opt, ListsPasses) {
  CliResult r = opt("--list-passes");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"dce", "cse", "canonicalize", "fold", "simplify", "default pipeline"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name << " in " << r.out;
  }
}

TEST_F(Opt, WritesDot) {
  fs::path dot = dir_ / "g.dot";
  CliResult r = opt(write("g.ir", kGraph) + " --dot " + quote(dot));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string text = read(dot);
  EXPECT_EQ(text.rfind("digraph", 0), 0u) << text;
  EXPECT_NE(text.find("exp"), std::string::npos) << text;
}

// `--fuse --explain-fusion`: the fused IR on stdout; on stderr the groups, every node left
// unfused with the rule that kept it out, and the metrics. `--dot` draws the groups as clusters.
TEST_F(Opt, FuseExplainsEveryUnfusedNodeAndDrawsClusters) {
  const std::string graph = R"(graph(%x: f32[4,8], %w: f32[8,8]) {
  %1: f32[4,8] = exp(%x)
  %2: f32[4,8] = mul(%1, %1)
  %3: f32[4,8] = softmax(%2) {dim=0}
  %4: f32[4,8] = matmul(%3, %w)
  %5: f32[4,8] = relu(%4)
  return %5
}
)";
  fs::path dot = dir_ / "g.dot";
  CliResult r = opt(write("g.ir", graph) + " --passes=dce --fuse --explain-fusion --dot " + quote(dot));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("{fusion=\"pointwise\"}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("{fusion=\"contraction\"}"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("%3 = softmax: softmax over dim 0, not the last dim"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kernels 5 -> 3"), std::string::npos) << r.err;
  const std::string text = read(dot);
  EXPECT_NE(text.find("subgraph \"cluster_"), std::string::npos) << text;
  EXPECT_NE(text.find("fused: contraction"), std::string::npos) << text;

  // A limit from the command line: depth 1 leaves the chain exp -> mul unfused, explained.
  CliResult limited = opt(write("g.ir", graph) + " --passes=dce --fuse --explain-fusion --fuse-max-depth=1");
  EXPECT_EQ(limited.exit_code, 0) << limited.err;
  EXPECT_NE(limited.err.find("limit: max_depth=1"), std::string::npos) << limited.err;
  CliResult alone = opt(write("g.ir", graph) + " --explain-fusion");
  EXPECT_EQ(alone.exit_code, 1);
  EXPECT_NE(alone.err.find("--explain-fusion needs --fuse"), std::string::npos) << alone.err;
}

TEST_F(Opt, BisectFindsNothingWrongWithCorrectPasses) {
  CliResult r = opt(write("g.ir", kGraph) + " --bisect");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("bisect: no pass application changed the results"), std::string::npos) << r.out;
}

TEST_F(Opt, BadInputIsOneLineAndExitCodeOne) {
  CliResult missing = opt(quote(dir_ / "nope.ir"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(line_count(missing.err), 1u) << missing.err;
  EXPECT_NE(missing.err.find("cannot open"), std::string::npos) << missing.err;
  EXPECT_EQ(missing.out, "");

  CliResult parse = opt(write("bad.ir", "graph(%x: f32[2]) {\n  %1: f32[2] = nope(%x)\n  return %1\n}\n"));
  EXPECT_EQ(parse.exit_code, 1);
  EXPECT_EQ(line_count(parse.err), 1u) << parse.err;
  EXPECT_NE(parse.err.find("bad.ir"), std::string::npos) << parse.err;
  EXPECT_NE(parse.err.find("line 2"), std::string::npos) << parse.err;

  CliResult pass = opt(write("g.ir", kGraph) + " --passes=dce,frobnicate");
  EXPECT_EQ(pass.exit_code, 1);
  EXPECT_NE(pass.err.find("unknown pass 'frobnicate'"), std::string::npos) << pass.err;

  CliResult no_file = opt("");
  EXPECT_EQ(no_file.exit_code, 1);
  EXPECT_NE(no_file.err.find("give an IR file"), std::string::npos) << no_file.err;

  CliResult ext = opt(write("g.ir", kGraph) + " --dot out.txt");
  EXPECT_EQ(ext.exit_code, 1);
  EXPECT_NE(ext.err.find("extension"), std::string::npos) << ext.err;
}

}  // namespace
