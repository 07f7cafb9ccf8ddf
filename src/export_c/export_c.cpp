// The C export: compile, bind the plan once, and write its steps as C (export_c.h).
//
// Every slot of the plan is addressed from its root: an input or output pointer of <name>_run, a
// weight, or the arena at the memory plan's offset. The plan is run once on zeros at export time
// so that each slot's tensor, as the plan binds it, gives its exact address relative to its root
// and its strides (views, aliases and cat slices included): the export reads the plan's own
// binding instead of re-deriving it.
#include "export_c/export_c.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "codegen/emit_cpp.h"
#include "codegen/kernel_headers.h"
#include "export_c/op_calls.h"
#include "export_c/runtime_texts.h"
#include "kernels/scalar_table.h"
#include "passes/pass_manager.h"
#include "runtime/layout_choice.h"
#include "runtime/pipeline.h"
#include "runtime/plan_impl.h"
#include "smelt/creation.h"
#include "smelt/error.h"

namespace smelt::export_c {
namespace {

using runtime::Plan;
using runtime::Slot;
using runtime::Step;
using runtime::StepKind;

constexpr int64_t kAlign = 64;  // every weight and the scratch region start at a multiple of it

int64_t round_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string shape_list(const Shape& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t.empty() ? "1" : t;
}

// One element of a weight as a C literal of its type (floating values exact, as hex floats).
void literal(std::ostream& out, DType dtype, const unsigned char* p) {
  char buf[48];
  switch (dtype) {
    case DType::Float32: {
      float v;
      std::memcpy(&v, p, 4);
      if (std::isnan(v)) out << "NAN";
      else if (std::isinf(v)) out << (v < 0 ? "-INFINITY" : "INFINITY");
      else { std::snprintf(buf, sizeof buf, "%af", double(v)); out << buf; }
      return;
    }
    case DType::Float64: {
      double v;
      std::memcpy(&v, p, 8);
      if (std::isnan(v)) out << "NAN";
      else if (std::isinf(v)) out << (v < 0 ? "-INFINITY" : "INFINITY");
      else { std::snprintf(buf, sizeof buf, "%a", v); out << buf; }
      return;
    }
    case DType::Int64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      if (v == INT64_MIN) out << "INT64_MIN";
      else out << "INT64_C(" << v << ")";
      return;
    }
    case DType::Int32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      if (v == INT32_MIN) out << "INT32_MIN";
      else out << v;
      return;
    }
    case DType::UInt8: out << int(*p); return;
    case DType::Int8: out << int(*reinterpret_cast<const int8_t*>(p)); return;
    case DType::Bool: out << (*p ? 1 : 0); return;
  }
}

class Writer {
 public:
  Writer(const Plan::Impl& plan, const Options& options) : p_(plan), o_(options), sym_(options.name + "_") {}

  Exported write() {
    address_slots();
    std::ostringstream run;
    std::set<std::string> missing;
    for (size_t i = 0; i < p_.steps.size(); ++i) step(p_.steps[i], int(i), run, &missing);
    if (!missing.empty()) {
      std::string list;
      for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
      SMELT_CHECK(false) << "export-c: the compiled plan runs ops the C export has no code for: " << list
                         << "; exportable: every fused kernel and the ops of export_c/runtime (gemm.h, conv.h, ops.h)";
    }
    write_weights(run.str());
    Exported e;
    e.scratch_bytes = scratch_;
    e.arena_bytes = round_up(p_.memory.arena_bytes) + round_up(scratch_);
    e.weight_bytes = weight_bytes_;
    e.kernels = kernels_;
    e.op_calls = op_calls_;
    e.files.push_back({o_.name + ".h", header(e)});
    e.files.push_back({o_.name + ".c", source(e, run.str())});
    if (o_.weights == Weights::File) e.files.push_back({o_.name + ".weights", weight_file_});
    std::ostringstream s;
    s << o_.name << ".c: " << p_.steps.size() << " steps (" << kernels_ << " fused kernels as C, " << op_calls_
      << " op calls), " << kernel_defs_.size() << " kernel functions\n";
    s << "arena " << e.arena_bytes << " bytes (memory plan " << p_.memory.arena_bytes << ", scratch " << scratch_
      << "), weights " << weight_bytes_ << " bytes (" << (o_.weights == Weights::File ? "file" : "embedded") << ")\n";
    e.summary = s.str();
    return e;
  }

