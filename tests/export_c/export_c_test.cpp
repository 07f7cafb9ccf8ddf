// The standalone C export (export_c/, docs/export_c.md): exported models compiled with gcc for this
// machine and for aarch64 (run under qemu-aarch64), run by a driver that aborts on any allocation
// during the run, against smelt's own results: bit for bit for every elementwise op and dtype,
// within float tolerance for whole models (their GEMMs sum in another order).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "export_c/export_c.h"
#include "kernels/scalar_table.h"
#include "ops/dispatch.h"
#include "runtime/pipeline.h"
#include "smelt/graph.h"
#include "smelt/nn.h"
#include "smelt/onnx.h"
#include "smelt/smelt.h"
#include "support/check.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace smelt {
namespace {

using testing::TempDirTest;

struct Toolchain {
  std::string cc;      // compiler and flags
  std::string runner;  // prefix of the command that runs the program ("" natively)
  bool wrap_malloc = true;  // link the allocation functions to abort during the run
};

const Toolchain kNative{"cc -std=c11 -pedantic -O2 -Wall -Wextra -Werror", ""};
const Toolchain kAarch64{"aarch64-linux-gnu-gcc -std=c11 -pedantic -O2 -Wall -Wextra -Werror -static", "qemu-aarch64"};
// AddressSanitizer and UBSan on the exported C (out-of-bounds reads at image edges, pointer
// arithmetic outside an object, overflow), any finding fatal; ASan owns malloc here.
const Toolchain kSanitized{
    "cc -std=c11 -pedantic -O1 -g -Wall -Wextra -Werror -fsanitize=address,undefined -fno-sanitize-recover=all", "",
    false};

bool have(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// The driver: loads the inputs (and the weights file), runs the model twice with every
// allocation function wrapped to abort while the model runs, checks both runs agree, writes the
// outputs.
std::string driver(const std::string& name, const std::vector<DType>& inputs, const std::vector<DType>& outputs,
                   bool weights_file, bool wrap_malloc) {
  std::string N = name;
  for (char& c : N) c = char(std::toupper(static_cast<unsigned char>(c)));
  std::ostringstream d;
  d << "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include \"" << name << ".h\"\n\n";
  d << "static int in_model;\n";
  if (wrap_malloc) {
    d << "void* __real_malloc(size_t n);\nvoid* __real_calloc(size_t n, size_t s);\nvoid* __real_realloc(void* p, size_t n);\n";
    d << "static void refuse(void) { fputs(\"allocation during the model's run\\n\", stderr); abort(); }\n";
    d << "void* __wrap_malloc(size_t n) { if (in_model) refuse(); return __real_malloc(n); }\n";
    d << "void* __wrap_calloc(size_t n, size_t s) { if (in_model) refuse(); return __real_calloc(n, s); }\n";
    d << "void* __wrap_realloc(void* p, size_t n) { if (in_model) refuse(); return __real_realloc(p, n); }\n";
  }
  d << "static void load(const char* path, void* p, size_t bytes) {\n  FILE* f = fopen(path, \"rb\");\n"
    << "  if (!f || fread(p, 1, bytes, f) != bytes) { fprintf(stderr, \"cannot read %s\\n\", path); exit(3); }\n"
    << "  fclose(f);\n}\n";
  d << "static void save(const char* path, const void* p, size_t bytes) {\n  FILE* f = fopen(path, \"wb\");\n"
    << "  if (!f || fwrite(p, 1, bytes, f) != bytes) exit(3);\n  fclose(f);\n}\n";
  for (size_t i = 0; i < inputs.size(); ++i) {
    // exactly the input's size (AddressSanitizer sees a read one past it), 1 for an empty one
    const std::string n = N + "_INPUT" + std::to_string(i) + "_NUMEL";
    d << "static " << kernels::dtype_cpp_type(inputs[i]) << " in" << i << "[" << n << " > 0 ? " << n << " : 1];\n";
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string t = kernels::dtype_cpp_type(outputs[i]);
    const std::string n = N + "_OUTPUT" + std::to_string(i) + "_NUMEL";
    const std::string size = "[" + n + " > 0 ? " + n + " : 1]";
    d << "static " << t << " out" << i << size << ", again" << i << size << ";\n";
  }
  if (weights_file) d << "static _Alignas(64) unsigned char weights[" << N << "_WEIGHTS_BYTES + 1];\n";
  std::string args = weights_file ? "weights, " : "", again = args;
  for (size_t i = 0; i < inputs.size(); ++i) args += "in" + std::to_string(i) + ", ", again += "in" + std::to_string(i) + ", ";
  for (size_t i = 0; i < outputs.size(); ++i) args += "out" + std::to_string(i) + ", ", again += "again" + std::to_string(i) + ", ";
  args.resize(args.size() - 2), again.resize(again.size() - 2);
  d << "int main(void) {\n";
  if (weights_file) d << "  load(\"" << name << ".weights\", weights, " << N << "_WEIGHTS_BYTES);\n";
  for (size_t i = 0; i < inputs.size(); ++i) {
    d << "  load(\"in" << i << ".bin\", in" << i << ", sizeof(in" << i << "[0]) * " << N << "_INPUT" << i << "_NUMEL);\n";
  }
  d << "  in_model = 1;\n  const int rc = " << name << "_run(" << args << ");\n  const int rc2 = " << name << "_run("
    << again << ");\n  in_model = 0;\n";
  d << "  if (rc != 0 || rc2 != rc) { printf(\"rc %d %d\\n\", rc, rc2); return 4; }\n";
  for (size_t i = 0; i < outputs.size(); ++i) {
    d << "  if (memcmp(out" << i << ", again" << i << ", sizeof out" << i << ") != 0) { puts(\"runs differ\"); return 5; }\n";
    d << "  save(\"out" << i << ".bin\", out" << i << ", sizeof(out" << i << "[0]) * " << N << "_OUTPUT" << i
      << "_NUMEL);\n";
  }
  d << "  return 0;\n}\n";
  return d.str();
}

class ExportC : public TempDirTest {
 protected:
  // Exports `graph` into the test's directory, compiles it with `tc`, runs it on `inputs` and
  // returns its outputs (ADD_FAILURE and an empty list when a step fails).
  std::vector<Tensor> run_exported(const ir::Graph& graph, const std::vector<Tensor>& inputs,
                                   const export_c::Options& options = {}, const Toolchain& tc = kNative,
                                   export_c::Exported* report = nullptr) {
    const export_c::Exported e = export_c::export_graph(graph, options);
    if (report) *report = e;
    for (const export_c::File& f : e.files) write_all(path(f.name), f.content);
    std::vector<DType> in_types, out_types;
    for (const Tensor& t : inputs) in_types.push_back(t.dtype());
    for (const ir::Value* v : graph.outputs()) out_types.push_back(v->meta.dtype);
    write_all(path("main.c"),
              driver(options.name, in_types, out_types, options.weights == export_c::Weights::File, tc.wrap_malloc));
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor t = inputs[i].contiguous();
      write_all(path("in" + std::to_string(i) + ".bin"),
                std::string(static_cast<const char*>(t.raw_data()), size_t(t.numel()) * dtype_size(t.dtype())));
    }
    const std::string build = "cd " + dir_ + " && " + tc.cc + " -o prog main.c " + options.name + ".c -lm" +
                              (tc.wrap_malloc ? " -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc" : "") +
                              " > build.log 2>&1";
    if (std::system(build.c_str()) != 0) {
      ADD_FAILURE() << "compiling the export failed:\n" << read_all(path("build.log")).substr(0, 4000);
      return {};
    }
    const std::string run = "cd " + dir_ + " && " + tc.runner + " ./prog > run.log 2>&1";
    if (std::system(run.c_str()) != 0) {
      ADD_FAILURE() << "running the export failed:\n" << read_all(path("run.log")).substr(0, 4000);
      return {};
    }
    std::vector<Tensor> outputs;
    for (size_t i = 0; i < graph.outputs().size(); ++i) {
      const ops::TensorMeta& m = graph.outputs()[i]->meta;
      Tensor t = empty(m.shape, m.dtype);
      const std::string bytes = read_all(path("out" + std::to_string(i) + ".bin"));
      EXPECT_EQ(int64_t(bytes.size()), m.nbytes()) << "output " << i;
      if (int64_t(bytes.size()) == m.nbytes()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
      outputs.push_back(t);
    }
    return outputs;
  }
};

// smelt's compiled plan on `inputs` (kernels on the interpreter, which computes the generated
// kernels' bits).
std::vector<Tensor> smelt_outputs(const ir::Graph& graph, const std::vector<Tensor>& inputs) {
  runtime::PipelineOptions options;
  options.backend = runtime::KernelBackend::Interpreter;
  runtime::CompiledGraph c = runtime::compile_graph(graph.clone(), options);
  return c.plan->run(inputs);
}

// Values of `dtype` that hit the edges: for floats NaN, infinities, zeros of both signs,
// subnormals, large and small magnitudes; for integers the extremes, -1, 0 and 1.
Tensor edge_values(DType dtype, int64_t n, uint64_t seed) {
  if (dtype_is_floating(dtype)) return testing::special_values({n}, seed, 3, dtype);
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(double(int64_t(i * 7 + int64_t(seed)) % 11 - 5));
  Tensor t = from_vector(v, {n}).to(dtype);
  if (dtype == DType::Int64) {
    int64_t* p = t.data<int64_t>();
    p[0] = std::numeric_limits<int64_t>::min(), p[1] = std::numeric_limits<int64_t>::max(), p[2] = -1;
  } else if (dtype == DType::Int32) {
    int32_t* p = t.data<int32_t>();
    p[0] = std::numeric_limits<int32_t>::min(), p[1] = std::numeric_limits<int32_t>::max(), p[2] = -1;
  }
  return t;
}

// Every elementwise op of the op table that takes no attributes, on every dtype it accepts, in
// one graph per dtype: each output computed by the exported C must have the bits of smelt's eager
// op (the scalar functions of export_c/runtime/scalar.h against kernels/scalar.h).
TEST_F(ExportC, EveryElementwiseOpAndDtypeHasSmeltsBits) {
  int checked = 0;
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64, DType::Int32, DType::Bool}) {
    const int64_t n = 64;
    const std::vector<Tensor> inputs = {edge_values(dtype, n, 1), edge_values(dtype, n, 5), edge_values(dtype, n, 9)};
    std::vector<ops::OpId> usable;
    for (int id = 0; id < ops::kOpCount; ++id) {
      const auto op = ops::OpId(id);
      const ops::OpInfo& info = ops::op_info(op);
      if (info.kind != ops::OpKind::Elementwise || info.arity < 1 || info.arity > 3 || info.num_outputs != 1) continue;
      if (ops::mutates_any(op) || (info.flags & ops::kRandom)) continue;
      try {
        std::vector<Tensor> args(inputs.begin(), inputs.begin() + info.arity);
        if (op == ops::OpId::where) args[0] = gt(inputs[0], inputs[1]);
        ops::call(op, args);  // refuses this dtype or wants attributes: not part of the check
        usable.push_back(op);
      } catch (const Error&) {
      }
    }
    if (usable.empty()) continue;
    const Graph g = Graph::trace(
        [&](const std::vector<Tensor>& x, const std::vector<Tensor>&) {
          std::vector<Tensor> outs;
          for (ops::OpId op : usable) {
            const int arity = ops::op_info(op).arity;
            std::vector<Tensor> args(x.begin(), x.begin() + arity);
            if (op == ops::OpId::where) args[0] = gt(x[0], x[1]);
            outs.push_back(ops::call(op, args)[0]);
          }
          return outs;
        },
        inputs);
    const std::vector<Tensor> got = run_exported(g.ir_graph(), inputs);
    ASSERT_EQ(got.size(), usable.size()) << dtype_name(dtype);
    for (size_t i = 0; i < usable.size(); ++i) {
      const int arity = ops::op_info(usable[i]).arity;
      std::vector<Tensor> args(inputs.begin(), inputs.begin() + arity);
      if (usable[i] == ops::OpId::where) args[0] = gt(inputs[0], inputs[1]);
      EXPECT_TRUE(testing::same_bits(got[i], ops::call(usable[i], args)[0]))
          << ops::op_name(usable[i]) << " on " << dtype_name(dtype);
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);  // the table's rows times their dtypes: a check that stopped seeing ops fails
}

// The values of `m`'s symbolic dims: batch 2, any other 5.
onnx::ImportOptions fixed_dims(const std::string& model) {
  onnx::ImportOptions options;
  for (const onnx::ValueInfo& v : onnx::inspect(model).inputs) {
    for (const std::string& d : v.dim_names) {
      if (!d.empty()) options.dims[d] = d.find("batch") != std::string::npos ? 2 : 5;
    }
  }
  return options;
}

std::vector<Tensor> model_inputs(const ir::Graph& g, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (const ir::Value* v : g.inputs()) {
    manual_seed(seed++);
    if (dtype_is_floating(v->meta.dtype)) inputs.push_back(randn(v->meta.shape).to(v->meta.dtype));
    else inputs.push_back(randint(0, 2, v->meta.shape).to(v->meta.dtype));  // token ids every vocabulary has
  }
  return inputs;
}

void expect_model_matches(const std::string& name, const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size()) << name;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(testing::all_close(got[i], want[i], 1e-4, 1e-5)) << name << " output " << i;
  }
}

