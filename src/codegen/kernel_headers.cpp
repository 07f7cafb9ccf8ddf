#include "codegen/kernel_headers.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "codegen/disk_cache.h"
#include "smelt/error.h"

namespace smelt::codegen {

const std::string& kernel_headers_hash() {
  static const std::string hash = [] {
    std::string all;
    for (const KernelHeader& h : kernel_headers()) {
      // Lengths first, so that no two different tables hash the same concatenation.
      all += std::to_string(std::strlen(h.path)) + ":" + h.path + std::to_string(std::strlen(h.text)) + ":" + h.text;
    }
    return disk::hash_hex(all);
  }();
  return hash;
}

std::string write_kernel_headers(const std::string& root) {
  const std::string dir = root + "/include/" + kernel_headers_hash().substr(0, 16);
  for (const KernelHeader& h : kernel_headers()) {
    const std::string path = dir + "/" + h.path;
    std::string found;
    if (disk::read_file(path, &found) && found == h.text) continue;
    disk::make_dirs(path.substr(0, path.rfind('/')));
    const std::string part = path + disk::unique_suffix();
    try {
      disk::write_file(part, h.text);
    } catch (const Error&) {
      std::remove(part.c_str());
      throw;
    }
    if (std::rename(part.c_str(), path.c_str()) != 0) {
      const int err = errno;
      std::remove(part.c_str());
      SMELT_CHECK(false) << "codegen: cannot write the kernel header " << path << ": " << std::strerror(err);
    }
  }
  return dir;
}

}  // namespace smelt::codegen