 private:
  // The address of every slot: its root's base plus the byte distance the plan's binding shows.
  void address_slots() {
    address_.resize(p_.slots.size());
    for (size_t i = 0; i < p_.slots.size(); ++i) {
      const int root = p_.root(int(i));
      const Slot& r = p_.slots[size_t(root)];
      std::string base;
      if (const auto* in = r.as<runtime::InputSlot>()) {
        base = "(unsigned char*)in" + std::to_string(in->index);
      } else if (const auto* out = r.as<runtime::OutputSlot>()) {
        base = "(unsigned char*)out" + std::to_string(out->index);
      } else if (r.as<runtime::ArenaSlot>()) {
        const auto* storage = static_cast<const unsigned char*>(p_.arena->data());
        base = "(arena + " + std::to_string(static_cast<const unsigned char*>(p_.tensors[size_t(root)].raw_data()) - storage) + ")";
      } else if (r.as<runtime::ConstantSlot>()) {
        base = "(unsigned char*)" + weight(p_.tensors[size_t(root)]);
      } else {
        SMELT_INTERNAL_CHECK(false) << "export-c: slot " << root << " has no root";
      }
      const Tensor& t = p_.tensors[i];
      const int64_t delta = static_cast<const unsigned char*>(t.raw_data()) -
                            static_cast<const unsigned char*>(p_.tensors[size_t(root)].raw_data());
      address_[i] = delta == 0 ? base : "(" + base + " + " + std::to_string(delta) + ")";
    }
  }

  // The pointer expression of slot `s` typed as its dtype.
  std::string typed(int s, bool constant) const {
    const Tensor& t = p_.tensors[size_t(s)];
    return std::string("((") + (constant ? "const " : "") + kernels::dtype_cpp_type(t.dtype()) + "*)(" +
           address_[size_t(s)] + "))";
  }

  Operand operand(int s, bool constant) const {
    const Tensor& t = p_.tensors[size_t(s)];
    Operand o{typed(s, constant), t.dtype(), t.shape(), t.strides(), Tensor()};
    if (p_.slots[size_t(s)].as<runtime::ConstantSlot>()) o.constant = t;
    return o;
  }

  // The symbol of constant `t`'s weight, written on first sight (one per distinct memory).
  std::string weight(const Tensor& given) {
    const Tensor t = given.is_contiguous() ? given : given.contiguous();
    held_.push_back(t);  // keeps the memory behind the key alive
    const DType dtype = t.dtype();
    const int64_t esize = int64_t(dtype_size(dtype)), n = t.numel(), bytes = n * esize;
    const auto* data = static_cast<const unsigned char*>(t.raw_data());
    const auto key = std::make_tuple(static_cast<const void*>(data), bytes, dtype);
    auto found = weight_of_.find(key);
    if (found != weight_of_.end()) return found->second;
    const std::string name = sym_ + "w" + std::to_string(weight_of_.size());
    weight_of_[key] = name;
    weight_list_.emplace_back(name, t);
    return name;
  }

  // Whether `text` names `symbol` (not only a longer identifier starting with it).
  static bool mentions(const std::string& text, const std::string& symbol) {
    for (size_t at = text.find(symbol); at != std::string::npos; at = text.find(symbol, at + 1)) {
      const size_t end = at + symbol.size();
      if (end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) return true;
    }
    return false;
  }

