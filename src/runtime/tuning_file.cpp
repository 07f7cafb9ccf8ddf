#include "runtime/tuning_file.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>

#include "base/log.h"
#include "codegen/disk_cache.h"
#include "codegen/kernel_cache.h"
#include "kernels/conv_onednn.h"
#include "kernels/conv_select.h"
#include "kernels/gemm.h"
#include "smelt/error.h"

#ifndef SMELT_VERSION
#define SMELT_VERSION "unknown"
#endif

namespace smelt::runtime {
namespace {

constexpr const char* kHeader = "smelt tuning v1";

struct Entry {
  std::string impl, detail;
};

std::string file_key_text() {
  return "cpu " + codegen::cpu_features() + "\nsmelt " + SMELT_VERSION + "\nopenblas " +
         kernels::gemm_openblas_config() + "\n" + kernels::onednn_version();
}

std::string serialize(const std::map<std::string, Entry>& entries) {
  std::string body = std::string(kHeader) + "\n";
  for (const auto& [key, e] : entries) body += key + "\t" + e.impl + "\t" + e.detail + "\n";
  return body + "checksum " + codegen::disk::hash_hex(body) + "\n";
}

// Parses `text` into `out`; "" when intact, else what is wrong.
std::string parse(const std::string& text, std::map<std::string, Entry>* out) {
  const size_t tail = text.rfind("checksum ");
  if (text.rfind(std::string(kHeader) + "\n", 0) != 0) return "no '" + std::string(kHeader) + "' header";
  if (tail == std::string::npos) return "no checksum line";
  const std::string body = text.substr(0, tail);
  if (text.substr(tail) != "checksum " + codegen::disk::hash_hex(body) + "\n") return "checksum mismatch";
  std::istringstream lines(body);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    const size_t a = line.find('\t'), b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (b == std::string::npos) return "a line without key, implementation and measurements";
    (*out)[line.substr(0, a)] = {line.substr(a + 1, b - a - 1), line.substr(b + 1)};
  }
  return "";
}

void write_atomically(const std::string& path, const std::string& bytes) {
  const std::string temp = path + codegen::disk::unique_suffix();
  codegen::disk::write_file(temp, bytes);
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    SMELT_CHECK(false) << "tuning file: cannot rename " << temp << " to " << path;
  }
}

class FileStore final : public kernels::ConvTuningStore {
 public:
  std::optional<std::string> lookup(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    load();
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return it->second.impl;
  }

  void record(const std::string& key, const std::string& impl, const std::string& detail) override {
    std::lock_guard<std::mutex> lock(mutex_);
    load();
    // Another process may have added entries since: merge them in before writing the whole file.
    std::map<std::string, Entry> on_disk;
    std::string text;
    if (codegen::disk::read_file(path_, &text) && parse(text, &on_disk).empty()) {
      for (auto& [k, e] : on_disk) entries_.emplace(k, e);
    }
    entries_[key] = {impl, detail};
    try {
      codegen::disk::make_dirs(dir_);
      write_atomically(path_, serialize(entries_));
    } catch (const Error& e) {
      warn(std::string("tuning file not written: ") + e.what());  // the decision still holds in this process
    }
  }

  void reload() {
    std::lock_guard<std::mutex> lock(mutex_);
    loaded_ = false;
    entries_.clear();
  }

  int size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return int(entries_.size());
  }

 private:
  void load() {
    if (loaded_) return;
    loaded_ = true;
    dir_ = codegen::default_cache_dir();
    path_ = tuning_path(dir_);
    std::string text;
    if (!codegen::disk::read_file(path_, &text)) return;  // none yet
    const std::string problem = parse(text, &entries_);
    if (problem.empty()) return;
    entries_.clear();
    warn("tuning file " + path_ + " is corrupt (" + problem + "): rebuilt empty");
    try {
      write_atomically(path_, serialize(entries_));
    } catch (const Error& e) {
      warn(std::string("tuning file not rebuilt: ") + e.what());
    }
  }

 public:
  static std::string tuning_path(const std::string& dir) {
    static const std::string name = "tuning-" + codegen::disk::hash_hex(file_key_text()).substr(0, 16) + ".txt";
    return dir + "/" + name;
  }

 private:
  std::mutex mutex_;
  bool loaded_ = false;
  std::string dir_, path_;
  std::map<std::string, Entry> entries_;
};

// Never destroyed: conv calls from other static destructors may still look up.
FileStore& file_store() {
  static FileStore* store = new FileStore;
  return *store;
}

[[maybe_unused]] const bool kInstalled = [] {
  kernels::conv_set_tuning_store(&file_store());
  return true;
}();

}  // namespace

std::string tuning_file_path() { return FileStore::tuning_path(codegen::default_cache_dir()); }

void tuning_file_reload() {
  file_store().reload();
  kernels::conv_choice_reset();
}

int tuning_file_entries() { return file_store().size(); }

}  // namespace smelt::runtime