// Every architecture of tests/models/small (CNNs with residual, depthwise, grouped and dense
// connectivity, squeeze-excitation, a UNet with transposed convolutions, transformers, recurrent
// nets on token inputs): the export runs and agrees with smelt. The targets take turns, so every
// GEMM tile size (and its packing of the weights) runs on several models.
TEST_F(ExportC, EverySmallModelMatchesSmelt) {
  const std::string root = std::string(SMELT_TEST_DIR) + "/models/small/";
  const export_c::Target targets[] = {export_c::Target::Generic, export_c::Target::X86_64_V3,
                                      export_c::Target::X86_64_V4, export_c::Target::Aarch64};
  int models = 0;
  for (const char* name : {"resnet18_w8_64", "mobilenetv2_x0.25_96", "mobilenetv3_small_x0.5_96", "squeezenet1_1_x0.5_64",
                           "shufflenetv2_x0.25_64", "densenet_g8_64", "convnext_d16_64", "unet_c8_64",
                           "transformer_encoder_d64_l2_s16", "vit_p8_d32_32", "lstm_tagger_h16_s12",
                           "gru_classifier_h16_s10"}) {
    const std::string file = root + name + "/model.onnx";
    onnx::Model m = onnx::import_model(file, fixed_dims(file));
    const std::vector<Tensor> inputs = model_inputs(m.graph.ir_graph(), 11);
    export_c::Options options;
    options.target = targets[models % 4];
    // every other model under AddressSanitizer and UBSan, the rest with the allocation check
    expect_model_matches(std::string(name) + " (" + export_c::target_name(options.target) + ")",
                         run_exported(m.graph.ir_graph(), inputs, options, models % 2 ? kSanitized : kNative),
                         smelt_outputs(m.graph.ir_graph(), inputs));
    ++models;
  }
  EXPECT_EQ(models, 12);
}