  // The weights the run's code reads (a weight the export packed for the GEMM replaces the plan's
  // own): const arrays, or their offsets in the weights file.
  void write_weights(const std::string& run) {
    for (const auto& [name, t] : weight_list_) {
      if (!mentions(run, name)) continue;
      const DType dtype = t.dtype();
      const int64_t esize = int64_t(dtype_size(dtype)), n = t.numel(), bytes = n * esize;
      const auto* data = static_cast<const unsigned char*>(t.raw_data());
      weight_bytes_ += bytes;
      if (o_.weights == Weights::File) {
        weight_file_.resize(size_t(round_up(int64_t(weight_file_.size()))), '\0');
        weights_ << "#define " << name << " (weights + " << weight_file_.size() << ")  /* " << dtype_name(dtype)
                 << "[" << n << "] */\n";
        weight_file_.append(reinterpret_cast<const char*>(data), size_t(bytes));
        continue;
      }
      weights_ << "static _Alignas(" << kAlign << ") const " << kernels::dtype_cpp_type(dtype) << " " << name << "["
               << std::max<int64_t>(n, 1) << "] = {";
      for (int64_t k = 0; k < n; ++k) {
        weights_ << (k % 8 == 0 ? "\n  " : " ");
        literal(weights_, dtype, data + k * esize);
        weights_ << ",";
      }
      if (n == 0) weights_ << "0";
      weights_ << "\n};\n";
    }
  }

  // The C function of kernel `k`, emitted on first sight (one per distinct kernel).
  std::string kernel(const codegen::LoopKernel& k) {
    const std::string text = codegen::print_kernel(k);
    auto found = kernel_symbol_.find(text);
    if (found != kernel_symbol_.end()) return found->second;
    const std::string symbol = sym_ + "k" + std::to_string(kernel_symbol_.size());
    kernel_symbol_[text] = symbol;
    kernel_defs_.push_back(codegen::emit_c(k, symbol));
    return symbol;
  }

  void kernel_call(const codegen::LoopKernel& k, const std::vector<int>& arg_slots, int index, std::ostream& run) {
    const std::string symbol = kernel(k);
    run << "  {  /* step " << index << ": " << k.name << " */\n    void* const a[] = {" << arg_list(k, arg_slots) << "};\n";
    for (const codegen::IndexCheck& c : k.index_checks) {
      // the kernel assumes its indices in range (codegen::check_indices): a bad one is an error code
      const int64_t n = k.args[size_t(c.arg)].numel;
      run << "    for (int64_t i = 0; i < " << n << "; ++i) {\n      const int64_t v = ((const int64_t*)a[" << c.arg
          << "])[i];\n      if ((v < 0 || v >= " << c.extent << ") && v != " << c.ignore << ") return " << index + 1
          << ";  /* " << c.op << ": an index out of range */\n    }\n";
    }
    run << "    " << symbol << "(a);\n  }\n";
    ++kernels_;
  }

  // The op of a step; with `epilogue` (a tiled kernel), run on each tile of the product as the
  // contraction finishes it. Returns false when the op cannot take the epilogue.
  bool op(ops::OpId id, const ops::Attrs& attrs, const std::vector<int>& in, const std::vector<int>& out, int index,
          std::ostream& run, std::set<std::string>* missing, const codegen::LoopKernel* epilogue = nullptr,
          const std::vector<int>& epilogue_slots = {}) {
    std::vector<Operand> ins, outs;
    for (int s : in) ins.push_back(operand(s, true));
    for (int s : out) outs.push_back(operand(s, false));
    Sink sink{[this](const codegen::LoopKernel& k) { return kernel(k); },
              [this](const Tensor& t) { return weight(t); }, gemm_tile(target_name(o_.target)), o_.winograd};
    std::string why, setup;
    if (epilogue) {
      setup = "    void* const ea[] = {" + arg_list(*epilogue, epilogue_slots) + "};\n    const smelt_epilogue ep = {" +
              kernel(*epilogue) + "_tile, ea, 0};\n";
    }
    std::optional<OpCall> call = op_call(id, attrs, ins, outs, "scratch", "return " + std::to_string(index + 1) + ";",
                                         sink, &why, epilogue ? "(&ep)" : "");
    if (!call && epilogue && why.empty()) return false;
    if (!call) {
      missing->insert(std::string(ops::op_name(id)) + (why.empty() ? "" : " (" + why + ")"));
      return true;
    }
    scratch_ = std::max(scratch_, call->scratch_bytes);
    run << "  {  /* step " << index << ": " << ops::op_name(id) << (epilogue ? ", its epilogue " + epilogue->name + " in its tiles" : "")
        << " */\n" << setup << call->code << "  }\n";
    ++op_calls_;
    if (epilogue) ++kernels_;
    return true;
  }

