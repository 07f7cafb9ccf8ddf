// The tuning file (runtime/tuning_file.h): conv_tune's decisions persist and are what later
// lookups choose; entries written by hand are obeyed; corrupt files (garbage, a changed byte under
// the checksum, a missing checksum) are detected, ignored and rebuilt; unknown implementation
// names fall back to the heuristic. Each test runs in its own process (gtest_discover_tests).
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "codegen/disk_cache.h"
#include "kernels/conv_select.h"
#include "runtime/tuning_file.h"
#include "support/temp_dir.h"

namespace smelt {
namespace {

using kernels::ConvImpl;

// A 1x1 convolution: the heuristic's choice is gemm with or without oneDNN in the build.
kernels::Conv2dGeometry pointwise() {
  kernels::Conv2dGeometry g;
  g.N = 1, g.C = 8, g.H = 12, g.W = 12, g.O = 8, g.kH = 1, g.kW = 1;
  g.Ho = 12, g.Wo = 12;
  return g;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A well-formed file with one entry.
std::string valid_file(const std::string& key, const std::string& impl) {
  const std::string body = "smelt tuning v1\n" + key + "\t" + impl + "\thand-written\n";
  return body + "checksum " + codegen::disk::hash_hex(body) + "\n";
}

class TuningFile : public testing::CacheDirTest {};

TEST_F(TuningFile, PathIsInTheCacheDirAndKeyed) {
  const std::string path = runtime::tuning_file_path();
  EXPECT_EQ(path.rfind(dir_ + "/tuning-", 0), 0u) << path;
  EXPECT_EQ(path.size(), dir_.size() + std::string("/tuning-").size() + 16 + 4) << path;
}

TEST_F(TuningFile, TunedChoiceIsStoredAndReadBack) {
  const kernels::Conv2dGeometry g = pointwise();
  const kernels::ConvTuneResult r = kernels::conv_tune(g, DType::Float32, 1);
  EXPECT_GE(r.times.size(), 2u);  // own and OpenBLAS GEMM at least
  const std::string text = read_all(runtime::tuning_file_path());
  EXPECT_NE(text.find(r.key + "\t" + kernels::conv_impl_name(r.best) + "\t"), std::string::npos) << text;
  runtime::tuning_file_reload();  // as a new process would
  EXPECT_EQ(kernels::conv_choice(g, DType::Float32), r.best);
  EXPECT_EQ(runtime::tuning_file_entries(), 1);
}

TEST_F(TuningFile, HandWrittenEntryIsObeyed) {
  const kernels::Conv2dGeometry g = pointwise();
  EXPECT_EQ(kernels::conv_choice(g, DType::Float32), ConvImpl::Gemm);  // the heuristic, no file yet
  write_all(runtime::tuning_file_path(), valid_file(kernels::conv_tuning_key(g, DType::Float32), "gemm_openblas"));
  runtime::tuning_file_reload();
  EXPECT_EQ(kernels::conv_choice(g, DType::Float32), ConvImpl::GemmOpenBlas);
  // Another dtype is another key: still the heuristic.
  EXPECT_EQ(kernels::conv_choice(g, DType::Float64), ConvImpl::Gemm);
}

TEST_F(TuningFile, UnknownImplementationFallsBackToTheHeuristic) {
  const kernels::Conv2dGeometry g = pointwise();
  write_all(runtime::tuning_file_path(), valid_file(kernels::conv_tuning_key(g, DType::Float32), "winograd"));
  runtime::tuning_file_reload();
  EXPECT_EQ(kernels::conv_choice(g, DType::Float32), ConvImpl::Gemm);
}

TEST_F(TuningFile, CorruptFilesAreDetectedAndRebuilt) {
  const kernels::Conv2dGeometry g = pointwise();
  const std::string key = kernels::conv_tuning_key(g, DType::Float32);
  std::string flipped = valid_file(key, "gemm_openblas");
  flipped[flipped.find("gemm_openblas")] = 'G';  // the checksum no longer matches
  std::string no_checksum = valid_file(key, "gemm_openblas");
  no_checksum.resize(no_checksum.find("checksum"));
  const std::string no_tabs_body = "smelt tuning v1\nno tabs here\n";
  const std::string no_tabs = no_tabs_body + "checksum " + codegen::disk::hash_hex(no_tabs_body) + "\n";
  for (const std::string& bad : {std::string("\x7f" "ELF garbage\0\1\2", 15), flipped, no_checksum, no_tabs}) {
    write_all(runtime::tuning_file_path(), bad);
    runtime::tuning_file_reload();
    EXPECT_EQ(kernels::conv_choice(g, DType::Float32), ConvImpl::Gemm);  // nothing from the bad file
    const std::string rebuilt = read_all(runtime::tuning_file_path());
    EXPECT_EQ(rebuilt, "smelt tuning v1\nchecksum " + codegen::disk::hash_hex("smelt tuning v1\n") + "\n");
    // The rebuilt file takes new decisions again.
    kernels::conv_tune(g, DType::Float32, 1);
    EXPECT_NE(read_all(runtime::tuning_file_path()).find(key), std::string::npos);
  }
}

}  // namespace
}  // namespace smelt