// 3x3 stride-1 convolutions with 16 channels or more run by Winograd's F(2x2, 3x3), fewer by
// im2col GEMM; odd and even sizes (tiles cut at the edge), paddings 0 to 2, a bias and relu in the
// GEMM's epilogue, two images, the products both ways (weights x tiles, or tiles x weights where
// a chunk's tiles fill MR-row panels better). The same graphs with --no-winograd by GEMM.
TEST_F(ExportC, WinogradConvolutionsMatchSmelt) {
  struct Case {
    int64_t c, o, h, w, pad;
    const char* call;  // what the run calls
    bool generic = false;  // the generic target's small blocking (KC 256, NC 128), else this machine's
  };
  const char* f2 = "\n    smelt_conv2d_winograd_f32(";
  const char* gemm = "\n    smelt_conv2d_f32(";
  int orientations[2] = {0, 0};
  // narrow images: no tile inside the image along x (3 wide, padding 1), a patch one column past
  // the image's edge (3 wide, no padding), padding as wide as the image
  for (const Case& k : {Case{16, 16, 9, 13, 1, f2}, Case{24, 32, 16, 11, 0, f2}, Case{17, 20, 7, 12, 2, f2},
                        Case{16, 24, 3, 65, 1, f2}, Case{16, 16, 32, 3, 1, f2}, Case{16, 16, 66, 3, 0, f2},
                        Case{16, 16, 30, 2, 2, f2}, Case{32, 16, 4, 4, 1, f2}, Case{16, 16, 1, 1, 1, f2},
                        // several chunks of tile rows and a shorter last one: 20 tile rows in chunks
                        // of 16 (weights x tiles); 10 in chunks of 9 (tiles x weights), with more
                        // channels than a KC block and more outputs than an NC one
                        Case{16, 16, 40, 128, 1, f2}, Case{260, 136, 20, 18, 1, f2, true},
                        Case{8, 16, 9, 9, 1, gemm}}) {
    manual_seed(uint64_t(k.c * 100 + k.h));
    // weights of standard deviation 1 / sqrt(taps): outputs of about the bias's size at any c
    const Tensor weight = randn({k.o, k.c, 3, 3}) * (1.0 / std::sqrt(double(9 * k.c))), bias = randn({k.o});
    const Graph g = Graph::trace([&](const std::vector<Tensor>& x, const std::vector<Tensor>&) -> std::vector<Tensor> {
      return {relu(conv2d(x[0], weight, bias, 1, k.pad))};
    }, {randn({2, k.c, k.h, k.w})});
    const std::vector<Tensor> inputs = {randn({2, k.c, k.h, k.w})};
    const std::vector<Tensor> want = smelt_outputs(g.ir_graph(), inputs);
    for (bool winograd : {true, false}) {
      export_c::Options options;
      options.winograd = winograd;
      if (k.generic) options.target = export_c::Target::Generic;
      const std::string name = "conv " + std::to_string(k.c) + "->" + std::to_string(k.o) + " " + std::to_string(k.h) +
                               "x" + std::to_string(k.w) + " pad " + std::to_string(k.pad) + (winograd ? "" : " (gemm)");
      expect_model_matches(name, run_exported(g.ir_graph(), inputs, options, kSanitized), want);
      const std::string text = read_all(path("model.c"));
      EXPECT_NE(text.find(winograd ? k.call : gemm), std::string::npos)
          << name << ": the run calls " << (winograd ? k.call : gemm);
      // which way the products ran: the call's 14th argument (runtime/conv.h `transposed`)
      const size_t call = text.find(f2);
      if (!winograd || call == std::string::npos) continue;
      std::string arg;
      std::istringstream args(text.substr(call + std::strlen(f2)));
      for (int i = 0; i < 14; ++i) std::getline(args, arg, ',');
      ++orientations[std::stoi(arg)];
    }
  }
  // both ways taken by some case: the 16 products as weights x tiles and as tiles x weights
  EXPECT_GT(orientations[0], 0);
  EXPECT_GT(orientations[1], 0);
}