  // The argument pointers of kernel `k` bound to `slots`; an argument the kernel never reads or
  // writes (an epilogue's view of the contraction's own operands) is a null pointer.
  std::string arg_list(const codegen::LoopKernel& k, const std::vector<int>& slots) const {
    std::vector<bool> touched(slots.size(), false);
    for (const codegen::Access& a : k.accesses) touched[size_t(a.arg)] = true;
    std::string t;
    for (size_t i = 0; i < slots.size(); ++i) {
      t += (i ? ", " : "") + (touched[i] ? "(void*)" + address_[size_t(slots[i])] : std::string("(void*)0"));
    }
    return t;
  }

  void step(const Step& s, int index, std::ostream& run, std::set<std::string>* missing) {
    switch (s.kind) {
      case StepKind::Kernel: kernel_call(s.kernel->kernel(), s.arg_slots, index, run); return;
      case StepKind::Op: op(s.op, s.attrs, s.in_slots, s.out_slots, index, run, missing); return;
      case StepKind::TiledContraction:  // the epilogue in the product's tiles, else whole after it
        if (s.kernel->kernel().index_checks.empty() &&
            op(s.op, s.attrs, s.op_slots, {s.product_slot}, index, run, missing, &s.kernel->kernel(), s.arg_slots)) {
          return;
        }
        op(s.op, s.attrs, s.op_slots, {s.product_slot}, index, run, missing);
        kernel_call(s.kernel->kernel(), s.arg_slots, index, run);
        return;
      case StepKind::Interpret: missing->insert("an interpreted group (" + s.what + ")"); return;
    }
  }

  std::string io_params(bool with_arena) const {
    std::string t;
    if (o_.weights == Weights::File) t += "const void* weights_memory, ";
    if (with_arena) t += "void* arena_memory, ";
    for (size_t i = 0; i < p_.input_metas.size(); ++i) {
      t += std::string("const ") + kernels::dtype_cpp_type(p_.input_metas[i].dtype) + "* in" + std::to_string(i) + ", ";
    }
    for (size_t i = 0; i < p_.output_slots.size(); ++i) {
      const DType d = p_.slots[size_t(p_.output_slots[i])].meta.dtype;
      t += std::string(kernels::dtype_cpp_type(d)) + "* out" + std::to_string(i) + ", ";
    }
    return t.substr(0, t.size() - 2);
  }

  std::string io_args() const {
    std::string t;
    if (o_.weights == Weights::File) t += "weights_memory, ";
    t += o_.name + "_arena, ";
    for (size_t i = 0; i < p_.input_metas.size(); ++i) t += "in" + std::to_string(i) + ", ";
    for (size_t i = 0; i < p_.output_slots.size(); ++i) t += "out" + std::to_string(i) + ", ";
    return t.substr(0, t.size() - 2);
  }

