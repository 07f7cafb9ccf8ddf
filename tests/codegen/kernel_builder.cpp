#include <gtest/gtest.h>

#include "codegen/kernel_builder.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace smelt::codegen::testing {
namespace {

std::vector<std::string>& dirs_to_remove() {
  static std::vector<std::string> dirs;
  return dirs;
}

class RemoveDirs : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::string& d : dirs_to_remove()) std::filesystem::remove_all(d);
  }
};
[[maybe_unused]] ::testing::Environment* const kRemoveDirs = ::testing::AddGlobalTestEnvironment(new RemoveDirs);

}  // namespace

std::string temp_dir(const std::string& tag) {
  std::string pattern = (std::filesystem::temp_directory_path() / ("smelt-codegen-" + tag + "-XXXXXX")).string();
  char* made = ::mkdtemp(pattern.data());
  if (!made) throw std::runtime_error("mkdtemp failed");
  dirs_to_remove().push_back(made);
  return made;
}

KernelCache& shared_cache() {
  static KernelCache* cache = [] {
    KernelCacheOptions o = KernelCacheOptions::from_env();
    o.dir = temp_dir("cache");
    o.sync_compile = true;
    return new KernelCache(o);  // never destroyed: loaded kernels stay valid until exit
  }();
  return *cache;
}

RunResult run_both(const LoopKernel& kernel, const std::vector<Tensor>& args) {
  validate(kernel);
  RunResult r;
  for (int backend = 0; backend < 2; ++backend) {
    std::vector<Tensor> bufs;
    std::vector<void*> ptrs;
    for (size_t i = 0; i < args.size(); ++i) {
      bufs.push_back(kernel.args[i].output ? args[i].clone() : args[i]);
      ptrs.push_back(bufs.back().raw_data());
    }
    if (backend == 0) {
      run_interpreted(kernel, ptrs.data());
    } else {
      auto compiled = shared_cache().compile(kernel);
      if (!compiled) throw std::runtime_error("no compiler for the codegen tests");
      compiled->entry(ptrs.data());
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (kernel.args[i].output) (backend == 0 ? r.interpreted : r.compiled).push_back(bufs[i]);
    }
  }
  return r;
}

::testing::AssertionResult bit_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    return ::testing::AssertionFailure() << "dtype or shape differ: " << dtype_name(a.dtype()) << " vs "
                                         << dtype_name(b.dtype());
  }
  Tensor ca = a.contiguous(), cb = b.contiguous();
  const size_t size = dtype_size(a.dtype());
  const char* pa = static_cast<const char*>(ca.raw_data());
  const char* pb = static_cast<const char*>(cb.raw_data());
  auto is_nan = [&](const char* p) {
    if (a.dtype() == DType::Float32) return std::isnan(*reinterpret_cast<const float*>(p));
    if (a.dtype() == DType::Float64) return std::isnan(*reinterpret_cast<const double*>(p));
    return false;
  };
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (is_nan(pa + i * size) && is_nan(pb + i * size)) continue;
    if (std::memcmp(pa + i * size, pb + i * size, size) != 0) {
      std::vector<double> va = ca.reshape({-1}).slice(0, i, i + 1).to_vector();
      std::vector<double> vb = cb.reshape({-1}).slice(0, i, i + 1).to_vector();
      return ::testing::AssertionFailure() << "element " << i << " differs: " << va[0] << " vs " << vb[0];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace smelt::codegen::testing