// Pooling on images wide enough for the vectorized blocks (and their edges), with NaN, infinities
// and signed zeros in the input: max pooling picks smelt's bits (the first largest tap, a NaN
// wins; with strides 1 to 3 (taps in every stride phase), padding (wider than a 1x2 image too),
// dilation at each stride, and windows wider than the padded image's interior),
// average pooling with and without count_include_pad agrees.
TEST_F(ExportC, PoolingMatchesSmelt) {
  const Tensor example = testing::special_values({2, 3, 41, 45}, 7, 5);
  const Graph g = Graph::trace([](const std::vector<Tensor>& x, const std::vector<Tensor>&) -> std::vector<Tensor> {
    return {avg_pool2d(x[0], 3, 2, 1, true), avg_pool2d(x[0], 3, 1, 1, false),
            max_pool2d(x[0], 3, 2, 1), max_pool2d(x[0], 2, 1, 0), max_pool2d(x[0], {3, 5}, {1, 2}, {1, 2}),
            max_pool2d(x[0], {3, 2}, {2, 3}, {1, 1}, {2, 3}), max_pool2d(x[0], {3, 45}, 1, {1, 22}),
            // taps in each phase of stride 3; dilation at strides 1 and 2
            max_pool2d(x[0], 3, 3, 1), max_pool2d(x[0], {3, 3}, 1, {1, 1}, {1, 2}),
            max_pool2d(x[0], {2, 3}, {1, 2}, {0, 1}, {1, 2}),
            // a stride far past the image: the window-at-a-time loop, no scratch sized by it
            max_pool2d(x[0], 3, {2, 100000}, 1)};
  }, {example});
  // Ties that only the tap order decides: windows of +0, -0, -1 and NaNs of different payloads.
  std::vector<float> ties(size_t(2 * 3 * 41 * 45));
  for (size_t k = 0; k < ties.size(); ++k) {
    const uint32_t nan_bits = 0x7fc00000u | uint32_t(k & 0xffff);
    float nan;
    std::memcpy(&nan, &nan_bits, sizeof nan);
    const size_t r = (k * 2654435761u) % 23;
    ties[k] = r < 9 ? 0.0f : r < 18 ? -0.0f : r < 22 ? -1.0f : nan;
  }
  for (const Tensor& input : {testing::special_values({2, 3, 41, 45}, 9, 5), from_vector(ties, {2, 3, 41, 45})}) {
    const std::vector<Tensor> got = run_exported(g.ir_graph(), {input}, {}, kSanitized);
    const std::vector<Tensor> want = smelt_outputs(g.ir_graph(), {input});
    ASSERT_EQ(got.size(), 11u);
    for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(testing::all_close(got[i], want[i], 1e-5, 1e-6)) << "avg pool " << i;
    for (size_t i = 2; i < 11; ++i) EXPECT_TRUE(testing::same_bits(got[i], want[i])) << "max pool " << i;
  }
  // padding wider than the image: a 1x2 image in a 3x5 window padded by 1 and 2
  const Graph tiny = Graph::trace([](const std::vector<Tensor>& x, const std::vector<Tensor>&) -> std::vector<Tensor> {
    return {max_pool2d(x[0], {3, 5}, 1, {1, 2})};
  }, {randn({1, 2, 1, 2})});
  const Tensor tiny_ties = from_vector(std::vector<float>(ties.begin(), ties.begin() + 4), {1, 2, 1, 2});
  for (const Tensor& input : {testing::special_values({1, 2, 1, 2}, 3, 1), tiny_ties}) {
    const std::vector<Tensor> got = run_exported(tiny.ir_graph(), {input}, {}, kSanitized);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(testing::same_bits(got[0], smelt_outputs(tiny.ir_graph(), {input})[0])) << "max pool on a 1x2 image";
  }
}