  std::string header(const Exported& e) const {
    const std::string N = upper(o_.name);
    std::ostringstream h;
    h << "/* " << o_.name << ".h: a model exported by smelt (smelt export-c), C11, libm only.\n"
      << " * Build: cc -std=c11 -O3 [-march=native] -c " << o_.name << ".c (add -fopenmp-simd -DSMELT_OPENMP_SIMD\n"
      << " * for vectorized reductions; -fopenmp -DSMELT_THREADS for threads). Target: " << target_name(o_.target)
      << ". */\n";
    h << "#ifndef " << N << "_H\n#define " << N << "_H\n\n#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n\n";
    h << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
    h << "/* Bytes of the working memory one run needs (intermediates and scratch). */\n";
    h << "#define " << N << "_ARENA_BYTES " << e.arena_bytes << "\n";
    if (o_.weights == Weights::File) {
      h << "/* Bytes of " << o_.name << ".weights, which the caller loads into memory aligned to " << kAlign
        << " bytes and passes to every run. */\n#define " << N << "_WEIGHTS_BYTES " << weight_file_.size() << "\n";
    }
    for (size_t i = 0; i < p_.input_metas.size(); ++i) {
      const auto& m = p_.input_metas[i];
      h << "#define " << N << "_INPUT" << i << "_NUMEL " << shape_numel(m.shape) << "  /* " << dtype_name(m.dtype)
        << " [" << shape_list(m.shape) << "] */\n";
    }
    for (size_t i = 0; i < p_.output_slots.size(); ++i) {
      const auto& m = p_.slots[size_t(p_.output_slots[i])].meta;
      h << "#define " << N << "_OUTPUT" << i << "_NUMEL " << shape_numel(m.shape) << "  /* " << dtype_name(m.dtype)
        << " [" << shape_list(m.shape) << "] */\n";
    }
    h << "\nextern const size_t " << o_.name << "_arena_bytes;\n\n";
    h << "/* Runs the model on the static arena (not reentrant). Returns 0, or the number of the step that\n"
      << " * refused its input (an index out of range). Inputs and outputs are contiguous, row-major. */\n";
    h << "int " << o_.name << "_run(" << io_params(false) << ");\n";
    h << "/* The same on a caller-provided arena of " << N << "_ARENA_BYTES bytes aligned to " << kAlign
      << ": reentrant for distinct arenas. */\n";
    h << "int " << o_.name << "_run_with(" << io_params(true) << ");\n\n";
    h << "#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
    return h.str();
  }

  std::string source(const Exported& e, const std::string& run) const {
    const std::string N = upper(o_.name);
    std::ostringstream c;
    c << "/* " << o_.name << ".c: generated by smelt export-c. Do not edit; regenerate. See " << o_.name << ".h. */\n";
    c << "#include \"" << o_.name << ".h\"\n\n";
    c << "/* ---- smelt's float32 math (src/kernels/scalar_f32.h) ---- */\n" << scalar_f32_text() << "\n";
    c << "/* ---- src/export_c/runtime/scalar.h ---- */\n" << runtime_text("export_c/runtime/scalar.h") << "\n";
    if (op_calls_ > 0) {
      const GemmTile tile = gemm_tile(target_name(o_.target));
      c << "/* the GEMM's register tile for " << target_name(o_.target) << ": the weights are packed for it */\n";
      c << "#define SMELT_GEMM_MR " << tile.mr << "\n#define SMELT_GEMM_NR " << tile.nr << "\n#define SMELT_GEMM_KC "
        << tile.kc << "\n#define SMELT_GEMM_MC " << tile.mc << "\n#define SMELT_GEMM_NC " << tile.nc << "\n";
      for (const char* part : {"gemm.h", "conv.h", "ops.h"}) {
        c << "/* ---- src/export_c/runtime/" << part << " ---- */\n" << runtime_text(std::string("export_c/runtime/") + part)
          << "\n";
      }
    }
    c << "/* ---- weights ---- */\n" << weights_.str() << "\n";
    c << "/* ---- fused kernels ---- */\n";
    for (const std::string& k : kernel_defs_) c << k << "\n";
    c << "/* ---- the run ---- */\n";
    c << "const size_t " << o_.name << "_arena_bytes = " << N << "_ARENA_BYTES;\n";
    c << "static _Alignas(" << kAlign << ") unsigned char " << o_.name << "_arena[" << N << "_ARENA_BYTES > 0 ? " << N
      << "_ARENA_BYTES : 1];\n\n";
    c << "int " << o_.name << "_run_with(" << io_params(true) << ") {\n";
    c << "  unsigned char* const arena = (unsigned char*)arena_memory;\n";
    c << "  SMELT_UNUSED unsigned char* const scratch = arena + " << round_up(p_.memory.arena_bytes) << ";\n";
    if (o_.weights == Weights::File) c << "  const unsigned char* const weights = (const unsigned char*)weights_memory;\n";
    c << run << "  return 0;\n}\n\n";
    c << "int " << o_.name << "_run(" << io_params(false) << ") {\n  return " << o_.name << "_run_with(" << io_args()
      << ");\n}\n";
    (void)e;
    return c.str();
  }

