// The smelt program facing bad command lines and environments: every mistake is one line on
// stderr naming the option or variable, what was typed (cut) and the valid range, a non-zero
// exit code, and no work done first.
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

struct CliRun {
  int exit_code = -1;
  std::string out, err;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("smelt_cli_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string quote(const std::string& s) { return "'" + s + "'"; }

  // `env_assignments smelt args`, stdout through a pipe, stderr through a file.
  CliRun smelt(const std::string& args, const std::string& env_assignments = "") {
    const fs::path err = dir_ / "stderr.txt";
    const std::string command = "env " + env_assignments + " " + quote(SMELT_CLI_PATH) + " " +
                                args + " 2>" + quote(err.string());
    CliRun r;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
    const int status = ::pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream f(err);
    std::stringstream ss;
    ss << f.rdbuf();
    r.err = ss.str();
    return r;
  }

  // A refused command: non-zero exit, one short line on stderr holding every needle.
  void expect_refused(const CliRun& r, std::initializer_list<std::string> needles) {
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.rfind("smelt: error: ", 0), 0u) << r.err;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
    EXPECT_LT(r.err.size(), 300u) << r.err;
    for (const std::string& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << r.err;
  }

  fs::path dir_;
};

TEST_F(Cli, HugeAndMalformedNumbersAreRefusedWithTheRange) {
  expect_refused(smelt("fuzz --cases 99999999999999999999"),
                 {"--cases", "'99999999999999999999'", "out of range", "[1, 1000000000]"});
  expect_refused(smelt("fuzz --cases 0"), {"--cases", "[1, 1000000000]"});
  expect_refused(smelt("fuzz --cases 12abc"), {"--cases", "not an integer"});
  expect_refused(smelt("fuzz --cases 1e3"), {"--cases", "not an integer"});
  expect_refused(smelt("fuzz --max-nodes 1e308"), {"--max-nodes", "[1, 1000]"});
  expect_refused(smelt("fuzz --max-rank -1"), {"--max-rank", "[0, 6]"});
  expect_refused(smelt("fuzz --seed -1"), {"--seed", "'-1'", "[0, 18446744073709551615]"});
  expect_refused(smelt("fuzz --seed 18446744073709551616"), {"--seed", "out of range"});
  expect_refused(smelt("demo --epochs 1001"), {"--epochs", "[1, 1000]"});
  expect_refused(smelt("demo --batch-size 99999999999999999999999999"),
                 {"--batch-size", "[1, 4096]"});
  expect_refused(smelt("demo --lr 1e400"), {"--lr", "not a finite number", "(0, 10]"});
  expect_refused(smelt("demo --lr -0.1"), {"--lr", "out of range"});
  expect_refused(smelt("demo --lr nan"), {"--lr", "not a finite number"});
  expect_refused(smelt("opt --seed 1.5 x.ir"), {"--seed"});
  // The typed text is cut, never echoed in full.
  const CliRun r = smelt("fuzz --cases " + std::string(400, '9'));
  expect_refused(r, {"--cases", "...'", "out of range"});
}

TEST_F(Cli, NumbersInRangeStillWork) {
  const CliRun r = smelt("fuzz --cases 2 --seed 18446744073709551615 --max-nodes 4");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 passed, 0 failed"), std::string::npos) << r.out;
}

// smelt fuzz --compile: the closing line last; a bad backend or a missing compiler refused before
// any case runs.
TEST_F(Cli, FuzzCompile) {
  const CliRun r = smelt("fuzz --compile --backend interpreter --cases 50 --seed 7");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("interpreter: 50 cases, 0 failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1), "50 passed, 0 failed\n") << r.out;
  expect_refused(smelt("fuzz --compile --backend gpu"), {"--backend", "gpu"});
  expect_refused(smelt("fuzz --compile --passes nosuchpass"), {"nosuchpass"});
  const CliRun no_cxx = smelt("fuzz --compile --backend cpp --cases 1", "SMELT_CXX=/nonexistent/c++");
  expect_refused(no_cxx, {"no C++ compiler", "--backend interpreter"});
  EXPECT_EQ(no_cxx.out, "");
}

// smelt demo-lm: a few steps of the character transformer on a small text, compiled; its files
// are written, it samples, and its final loss is below chance. A missing corpus is refused.
TEST_F(Cli, DemoLmTrainsAndSamples) {
  const fs::path corpus = dir_ / "corpus.txt";
  {
    std::ofstream text(corpus);
    for (int i = 0; i < 200; ++i) text << "the cat sat on the mat. ";
  }
  const fs::path out = dir_ / "lm";
  const CliRun r = smelt("demo-lm --steps 40 --context 8 --batch-size 8 --corpus " + quote(corpus.string()) +
                         " --out " + quote(out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out / "char_lm.safetensors"));
  EXPECT_TRUE(fs::exists(out / "loss_curve.svg"));
  const size_t at = r.out.find("final loss: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  double loss = 0, chance = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "final loss: %lf (chance: %lf)", &loss, &chance), 2) << r.out;
  EXPECT_LT(loss, chance) << r.out;  // 11 distinct characters, a repeated sentence: learnable
  expect_refused(smelt("demo-lm --corpus " + quote((dir_ / "missing.txt").string()) + " --out " + quote(out.string())),
                 {"cannot read the corpus", "--corpus"});
}

TEST_F(Cli, DemoChecksOutBeforeTraining) {
  const fs::path file = dir_ / "a_file";
  std::ofstream(file) << "x";
  for (const std::string& out : {file.string(), (file / "sub").string(), std::string("")}) {
    SCOPED_TRACE(out);
    const CliRun r = smelt("demo --epochs 1000 --out " + quote(out));
    expect_refused(r, {"demo: --out"});
    EXPECT_EQ(r.out, "") << "work started before the check";
  }
  expect_refused(smelt("demo --out " + quote(file.string())), {"exists and is not a directory"});
  expect_refused(smelt("demo --out " + quote((file / "sub").string())),
                 {"cannot create the directory", "Not a directory"});
}

TEST_F(Cli, BadEnvironmentValuesAreRefusedAtStart) {
  expect_refused(smelt("info", "SMELT_BUFFER_CACHE_MB=abc"),
                 {"SMELT_BUFFER_CACHE_MB='abc'", "not an integer", "[0, 16777216]"});
  expect_refused(smelt("info", "SMELT_BUFFER_CACHE_MB=-1"), {"SMELT_BUFFER_CACHE_MB", "out of range"});
  expect_refused(smelt("info", "SMELT_BUFFER_CACHE_MB=64MB"), {"'64MB'", "not an integer"});
  expect_refused(smelt("info", "SMELT_FOLD_MAX_ELEMENTS=1e6"), {"SMELT_FOLD_MAX_ELEMENTS='1e6'"});
  expect_refused(smelt("info", "SMELT_PRINT_IR_AFTER=nonsense"), {"SMELT_PRINT_IR_AFTER"});
  expect_refused(smelt("info", "SMELT_DISABLE_PASSES=cse,nonsense"),
                 {"SMELT_DISABLE_PASSES", "'nonsense'"});
  // SMELT_GEMM is read at the first matrix product: the demo's first training step.
  const CliRun r = smelt("demo --epochs 1 --out " + quote((dir_ / "demo").string()),
                      "SMELT_GEMM=fast");
  expect_refused(r, {"SMELT_GEMM='fast'", "auto, own, openblas"});
  EXPECT_EQ(r.out.find("test accuracy"), std::string::npos);
  // Valid and empty values are fine.
  EXPECT_EQ(smelt("info", "SMELT_BUFFER_CACHE_MB=0 SMELT_GEMM= SMELT_FOLD_MAX_ELEMENTS=10").exit_code, 0);
}

}  // namespace

namespace {

// `smelt cache stats|clear` on $SMELT_CACHE_DIR: counts entries and the logged events, and clear
// removes only the cache's own files.
TEST_F(Cli, CacheStatsAndClear) {
  const fs::path cache = dir_ / "cache";
  fs::create_directories(cache);
  std::ofstream(cache / "0123456789abcdef0123456789abcdef.so") << std::string(2048, 'x');
  std::ofstream(cache / "0123456789abcdef0123456789abcdef.cpp") << "// source";
  std::ofstream(cache / "events.log") << "compile 0.5\ncompile 0.25\ndisk_hit\ncorrupt\n";
  std::ofstream(cache / "notes.txt") << "not the cache's";
  fs::create_directories(cache / "include/0123456789abcdef/kernels");  // the headers kernels include
  std::ofstream(cache / "include/0123456789abcdef/kernels/scalar.h") << "// header";
  std::ofstream(cache / "include/0123456789abcdef/readme.txt") << "not the cache's";
  fs::create_directories(cache / "include/mine");
  const std::string env = "SMELT_CACHE_DIR=" + quote(cache.string());
  CliRun stats = smelt("cache stats", env);
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_NE(stats.out.find("cache dir: " + cache.string()), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("entries: 1 "), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("compiles: 2, 0.75 s"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("disk hits: 1"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("corrupt entries rebuilt: 1"), std::string::npos) << stats.out;
  CliRun clear = smelt("cache clear", env);
  EXPECT_EQ(clear.exit_code, 0) << clear.err;
  EXPECT_NE(clear.out.find("removed 4 files"), std::string::npos) << clear.out;
  EXPECT_TRUE(fs::exists(cache / "notes.txt"));
  EXPECT_FALSE(fs::exists(cache / "include/0123456789abcdef/kernels"));
  EXPECT_TRUE(fs::exists(cache / "include/0123456789abcdef/readme.txt"));
  EXPECT_TRUE(fs::exists(cache / "include/mine"));
  EXPECT_NE(smelt("cache stats", env).out.find("entries: 0 "), std::string::npos);
  expect_refused(smelt("cache stats", "SMELT_KERNEL_CACHE_ENTRIES=0"), {"SMELT_KERNEL_CACHE_ENTRIES", "'0'"});
}

}  // namespace

namespace {

const std::string kSmallResnet = std::string(SMELT_TEST_DIR) + "/models/small/resnet18_w8_64";

// `smelt bench` on a real model: both engines timed, what the compile made, and the outputs
// compared (the tile interpreter runs the kernels here: no C++ compiler needed).
TEST_F(Cli, BenchOnnxModel) {
  CliRun r = smelt("bench " + quote(kSmallResnet + "/model.onnx") + " --warmup 1 --reps 3 --backend interpreter --profile");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* needle : {"unoptimized (IR interpreter): median ", "compiled plan: median ", " p90 ",
                             " kernels (", " op steps", "arena ", "(naive ", "outputs agree with the interpreter's",
                             "speedup ", "per-kernel profile"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  }
  EXPECT_NE(r.err.find("compiling"), std::string::npos) << "progress on stderr: " << r.err;
  expect_refused(smelt("bench " + quote(kSmallResnet + "/model.onnx") + " --reps 0"), {"--reps", "'0'"});
}

// `smelt export-c`: the files, a summary; mistakes are one line and write nothing.
TEST_F(Cli, ExportC) {
  const fs::path out = dir_ / "c";
  CliRun r = smelt("export-c " + quote(kSmallResnet + "/model.onnx") + " -o " + quote(out.string()) +
                   " --weights file --name resnet --target x86-64-v3");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* needle : {"resnet.c: ", " fused kernels as C", "arena ", "weights ", "wrote "}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  }
  for (const char* file : {"resnet.c", "resnet.h", "resnet.weights"}) EXPECT_TRUE(fs::exists(out / file)) << file;
  const fs::path bad = dir_ / "bad";
  expect_refused(smelt("export-c " + quote(kSmallResnet + "/model.onnx") + " -o " + quote(bad.string()) + " --name 9x"),
                 {"not a C identifier", "9x"});
  EXPECT_FALSE(fs::exists(bad / "9x.c"));
  expect_refused(smelt("export-c " + quote(kSmallResnet + "/model.onnx") + " -o " + quote(bad.string()) +
                       " --target riscv"),
                 {"--target", "riscv"});
}

// `smelt tune`: each conv shape, then the model both ways (blocked and plain layout) and the
// faster recorded for the whole graph; a later compile of the model follows that record.
TEST_F(Cli, TuneRecordsTheLayoutAndCompilesFollowIt) {
  const std::string cache = "SMELT_CACHE_DIR=" + quote(dir_.string());
  CliRun tune = smelt("tune " + quote(kSmallResnet + "/model.onnx") + " --runs 1", cache);
  ASSERT_EQ(tune.exit_code, 0) << tune.out << tune.err;
  const size_t at = tune.out.find("layout threads=");
  ASSERT_NE(at, std::string::npos) << tune.out;
  const std::string line = tune.out.substr(at, tune.out.find('\n', at) - at);
  const std::string key = line.substr(0, line.find(':'));
  const bool plain = line.ends_with("-> plain");
  EXPECT_TRUE(plain || line.ends_with("-> blocked")) << line;
  EXPECT_NE(line.find(" blocked "), std::string::npos) << line;
  CliRun bench = smelt("bench " + quote(kSmallResnet + "/model.onnx") + " --warmup 0 --reps 1 --backend interpreter",
                       cache + " SMELT_DEBUG=2");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_NE(bench.err.find(key + " -> " + (plain ? "plain" : "blocked") + " (tuning file)"), std::string::npos)
      << key << "\n" << bench.err.substr(0, 2000);
}

// `smelt run` and `smelt check` through the compiled plan; --optimize and --compile exclude each other.
TEST_F(Cli, RunAndCheckCompiled) {
  CliRun run = smelt("run " + quote(kSmallResnet + "/model.onnx") + " --random --compile --backend interpreter");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("run on the compiled plan (backend interpreter)"), std::string::npos) << run.out;
  CliRun check = smelt("check " + quote(kSmallResnet) + " --compile");
  ASSERT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("PASS resnet18_w8_64"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("1 passed, 0 failed, 0 skipped"), std::string::npos) << check.out;
  expect_refused(smelt("run " + quote(kSmallResnet + "/model.onnx") + " --random --compile --optimize"),
                 {"--optimize", "--compile"});
}

// `smelt opt model.onnx`: the imported graph through the passes; weights are elided in the text
// (the batch norms are folded into the convs, so none is left).
TEST_F(Cli, OptOnnxModel) {
  CliRun r = smelt("opt " + quote(kSmallResnet + "/model.onnx"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("values not shown>"), std::string::npos);
  EXPECT_NE(r.out.find("conv2d_blocked("), std::string::npos);  // passes/blocked_layout.h
  EXPECT_EQ(r.out.find("batch_norm"), std::string::npos);
  // The stem's MaxPool pads (1, 1) symmetrically: max_pool2d's own padding, no -inf borders.
  EXPECT_NE(r.out.find("padding=[1,1], dilation=[1,1]}"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("cat("), std::string::npos) << r.out;
  EXPECT_LT(r.out.size(), 100000u) << "the weights (180k floats) are not printed";
  CliRun after = smelt("opt " + quote(kSmallResnet + "/model.onnx") + " --print-ir-after-all");
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_NE(after.err.find("// IR after "), std::string::npos);
  expect_refused(smelt("opt " + quote(kSmallResnet + "/model.onnx") + " --dim N=x"), {"--dim N", "'x'"});
}

}  // namespace

namespace {

// smelt compile --explain: a training step's forward in a file, what its backward keeps and
// recomputes at the budget asked and at 1, both arenas in one SVG, the joint plan checked
// against the interpreter; and the fuzzer's training mode.
TEST_F(Cli, CompileExplainsATrainingStepsRecomputation) {
  const fs::path ir = dir_ / "mlp.ir";
  std::ofstream(ir) << "graph(%x: f32[64,32], %t: f32[64,8], %w1: f32[32,64] param, %b1: f32[64] param, "
                       "%w2: f32[64,8] param) {\n"
                       "  %1: f32[64,64] = matmul(%x, %w1)\n"
                       "  %2: f32[64,64] = add(%1, %b1)\n"
                       "  %3: f32[64,64] = gelu(%2) {approximate=0}\n"
                       "  %4: f32[64,8] = matmul(%3, %w2)\n"
                       "  %5: f32[64,8] = sub(%4, %t)\n"
                       "  %6: f32[64,8] = mul(%5, %5)\n"
                       "  %7: f32[] = mean(%6) {dims=[], keepdim=0}\n"
                       "  return %7\n}\n";
  const fs::path svg = dir_ / "arena.svg";
  CliRun r = smelt("compile " + quote(ir.string()) + " --explain --memory-budget 0 --backend interpreter --run " +
                   "--arena-svg " + quote(svg.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("recomputed %"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("{recompute=1}"), std::string::npos) << "the clones show in the fused graph";
  EXPECT_EQ(r.out.find("DIFFERS"), std::string::npos) << r.out;
  // Recomputing saves memory, after fusion too (the clones once fused back into the forward GEMM
  // made the arena at budget 0 bigger than at 1).
  long long at_one = 0, at_budget = 0;
  const size_t line = r.out.find("== at memory_budget 1");
  ASSERT_NE(line, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + line, "== at memory_budget 1 (recomputing nothing): arena %lld bytes; at 0: %lld bytes",
                        &at_one, &at_budget), 2)
      << r.out.substr(line, 120);
  EXPECT_LT(at_budget, at_one);
  std::ifstream f(svg);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("memory_budget 0"), std::string::npos);
  EXPECT_NE(text.str().find("memory_budget 1"), std::string::npos);
  const CliRun fuzz = smelt("fuzz --training --seed 7 --cases 10");
  EXPECT_EQ(fuzz.exit_code, 0) << fuzz.out << fuzz.err;
  EXPECT_NE(fuzz.out.find("10 passed, 0 failed"), std::string::npos) << fuzz.out;
}

}  // namespace

// `smelt quantize`: calibrated on the model's test data set, every convolution and the classifier
// become integer ops, each layer's SQNR printed; the written model imports and runs again; the
// calibration file round-trips; mistakes are one line.
TEST_F(Cli, QuantizeAResNet) {
  const fs::path out = dir_ / "int8.onnx", cal = dir_ / "cal.json";
  const std::string model = quote(kSmallResnet + "/model.onnx"), data = quote(kSmallResnet);
  CliRun r = smelt("quantize " + model + " --calibration " + data + " -o " + quote(out.string()) +
                   " --save-calibration " + quote(cal.string()));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* needle : {"1 calibration batches, entropy thresholds", "SQNR dB", "conv2d+bias+relu",
                             "products quantized", "wrote "}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  }
  ASSERT_TRUE(fs::exists(out));
  ASSERT_TRUE(fs::exists(cal));
  CliRun run = smelt("run " + quote(out.string()) + " --random --compile --backend interpreter");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  CliRun again = smelt("quantize " + model + " --calibration " + data + " -o " + quote((dir_ / "b.onnx").string()) +
                       " --load-calibration " + quote(cal.string()) + " --method max");
  EXPECT_EQ(again.exit_code, 0) << again.err;
  expect_refused(smelt("quantize " + model + " --calibration " + quote((dir_ / "none").string()) + " -o x.onnx"),
                 {"--calibration", "not a directory"});
  expect_refused(smelt("quantize " + model + " --calibration " + data + " -o x.onnx --method kl"), {"--method", "kl"});
}