// The MLP of the bench, smaller, traced from nn modules.
Graph mlp_graph() {
  manual_seed(3);
  nn::Linear l1(64, 48), l2(48, 10);
  return Graph::trace([&](const std::vector<Tensor>& x, const std::vector<Tensor>&) -> std::vector<Tensor> {
    return {l2.forward(relu(l1.forward(x[0])))};
  }, {randn({4, 64})});
}

TEST_F(ExportC, MlpWithWeightsInAFile) {
  const Graph g = mlp_graph();
  manual_seed(4);
  const std::vector<Tensor> inputs = {randn({4, 64})};
  export_c::Options options;
  options.name = "mlp";
  options.weights = export_c::Weights::File;
  export_c::Exported e;
  expect_model_matches("mlp", run_exported(g.ir_graph(), inputs, options, kNative, &e),
                       smelt_outputs(g.ir_graph(), inputs));
  // every parameter once; the weight matrices packed for the GEMM, padded to whole panels
  const int64_t params = int64_t(sizeof(float)) * (64 * 48 + 48 + 48 * 10 + 10);
  EXPECT_GE(e.weight_bytes, params);
  EXPECT_LT(e.weight_bytes, 2 * params);
  EXPECT_GE(int64_t(read_all(path("mlp.weights")).size()), e.weight_bytes);
  EXPECT_NE(read_all(path("mlp.h")).find("MLP_WEIGHTS_BYTES"), std::string::npos);
  EXPECT_EQ(read_all(path("mlp.c")).find("static _Alignas"), read_all(path("mlp.c")).find("static _Alignas(64) unsigned char mlp_arena"))
      << "weights in a file: model.c holds no weight array";
}