  static std::string scalar_f32_text() {
    for (const codegen::KernelHeader& h : codegen::kernel_headers()) {
      if (std::string(h.path) == "kernels/scalar_f32.h") return h.text;
    }
    SMELT_INTERNAL_CHECK(false) << "export-c: kernels/scalar_f32.h is not among the embedded kernel headers";
    return "";
  }

  const Plan::Impl& p_;
  Options o_;
  std::string sym_;
  std::vector<std::string> address_;  // per slot: an `unsigned char*` expression
  std::map<std::tuple<const void*, int64_t, DType>, std::string> weight_of_;
  std::vector<Tensor> held_;
  std::vector<std::pair<std::string, Tensor>> weight_list_;  // in order of first sight
  std::ostringstream weights_;
  std::string weight_file_;
  int64_t weight_bytes_ = 0;
  std::map<std::string, std::string> kernel_symbol_;  // printed kernel -> its function
  std::vector<std::string> kernel_defs_;
  int64_t scratch_ = 0;
  int kernels_ = 0, op_calls_ = 0;
};

}  // namespace

Target target_from_name(const std::string& name) {
  if (name == "generic") return Target::Generic;
  if (name == "x86-64-v3") return Target::X86_64_V3;
  if (name == "x86-64-v4") return Target::X86_64_V4;
  if (name == "aarch64") return Target::Aarch64;
  SMELT_CHECK(false) << "export-c: unknown target '" << name << "'; valid: generic, x86-64-v3, x86-64-v4, aarch64";
  return Target::Generic;
}

const char* target_name(Target target) {
  switch (target) {
    case Target::Generic: return "generic";
    case Target::X86_64_V3: return "x86-64-v3";
    case Target::X86_64_V4: return "x86-64-v4";
    case Target::Aarch64: return "aarch64";
  }
  return "generic";
}

std::string runtime_text(const std::string& path) {
  std::string known;
  for (const RuntimeText& t : runtime_texts()) {
    if (path == t.path) return t.text;
    known += std::string(known.empty() ? "" : ", ") + t.path;
  }
  SMELT_INTERNAL_CHECK(false) << "export-c: no embedded runtime text " << path << "; embedded: " << known;
  return "";
}

Exported export_graph(const ir::Graph& graph, const Options& options) {
  SMELT_CHECK(is_identifier(options.name))
      << "export-c: the name '" << options.name << "' is not a C identifier; valid: letters, digits and _, not first a digit";
  for (const ir::Value* v : graph.inputs()) {
    for (int64_t d : v->meta.shape) {
      SMELT_CHECK(d >= 0) << "export-c: input " << v->name << " has a symbolic size; give every dim a value (--dim)";
    }
  }
  runtime::PipelineOptions pipeline;
  // Plain layouts: the blocked one is for smelt's own convolution kernels.
  pipeline.passes = runtime::pipeline_without(passes::kDefaultPipeline, "blocked_layout");
  pipeline.follow_layout_tuning = false;
  pipeline.backend = runtime::KernelBackend::Interpreter;  // nothing to compile: the kernels become C
  runtime::CompiledGraph compiled = runtime::compile_graph(graph.clone(), pipeline);
  const Plan::Impl& p = compiled.plan->impl();
  SMELT_CHECK(p.updates.empty()) << "export-c: the graph updates its inputs in place (a training step); the C "
                                    "export writes inference graphs only";
  // One run binds every slot (Plan::Impl::bind): the addresses and strides the export writes. On
  // zeros, or ones where zeros are refused (an integer divisor); the values matter to nothing else.
  auto bind_on = [&](double value) {
    std::vector<Tensor> inputs;
    for (const ops::TensorMeta& m : p.input_metas) {
      inputs.push_back(full(m.shape, value, TensorOptions().dtype(m.dtype)));
    }
    compiled.plan->run(inputs);
  };
  try {
    bind_on(0);
  } catch (const Error&) {
    bind_on(1);
  }
  return Writer(p, options).write();
}

}  // namespace smelt::export_c
