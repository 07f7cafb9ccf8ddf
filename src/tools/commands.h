// The subcommands of build/smelt; each registers itself on the CLI11 app and runs from a callback.
#pragma once

namespace CLI {
class App;
}

namespace smelt::tools {

void register_info(CLI::App& app);  // smelt info: build and machine facts
void register_demo(CLI::App& app);  // smelt demo: train a CNN on digits
void register_demo_lm(CLI::App& app);  // smelt demo-lm: a character transformer on a text file
void register_fuzz(CLI::App& app);  // smelt fuzz: differential fuzzer of the pass pipeline
void register_opt(CLI::App& app);   // smelt opt: run passes over a text IR file
void register_cache(CLI::App& app); // smelt cache stats|clear: the disk cache of compiled kernels
void register_compile(CLI::App& app);  // smelt compile: fusion, kernels, memory plan of an IR file
void register_run(CLI::App& app);      // smelt run: import an ONNX model and run it
void register_check(CLI::App& app);    // smelt check: ONNX conformance cases against their outputs
void register_export(CLI::App& app);   // smelt export: a text IR graph as an ONNX model
void register_export_c(CLI::App& app); // smelt export-c: a model as standalone C11
void register_bench(CLI::App& app);    // smelt bench: an ONNX model, interpreted vs compiled
void register_tune(CLI::App& app);     // smelt tune: measure a model's convolutions, store the fastest
void register_quantize(CLI::App& app); // smelt quantize: post-training INT8 quantization of an ONNX model

}  // namespace smelt::tools