// Cross-compiled for aarch64 and run under qemu: the same C, another architecture and compiler.
TEST_F(ExportC, Aarch64UnderQemu) {
  if (!have("aarch64-linux-gnu-gcc") || !have("qemu-aarch64")) {
    GTEST_SKIP() << "aarch64-linux-gnu-gcc or qemu-aarch64 missing (scripts/install-deps.sh installs them)";
  }
  const std::string file = std::string(SMELT_TEST_DIR) + "/models/small/transformer_encoder_d64_l2_s16/model.onnx";
  onnx::Model m = onnx::import_model(file, fixed_dims(file));
  const std::vector<Tensor> inputs = model_inputs(m.graph.ir_graph(), 21);
  export_c::Options options;
  options.target = export_c::Target::Aarch64;
  expect_model_matches("transformer on aarch64", run_exported(m.graph.ir_graph(), inputs, options, kAarch64),
                       smelt_outputs(m.graph.ir_graph(), inputs));
}

// A token id out of range ends the run with the step's number, reading nothing out of bounds.
TEST_F(ExportC, AnIndexOutOfRangeIsAnErrorCode) {
  manual_seed(5);
  const Tensor table = randn({10, 4});
  const std::vector<Tensor> example = {from_vector(std::vector<int64_t>{1, 2, 3}, {3})};
  const Graph g = Graph::trace([&](const std::vector<Tensor>& x, const std::vector<Tensor>&) -> std::vector<Tensor> {
    return {index_select(table, 0, x[0])};
  }, example);
  const Tensor good = from_vector(std::vector<int64_t>{9, 0, 4}, {3});
  expect_model_matches("index_select", run_exported(g.ir_graph(), {good}), smelt_outputs(g.ir_graph(), {good}));
  const Tensor bad = from_vector(std::vector<int64_t>{1, 10, 4}, {3});
  write_all(path("in0.bin"), std::string(static_cast<const char*>(bad.raw_data()), 3 * sizeof(int64_t)));
  const int status = std::system(("cd " + dir_ + " && ./prog > run.log 2>&1").c_str());
  EXPECT_NE(status, 0);
  EXPECT_NE(read_all(path("run.log")).find("rc 1 1"), std::string::npos) << read_all(path("run.log"));
}

// Graphs at the edges: an empty batch, an output that is the input itself, one value returned
// twice, an output that is a constant, a size-1 everything.
TEST_F(ExportC, EdgeGraphs) {
  manual_seed(6);
  const Tensor w = randn({5, 3}), c = randn({2, 2});
  for (const Shape& shape : {Shape{0, 5}, Shape{1, 5}}) {
    const std::vector<Tensor> inputs = {randn(shape)};
    const Graph at = Graph::trace([&](const std::vector<Tensor>& x, const std::vector<Tensor>&) -> std::vector<Tensor> {
      const Tensor y = relu(matmul(x[0], w));
      return {y, x[0], y, c};
    }, inputs);
    const std::vector<Tensor> got = run_exported(at.ir_graph(), inputs, {}, kSanitized);
    const std::vector<Tensor> want = smelt_outputs(at.ir_graph(), inputs);
    ASSERT_EQ(got.size(), 4u) << shape_str(shape);
    for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(testing::same_bits(got[i], want[i])) << shape_str(shape) << " output " << i;
  }
}

TEST_F(ExportC, ClearErrors) {
  const Graph g = mlp_graph();
  export_c::Options bad_name;
  bad_name.name = "9lives";
  testing::expect_error([&] { export_c::export_graph(g.ir_graph(), bad_name); }, {"not a C identifier", "9lives"});
  testing::expect_error([] { export_c::target_from_name("riscv"); }, {"unknown target", "x86-64-v4"});
  // an op without C: topk
  const Graph topk_graph = Graph::trace([](const std::vector<Tensor>& x, const std::vector<Tensor>&) -> std::vector<Tensor> {
    return {ops::call(ops::OpId::topk, {x[0]}, {{"k", int64_t(2)}, {"dim", int64_t(-1)}, {"largest", int64_t(1)}})[0]};
  }, {randn({3, 5})});
  testing::expect_error([&] { export_c::export_graph(topk_graph.ir_graph(), {}); }, {"no code for", "topk"});
}

}  // namespace
}  // namespace smelt
